package site

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/internal/backoff"
)

// FLConfig configures the leader's federated-learning component.
type FLConfig struct {
	// Client is this agent's FL client, created with
	// flclient.Config.Sequencer set to Ledger (so its sequences and
	// unsent updates are the site's). The caller closes it after the
	// Elector's Run returned.
	Client *flclient.Client
	// Conn is the agent's NATS connection (connect with
	// nats.RetryOnFailedConnect(true) and nats.MaxReconnects(-1): the
	// client survives any outage).
	Conn   *nats.Conn
	Ledger *Ledger
	// BackoffMin and BackoffMax pace retries of the reconciliation
	// (defaults 1s, 30s).
	BackoffMin, BackoffMax time.Duration
	// AdoptInterval is how often the leader looks for handovers other
	// agents made after its term began (Ledger.AdoptLate; default 1m).
	AdoptInterval time.Duration
	Seed          uint64
	Logger        *slog.Logger
}

// FL is the leader-only component that runs the FL client: on each term
// it first reconciles the client's outbox with the site ledger (adopting
// the unsent updates of earlier leaders, dropping what they delivered),
// then runs the client until the term ends.
type FL struct {
	cfg FLConfig
	log *slog.Logger
}

var _ Component = (*FL)(nil)

// NewFL checks cfg.
func NewFL(cfg FLConfig) (*FL, error) {
	if cfg.BackoffMin == 0 {
		cfg.BackoffMin = time.Second
	}
	if cfg.BackoffMax == 0 {
		cfg.BackoffMax = 30 * time.Second
	}
	if cfg.AdoptInterval == 0 {
		cfg.AdoptInterval = time.Minute
	}
	switch {
	case cfg.Client == nil || cfg.Conn == nil || cfg.Ledger == nil:
		return nil, fmt.Errorf("%w: FL needs Client, Conn and Ledger", ErrConfig)
	case cfg.BackoffMax < cfg.BackoffMin || cfg.BackoffMin < 0:
		return nil, fmt.Errorf("%w: FL backoff", ErrConfig)
	case cfg.AdoptInterval < 0:
		return nil, fmt.Errorf("%w: FL AdoptInterval %v", ErrConfig, cfg.AdoptInterval)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &FL{cfg: cfg, log: log}, nil
}

// Run reconciles, then runs the client until ctx ends, adopting every
// AdoptInterval the handovers other agents made meanwhile.
func (f *FL) Run(ctx context.Context) error {
	b := backoff.New(f.cfg.BackoffMin, f.cfg.BackoffMax, f.cfg.Seed^0xf1)
	var r Reconciled
	for {
		var err error
		if r, err = f.cfg.Ledger.Reconcile(ctx, f.cfg.Client); err == nil {
			f.log.Info("FL client starting as the site's leader", "ledger_seq", r.Ledger.Seq, "adopted", len(r.Adopted), "forgotten", len(r.Forgotten), "full", len(r.Full))
			break
		}
		f.log.Warn("outbox not reconciled with the site ledger; retrying", "err", err)
		if !b.Sleep(ctx) {
			return ctx.Err()
		}
	}
	scan := NewLateScan(r)
	actx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { // owned by Run: stopped and waited for before it returns
		defer close(done)
		t := time.NewTicker(f.cfg.AdoptInterval)
		defer t.Stop()
		for {
			select {
			case <-actx.Done():
				return
			case <-t.C:
			}
			if _, err := f.cfg.Ledger.AdoptLate(actx, f.cfg.Client, scan); err != nil && actx.Err() == nil {
				f.log.Warn("late handovers not adopted; trying again later", "err", err, "in", f.cfg.AdoptInterval)
			}
		}
	}()
	err := f.cfg.Client.Run(ctx, f.cfg.Conn)
	stop()
	<-done
	return err
}
