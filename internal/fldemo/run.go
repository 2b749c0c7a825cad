package fldemo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/internal/coordcmd"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/ppo"
	"github.com/edgesched/edgesched/quant"
)

// Result is what a demo run measured.
type Result struct {
	Seed   uint64              `json:"seed"`
	Sites  []string            `json:"sites"`
	Rounds []coordinator.Round `json:"rounds"`
	// FinalVersion is the federated model's version; FinalInt8 the model
	// ID of its signed int8 artifact, which every site installed.
	FinalVersion uint64 `json:"final_version"`
	FinalInt8    string `json:"final_int8_model"`
	// Policies in table order; Evals[policy][site] their held-out results.
	Policies []string                              `json:"policies"`
	Evals    map[string]map[string]*ppo.Evaluation `json:"evaluations"`
	Verdicts []Verdict                             `json:"verdicts"`
	Seconds  map[string]float64                    `json:"seconds"`
	HeldOut  []uint64                              `json:"held_out_seeds"`
	Local    federated.LocalTraining               `json:"local_training"`
}

// Verdict compares the federated policy with one site's locally trained
// policy on the other sites' held-out workloads (mean return).
type Verdict struct {
	Site      string  `json:"site"`
	Local     float64 `json:"local_return"`
	Federated float64 `json:"federated_return"`
	Beats     bool    `json:"federated_beats_local"`
}

// Policy names in results.
const (
	Federated   = "federated"
	LocalPrefix = "local:"
)

// Run runs the demo: federated rounds over NATS, local-only training,
// evaluation and outputs (WriteOutputs).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &demo{cfg: cfg, log: cfg.Logger, start: time.Now()}
	if d.log == nil {
		d.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	res := &Result{Seed: cfg.Seed, Seconds: map[string]float64{}, HeldOut: cfg.HeldOut, Local: cfg.Local}
	scenDir := filepath.Join(cfg.Out, "sites")
	if err := os.MkdirAll(scenDir, 0o755); err != nil {
		return nil, fmt.Errorf("create output dir: %w", err)
	}
	for _, s := range cfg.Sites {
		path, err := s.writeScenario(scenDir)
		if err != nil {
			return nil, err
		}
		d.paths = append(d.paths, path)
		res.Sites = append(res.Sites, s.Name)
	}
	net, err := nn.NewNet(policy.NumFeatures, cfg.Hidden, cfg.Hidden, cfg.Hidden, rand.New(rand.NewPCG(cfg.Seed, 0xf1)))
	if err != nil {
		return nil, err
	}
	initial := &nn.Model{Schema: policy.NewSchema(), Net: net}
	d.printf("seed %d: %d sites (%s), %d rounds x %d PPO iterations x %d episodes, held-out workloads %v",
		cfg.Seed, len(cfg.Sites), joinNames(res.Sites), cfg.Rounds, cfg.Local.Iterations, cfg.Local.Episodes, cfg.HeldOut)

	t0 := time.Now()
	fed, err := d.federate(ctx, initial, res)
	if err != nil {
		return nil, fmt.Errorf("federated rounds: %w", err)
	}
	res.Seconds["federated"] = time.Since(t0).Seconds()
	t0 = time.Now()
	locals, err := d.trainLocal(ctx, initial)
	if err != nil {
		return nil, fmt.Errorf("local training: %w", err)
	}
	res.Seconds["local"] = time.Since(t0).Seconds()
	t0 = time.Now()
	if err := d.evaluate(ctx, fed, locals, res); err != nil {
		return nil, fmt.Errorf("evaluation: %w", err)
	}
	res.Seconds["evaluation"] = time.Since(t0).Seconds()
	res.Seconds["total"] = time.Since(d.start).Seconds()
	return res, nil
}

type demo struct {
	cfg   Config
	log   *slog.Logger
	start time.Time
	paths []string // site scenario files
	mu    sync.Mutex
}

func (d *demo) printf(format string, a ...any) {
	if d.cfg.Progress == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.cfg.Progress, "[%5.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, a...))
}

// siteTrain is site i's PPO configuration.
func (d *demo) siteTrain(i int) ppo.Config {
	c := d.cfg.Train
	c.Env.Scenario = d.paths[i]
	c.Net.Hidden1, c.Net.Hidden2, c.Net.CriticHidden = d.cfg.Hidden, d.cfg.Hidden, d.cfg.Hidden
	return c
}

// siteSeed is site i's training seed (the FL client derives each round's
// seed from it and its update sequence; local training does the same).
func (d *demo) siteSeed(i int) uint64 { return d.cfg.Seed*1000 + uint64(i) + 1 }

func roundSeed(site, seq uint64) uint64 { return site ^ (seq * 0x9e3779b97f4a7c15) }

// federate runs the real system: embedded NATS, coordinator, one FL
// client per site, until Rounds rounds are published and every site runs
// the final model.
func (d *demo) federate(ctx context.Context, initial *nn.Model, res *Result) (*nn.Model, error) {
	cfg := d.cfg
	for _, sub := range []string{"nats", "coordinator", "agents"} {
		if err := os.RemoveAll(filepath.Join(cfg.Out, sub)); err != nil {
			return nil, err
		}
	}
	// a fixed storage limit: nats-server's default, a share of the disk
	// free at start, can be below the coordinator's update stream (4 GiB)
	// on a machine with a few GiB free; the demo writes a few MiB
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, JetStreamMaxStore: 1 << 40,
		StoreDir: filepath.Join(cfg.Out, "nats"), NoSigs: true, NoLog: true})
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	go srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		return nil, errors.New("nats server not ready after 10s")
	}
	d.printf("embedded NATS server with JetStream on %s", srv.ClientURL())

	keyRNG := rand.NewChaCha8(seedBytes(cfg.Seed))
	coordKey, _, err := quant.GenerateKey(keyRNG)
	if err != nil {
		return nil, err
	}
	reg := &federated.Registry{}
	siteKeys := make([]*quant.Signer, len(cfg.Sites))
	for i, s := range cfg.Sites {
		if siteKeys[i], _, err = quant.GenerateKey(keyRNG); err != nil {
			return nil, err
		}
		if err := reg.Add(s.Name, siteKeys[i].Public()); err != nil {
			return nil, err
		}
	}
	calib, err := coordcmd.ScenarioCalibration(d.paths[0])
	if err != nil {
		return nil, err
	}
	cc := coordinator.DefaultConfig()
	cc.DataDir, cc.Sites, cc.Signer, cc.Calibrate, cc.Seed = filepath.Join(cfg.Out, "coordinator"), reg, coordKey, calib, cfg.Seed
	cc.Logger = d.log.With("component", "coordinator")
	cc.MinUpdates, cc.RoundDuration, cc.AutoRounds, cc.Rounds = len(cfg.Sites), time.Hour, true, cfg.Rounds
	cc.Local, cc.PollInterval, cc.ServerLR = cfg.Local, 100*time.Millisecond, cfg.ServerLR
	c, err := coordinator.New(cc)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.Bootstrap(ctx, initial); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	// each identity with its own inbox prefix, as the fleet's NATS
	// permissions require (docs/security.md)
	connect := func(name, inbox string) (*nats.Conn, error) {
		return nats.Connect(srv.ClientURL(), nats.Name(name), nats.MaxReconnects(-1), nats.CustomInboxPrefix(inbox))
	}
	nc, err := connect("coordinator", natsauth.CoordinatorInboxPrefix)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	errc := make(chan error, len(cfg.Sites)+1)
	wg.Add(1)
	go func() { defer wg.Done(); errc <- c.Run(runCtx, nc) }()

	keyring := &quant.Keyring{}
	if _, err := keyring.Add(coordKey.Public()); err != nil {
		return nil, err
	}
	clients := make([]*flclient.Client, len(cfg.Sites))
	for i, s := range cfg.Sites {
		ac := flclient.DefaultConfig()
		ac.Site, ac.Signer, ac.ModelKeys, ac.DataDir = s.Name, siteKeys[i], keyring, filepath.Join(cfg.Out, "agents", s.Name)
		ac.Trainer, ac.Seed, ac.ReportInterval = &flclient.PPOTrainer{Config: d.siteTrain(i)}, d.siteSeed(i), time.Second
		ac.Logger = d.log.With("component", "agent", "site", s.Name)
		cl, err := flclient.New(ac)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		clients[i] = cl
		snc, err := connect(s.Name, natsauth.SiteInboxPrefix(s.Name))
		if err != nil {
			return nil, err
		}
		defer snc.Close()
		wg.Add(1)
		go func() { defer wg.Done(); errc <- cl.Run(runCtx, snc) }()
	}
	d.printf("coordinator and %d sites up: sync FedAvg, quorum %d, int8 updates, signed int8 models", len(cfg.Sites), cc.MinUpdates)

	// Follow the rounds until the last is published and installed.
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	reported := uint64(0)
	roundStart := time.Now()
	var status siteStatusLine
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case err := <-errc:
			if err != nil && !errors.Is(err, context.Canceled) {
				return nil, err
			}
		case <-tick.C:
		}
		rs, err := c.Rounds(0)
		if err != nil {
			return nil, err
		}
		for i := len(rs) - 1; i >= 0; i-- {
			r := rs[i]
			if r.Round <= reported {
				continue
			}
			if r.State == coordinator.StateFailed {
				return nil, fmt.Errorf("round %d failed: %s", r.Round, r.Note)
			}
			if r.State != coordinator.StatePublished {
				break
			}
			reported = r.Round
			d.printf("round %d/%d published: model v%d from %d site updates (%.1fs)", r.Round, cfg.Rounds, r.Result, r.Accepted, time.Since(roundStart).Seconds())
			roundStart = time.Now()
		}
		if reported < uint64(cfg.Rounds) {
			if line := roundProgress(rs, cfg, clients); line != "" && status.due(line, time.Now()) {
				d.printf("%s (%.0fs)", line, time.Since(roundStart).Seconds())
			}
			continue
		}
		final, err := c.ModelRecord(0)
		if err != nil {
			return nil, err
		}
		installed := 0
		for _, cl := range clients {
			if st, err := cl.Status(); err == nil && st.Installed != nil && st.Installed.Version == final.Version {
				installed++
			}
		}
		if installed < len(clients) {
			continue
		}
		d.printf("every site verified and installed model v%d (int8 %s)", final.Version, final.Int8Model[:12])
		res.FinalVersion, res.FinalInt8 = final.Version, final.Int8Model
		all, err := c.Rounds(cfg.Rounds)
		if err != nil {
			return nil, err
		}
		for i := len(all) - 1; i >= 0; i-- {
			res.Rounds = append(res.Rounds, all[i])
		}
		return c.FloatModel(final.Version)
	}
}

// statusEvery is how often an unchanged per-site status is repeated, so
// a long round never leaves the terminal silent.
const statusEvery = 10 * time.Second

// siteStatusLine remembers the last per-site status printed.
type siteStatusLine struct {
	last string
	at   time.Time
}

// due reports whether line is worth printing at now: it changed, or the
// last one is statusEvery old.
func (s *siteStatusLine) due(line string, now time.Time) bool {
	if line == s.last && now.Sub(s.at) < statusEvery {
		return false
	}
	s.last, s.at = line, now
	return true
}

// roundProgress is the open round's per-site status ("" when none is
// open): which sites are still training and which have sent their
// update (queued: sent but not yet acknowledged by the coordinator).
func roundProgress(rs []coordinator.Round, cfg Config, clients []*flclient.Client) string {
	var open *coordinator.Round
	for i := range rs {
		if rs[i].State == coordinator.StateCollecting || rs[i].State == coordinator.StateAggregating {
			open = &rs[i]
			break
		}
	}
	if open == nil {
		return ""
	}
	parts := make([]string, len(clients))
	for i, cl := range clients {
		state := "training"
		if st, err := cl.Status(); err != nil {
			state = "status unknown"
		} else if st.Round >= open.Round {
			state = "sent"
			if st.Outbox > 0 {
				state = "queued"
			}
		}
		parts[i] = cfg.Sites[i].Name + " " + state
	}
	return fmt.Sprintf("round %d/%d %s: %d/%d updates accepted; %s", open.Round, cfg.Rounds, open.State, open.Accepted, len(clients), strings.Join(parts, ", "))
}

// trainLocal trains every site alone: the same rounds of the same size
// from the same initial model, but each round continues from the site's
// own model instead of the federated one.
func (d *demo) trainLocal(ctx context.Context, initial *nn.Model) ([]*nn.Model, error) {
	cfg := d.cfg
	d.printf("training each site alone for comparison: %d rounds each", cfg.Rounds)
	out := make([]*nn.Model, len(cfg.Sites))
	errs := make([]error, len(cfg.Sites))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, s := range cfg.Sites {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			tr := &flclient.PPOTrainer{Config: d.siteTrain(i)}
			m := initial
			began := time.Now()
			for r := 1; r <= cfg.Rounds; r++ {
				next, _, err := tr.Train(ctx, m, cfg.Local, roundSeed(d.siteSeed(i), uint64(r)))
				if err != nil {
					errs[i] = fmt.Errorf("site %s round %d: %w", s.Name, r, err)
					return
				}
				m = next
				if r < cfg.Rounds { // a line per round: minutes of PPO are not silent
					d.printf("local-only %s: round %d/%d trained (%.0fs)", s.Name, r, cfg.Rounds, time.Since(began).Seconds())
				}
			}
			out[i] = m
			d.printf("local-only %s: %d rounds done (%.0fs)", s.Name, cfg.Rounds, time.Since(began).Seconds())
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// evaluate runs every policy on every site's held-out workloads.
func (d *demo) evaluate(ctx context.Context, fed *nn.Model, locals []*nn.Model, res *Result) error {
	cfg := d.cfg
	type job struct {
		policy   string
		model    *nn.Model
		baseline string
		site     int
	}
	models := map[string]*nn.Model{Federated: fed.WithoutBounds()}
	res.Policies = append(append([]string{}, cfg.Baselines...), Federated)
	for i, s := range cfg.Sites {
		name := LocalPrefix + s.Name
		res.Policies = append(res.Policies, name)
		// a local model's bounds are its own site's range (and the base
		// model's) and would clamp the other sites' workloads, and the
		// federated model's are the base model's: compare networks alone,
		// all unbounded
		models[name] = locals[i].WithoutBounds()
	}
	var jobs []job
	for _, p := range res.Policies {
		for i := range cfg.Sites {
			j := job{policy: p, site: i, model: models[p]}
			if j.model == nil {
				j.baseline = p
			}
			jobs = append(jobs, j)
		}
	}
	d.printf("evaluating %d policies on %d sites' held-out workloads (%d runs)", len(res.Policies), len(cfg.Sites), len(jobs)*len(cfg.HeldOut))
	res.Evals = map[string]map[string]*ppo.Evaluation{}
	for _, p := range res.Policies {
		res.Evals[p] = map[string]*ppo.Evaluation{}
	}
	var mu sync.Mutex
	var firstErr error
	next := make(chan job)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				ev, err := ppo.Evaluate(ctx, d.siteTrain(j.site), j.model, j.baseline, cfg.HeldOut)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("%s on %s: %w", j.policy, cfg.Sites[j.site].Name, err)
				}
				if err == nil {
					res.Evals[j.policy][cfg.Sites[j.site].Name] = ev
				}
				mu.Unlock()
			}
		}()
	}
	for _, j := range jobs {
		select {
		case next <- j:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, s := range cfg.Sites {
		var fedSum, locSum float64
		var n int
		for _, o := range cfg.Sites {
			if o.Name == s.Name {
				continue
			}
			fedSum += res.Evals[Federated][o.Name].Return
			locSum += res.Evals[LocalPrefix+s.Name][o.Name].Return
			n++
		}
		v := Verdict{Site: s.Name, Federated: fedSum / float64(n), Local: locSum / float64(n)}
		v.Beats = v.Federated > v.Local
		res.Verdicts = append(res.Verdicts, v)
	}
	return nil
}

func seedBytes(seed uint64) [32]byte {
	var b [32]byte
	for i := range 8 {
		b[i] = byte(seed >> (8 * i))
	}
	copy(b[8:], "edgesched-fldemo")
	return b
}

func joinNames(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}
