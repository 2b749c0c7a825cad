package site

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/agent/trace"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/atomicfile"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/ppo"
)

// TwinTrainer trains in the site's digital twin: on every round it
// exports the recorded workload trace (the last Window of it) as a
// scenario file in Dir and runs flclient.PPOTrainer on it, with PPO's
// settings from Config (its env's scenario is replaced by the twin; the
// round's iterations, episodes, learning rate and FedProx coefficient
// come from the coordinator).
type TwinTrainer struct {
	Trace *trace.Store
	// Window is how much of the trace the twin replays (0: all retained).
	Window time.Duration
	// Dir receives twin.yaml (replaced on every round).
	Dir string
	// Config is the PPO configuration template (ppo.DefaultConfig() with
	// a smaller network, or the site's own).
	Config ppo.Config
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

var _ flclient.Trainer = (*TwinTrainer)(nil)

// ErrNoTwin is returned while the trace has no workload to train on.
var ErrNoTwin = errors.New("site: no workload recorded yet to build the twin")

// Train implements flclient.Trainer.
func (t *TwinTrainer) Train(ctx context.Context, base *policy.Model, local federated.LocalTraining, seed uint64) (*policy.Model, int64, error) {
	path, err := t.Build()
	if err != nil {
		return nil, 0, err
	}
	cfg := t.Config
	cfg.Env.Scenario, cfg.Env.Nodes, cfg.Env.Pods = path, "", ""
	return (&flclient.PPOTrainer{Config: cfg}).Train(ctx, base, local, seed)
}

// Build exports the twin scenario to Dir/twin.yaml (written to a
// temporary file and renamed, so a reader never sees half of it) and
// returns its path.
func (t *TwinTrainer) Build() (string, error) {
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	opt := trace.ExportOptions{Name: "site-twin", Until: now()}
	if t.Window > 0 {
		opt.Since = opt.Until.Add(-t.Window)
	}
	out, _, err := t.Trace.Export(opt)
	if errors.Is(err, trace.ErrEmpty) {
		return "", fmt.Errorf("%w: %w", ErrNoTwin, err)
	}
	if err != nil {
		return "", fmt.Errorf("export the twin: %w", err)
	}
	if err := os.MkdirAll(t.Dir, 0o700); err != nil {
		return "", fmt.Errorf("twin directory: %w", err)
	}
	path := filepath.Join(t.Dir, "twin.yaml")
	if err := atomicfile.Write(path, out, 0o600); err != nil {
		return "", fmt.Errorf("write the twin: %w", err)
	}
	return path, nil
}
