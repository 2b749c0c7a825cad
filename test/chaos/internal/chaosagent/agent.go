package chaosagent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/internal/backoff"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/test/chaos/internal/history"
)

// Options are the agent's flags.
type Options struct {
	Site, KeyFile, ModelKeyFile, NATS, DataDir, History string
	// Seed drives the client (training and rounding seeds); FleetSeed
	// the synthetic trainer's target, shared by the fleet.
	Seed, FleetSeed uint64
	// Skew offsets the client's clock.
	Skew time.Duration
	// Client settings (see flclient.Config).
	AsyncInterval, PublishTimeout, BackoffMin, BackoffMax time.Duration
	StatePoll, ReportInterval, MaxModelAge, FreezeAfter   time.Duration
	OutboxLimit                                           int
	// TrainTime is how long one synthetic training takes.
	TrainTime time.Duration
	// QuiesceFile: while it exists, no new updates are made.
	QuiesceFile string
	LogLevel    string
}

func parse(args []string, stderr io.Writer) (*Options, error) {
	fs := flag.NewFlagSet("chaos-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	d := flclient.DefaultConfig()
	o := &Options{}
	fs.StringVar(&o.Site, "site", "", "site ID (required)")
	fs.StringVar(&o.KeyFile, "site-key", "", "the site's private key file that signs its updates (required)")
	fs.StringVar(&o.ModelKeyFile, "model-keys", "", "trusted model-signing public keys: a file or a directory of *.pub (required)")
	fs.StringVar(&o.NATS, "server", nats.DefaultURL, "NATS server URL")
	fs.StringVar(&o.DataDir, "data", "", "data directory of agent.db (required)")
	fs.StringVar(&o.History, "history", "", "history file, JSON lines, appended (required; keep it off the data directory's disk)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the client")
	fs.Uint64Var(&o.FleetSeed, "fleet-seed", 1, "seed of the synthetic trainer's target (the same across the fleet)")
	fs.DurationVar(&o.Skew, "clock-skew", 0, "offset of the client's clock (e.g. -3m)")
	fs.DurationVar(&o.AsyncInterval, "async-interval", time.Second, "async rounds: train every interval")
	fs.DurationVar(&o.PublishTimeout, "publish-timeout", 2*time.Second, "one publish attempt's timeout")
	fs.DurationVar(&o.BackoffMin, "backoff-min", 20*time.Millisecond, "publish retry backoff, smallest step")
	fs.DurationVar(&o.BackoffMax, "backoff-max", time.Second, "publish retry backoff, largest step")
	fs.DurationVar(&o.StatePoll, "state-poll", time.Second, "re-read the round and model keys this often")
	fs.DurationVar(&o.ReportInterval, "report-interval", time.Second, "site report interval")
	fs.DurationVar(&o.MaxModelAge, "model-max-age", time.Hour, "refuse models older than this (0: no limit)")
	fs.DurationVar(&o.FreezeAfter, "freeze-after", 0, "report the model feed frozen after this (0: off)")
	fs.IntVar(&o.OutboxLimit, "outbox-limit", d.OutboxLimit, "outbox bound")
	fs.DurationVar(&o.TrainTime, "train-time", 20*time.Millisecond, "time one synthetic training takes")
	fs.StringVar(&o.QuiesceFile, "quiesce-file", "", "make no new updates while this file exists (deliveries and installs go on)")
	fs.StringVar(&o.LogLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, req := range []struct{ name, v string }{{"site", o.Site}, {"site-key", o.KeyFile}, {"model-keys", o.ModelKeyFile}, {"data", o.DataDir}, {"history", o.History}} {
		if req.v == "" {
			return nil, fmt.Errorf("--%s is required", req.name)
		}
	}
	return o, nil
}

// Main runs the agent with args until ctx ends. It returns the exit
// code.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	if err := run(ctx, args, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "chaos-agent:", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.LogLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("site", o.Site)
	signer, err := quant.ReadSigner(o.KeyFile)
	if err != nil {
		return fmt.Errorf("--site-key: %w", err)
	}
	keys, err := quant.LoadKeyring(o.ModelKeyFile)
	if err != nil {
		return fmt.Errorf("--model-keys: %w", err)
	}
	h, err := history.Create(o.History, nil)
	if err != nil {
		return fmt.Errorf("--history: %w", err)
	}
	defer h.Close()
	own := &federated.Registry{}
	if err := own.Add(o.Site, signer.Public()); err != nil {
		return fmt.Errorf("--site: %w", err)
	}
	tr := &trainer{fleetSeed: o.FleetSeed, delay: o.TrainTime, quiesceFile: o.QuiesceFile}
	cfg := flclient.DefaultConfig()
	cfg.Site, cfg.Signer, cfg.ModelKeys, cfg.DataDir, cfg.Trainer, cfg.Seed, cfg.Logger = o.Site, signer, keys, o.DataDir, tr, o.Seed, log
	cfg.AsyncInterval, cfg.PublishTimeout, cfg.BackoffMin, cfg.BackoffMax = o.AsyncInterval, o.PublishTimeout, o.BackoffMin, o.BackoffMax
	cfg.StatePoll, cfg.ReportInterval, cfg.MaxModelAge, cfg.FreezeAfter, cfg.OutboxLimit = o.StatePoll, o.ReportInterval, o.MaxModelAge, o.FreezeAfter, o.OutboxLimit
	skew := o.Skew
	cfg.Now = func() time.Time { return time.Now().Add(skew) }
	cfg.Sequencer = &recorder{h: h, keys: own, log: log}
	if err := cfg.Validate(); err != nil {
		return err
	}

	// The store may sit on a full disk: retry opening it until ctx ends.
	c, err := open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := state(c)
	if err != nil {
		return fmt.Errorf("read the store: %w", err)
	}
	if err := h.Write(history.Record{Ev: history.EvStart, PID: os.Getpid(), SkewNS: int64(skew), State: st}); err != nil {
		return err
	}
	log.Info("chaos agent up", "seq", st.Seq, "outbox", len(st.Outbox), "installed", st.Installed, "clock_skew", skew)
	c.OnModel(func(in flclient.Installed) {
		if err := h.Write(history.Record{Ev: history.EvInstalled, Version: in.Version, Round: in.Round, Model: in.Int8}); err != nil {
			log.Error("history", "err", err)
		}
	})

	nc, err := nats.Connect(o.NATS, nats.Name("chaos-agent-"+o.Site), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(100*time.Millisecond), nats.ReconnectJitter(100*time.Millisecond, 500*time.Millisecond),
		nats.Timeout(2*time.Second), nats.PingInterval(2*time.Second), nats.MaxPingsOutstanding(3),
		nats.CustomInboxPrefix(natsauth.SiteInboxPrefix(o.Site)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { log.Warn("NATS", "err", err) }))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", o.NATS, err)
	}
	defer nc.Close()

	err = c.Run(ctx, nc)
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("client: %w", err)
	}
	st, err = state(c)
	if err != nil {
		return fmt.Errorf("read the store: %w", err)
	}
	if err := h.Write(history.Record{Ev: history.EvStop, PID: os.Getpid(), State: st}); err != nil {
		return err
	}
	log.Info("chaos agent stopped", "seq", st.Seq, "outbox", len(st.Outbox), "installed", st.Installed)
	return nil
}

// open creates the client, retrying with backoff while its store cannot
// be opened (a full disk).
func open(ctx context.Context, cfg flclient.Config, log *slog.Logger) (*flclient.Client, error) {
	b := backoff.New(50*time.Millisecond, 2*time.Second, cfg.Seed^0x0be)
	for {
		c, err := flclient.New(cfg)
		if err == nil {
			return c, nil
		}
		log.Warn("open the store; retrying", "err", err)
		if !b.Sleep(ctx) {
			return nil, fmt.Errorf("open the store: %w", err)
		}
	}
}

// state reads the client's durable state for the history.
func state(c *flclient.Client) (*history.State, error) {
	s, err := c.Status()
	if err != nil {
		return nil, err
	}
	ob, err := c.Outbox()
	if err != nil {
		return nil, err
	}
	st := &history.State{Seq: s.Seq, Outbox: ob, DroppedFull: s.Counters.DroppedFull, Published: s.Counters.Published,
		RefusedModels: s.Counters.RefusedModelReasons}
	if s.Installed != nil {
		st.Installed = s.Installed.Version
	}
	return st, nil
}

// recorder is the Sequencer that records: it hands out the sequence the
// client would use alone and writes Stage and Done to the history.
type recorder struct {
	h    *history.Writer
	keys *federated.Registry
	log  *slog.Logger
}

var _ flclient.Sequencer = (*recorder)(nil)

// Reserve implements flclient.Sequencer: the client's newest plus one.
// A sequence whose outbox write failed is handed out again, which is
// what the client does without a Sequencer.
func (r *recorder) Reserve(_ context.Context, _, after uint64, _ bool) (uint64, error) {
	return after + 1, nil
}

// Stage implements flclient.Sequencer: the record is written before the
// client's outbox write, so every committed update has one.
func (r *recorder) Stage(_ context.Context, seq, round uint64, _ bool, msg []byte) error {
	rec := history.Record{Ev: history.EvStaged, Seq: seq, Round: round}
	if m, err := federated.DecodeUpdateMsg(msg, r.keys); err == nil {
		rec.BaseVersion = m.Header.BaseVersion
	} else {
		r.log.Error("own update does not decode", "seq", seq, "err", err)
	}
	return r.h.Write(rec)
}

// Done implements flclient.Sequencer.
func (r *recorder) Done(_ context.Context, seq uint64) error {
	return r.h.Write(history.Record{Ev: history.EvDone, Seq: seq})
}

// errQuiesced refuses training while the quiesce file exists.
var errQuiesced = errors.New("chaosagent: quiesced, no new updates")

// trainer is flclient.SyntheticTrainer towards a target drawn from the
// fleet's seed (so the fleet's models converge), taking delay per call.
type trainer struct {
	fleetSeed   uint64
	delay       time.Duration
	quiesceFile string

	mu    sync.Mutex
	inner *flclient.SyntheticTrainer
}

var _ flclient.Trainer = (*trainer)(nil)

// Train implements flclient.Trainer.
func (t *trainer) Train(ctx context.Context, base *nn.Model, local federated.LocalTraining, seed uint64) (*nn.Model, int64, error) {
	if t.quiesceFile != "" {
		if _, err := os.Stat(t.quiesceFile); err == nil {
			return nil, 0, errQuiesced
		}
	}
	n := base.NumParams()
	t.mu.Lock()
	if t.inner == nil || len(t.inner.Target) != n {
		rng := rand.New(rand.NewPCG(t.fleetSeed, 0x7a59e7))
		target := make([]float32, n)
		for i := range target {
			target[i] = float32(0.5 * rng.NormFloat64())
		}
		t.inner = &flclient.SyntheticTrainer{Target: target, Rate: 0.3, Noise: 0.001, Samples: 100}
	}
	inner := t.inner
	t.mu.Unlock()
	if t.delay > 0 {
		tm := time.NewTimer(t.delay)
		select {
		case <-ctx.Done():
			tm.Stop()
			return nil, 0, ctx.Err()
		case <-tm.C:
		}
	}
	return inner.Train(ctx, base, local, seed)
}
