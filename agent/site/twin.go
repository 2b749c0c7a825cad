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
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/ppo"
	"github.com/edgesched/edgesched/policy/sage"
	"github.com/edgesched/edgesched/sim/scenario"
)

// TwinTrainer trains in the site's digital twin: on every round it
// exports the recorded workload trace (the last Window of it) as a
// simulator scenario and fine-tunes the round's model on it in memory
// (ppo.FineTune), with PPO's settings from Config (its environment is
// replaced by the twin; the round's iterations, episodes, learning rate
// and FedProx coefficient come from the coordinator). When the model
// carries GraphSAGE weights and the twin has calls between services, it
// also fine-tunes those weights on the twin's call graph (Sage), so the
// update carries both (nn.Model.Flat). Dir, when set, keeps
// the last round's scenario as twin.yaml, for an operator to inspect or
// replay (`edgectl sim --scenario`); training does not read it.
type TwinTrainer struct {
	Trace *trace.Store
	// Window is how much of the trace the twin replays (0: all retained).
	Window time.Duration
	// Dir receives twin.yaml, replaced on every round (empty: none).
	Dir string
	// Config is the PPO configuration template (ppo.DefaultConfig() with
	// a smaller network, or the site's own).
	Config ppo.Config
	// Sage trains the GraphSAGE weights a round's model carries
	// (nn.Model.Sage) on the twin's call graph, by link prediction
	// (sage.FineTune: its epochs, learning rate and negatives; the seed
	// is the round's). The zero value is DefaultSageTraining.
	Sage sage.PretrainConfig
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

var _ flclient.Trainer = (*TwinTrainer)(nil)

// ErrNoTwin is returned while the trace has no workload to train on.
var ErrNoTwin = errors.New("site: no workload recorded yet to build the twin")

// Train implements flclient.Trainer.
func (t *TwinTrainer) Train(ctx context.Context, base *nn.Model, local federated.LocalTraining, seed uint64) (*nn.Model, int64, error) {
	l, doc, err := t.twin()
	if err != nil {
		return nil, 0, err
	}
	if t.Dir != "" {
		if _, err := t.write(doc); err != nil {
			return nil, 0, err
		}
	}
	env, err := sage.NewEnvWith(l.Cluster, l.Workload, base.Sage)
	if err != nil {
		return nil, 0, fmt.Errorf("the twin's environment: %w", err)
	}
	m, n, err := ppo.FineTune(ctx, env, base, t.Config, flclient.LocalOptions(local, seed))
	if err != nil || base.Sage == nil || len(env.Edges) == 0 {
		return m, int64(n), err
	}
	if m.Sage, err = t.trainSage(ctx, base.Sage, sage.CallsOf(env), seed); err != nil {
		return nil, 0, err
	}
	return m, int64(n), nil
}

// DefaultSageTraining is TwinTrainer's default GraphSAGE fine-tuning: 20
// epochs over the twin's graph at learning rate 0.001 (a tenth of
// pre-training's), 5 negatives per call.
func DefaultSageTraining() sage.PretrainConfig {
	c := sage.DefaultPretrainConfig()
	c.Epochs, c.LR = 20, 0.001
	return c
}

// trainSage fine-tunes w on the twin's calls (sage.FineTune, seeded with
// the round's seed).
func (t *TwinTrainer) trainSage(ctx context.Context, w *policy.SageWeights, calls *sage.Graph, seed uint64) (*policy.SageWeights, error) {
	cfg := t.Sage
	if cfg.Epochs == 0 {
		cfg = DefaultSageTraining()
	}
	cfg.Seed = seed
	p, err := sage.FromWeights(w)
	if err != nil {
		return nil, fmt.Errorf("the model's GraphSAGE weights: %w", err)
	}
	tuned, err := sage.FineTune(ctx, p, []*sage.Graph{calls}, cfg, nil)
	if errors.Is(err, sage.ErrGraph) {
		return w.Clone(), nil // no call between two services: nothing to learn from
	}
	if err != nil {
		return nil, fmt.Errorf("train the GraphSAGE weights on the twin's calls: %w", err)
	}
	return tuned.Weights(), nil
}

// Build exports the twin scenario to Dir/twin.yaml (written to a
// temporary file and renamed, so a reader never sees half of it) and
// returns its path.
func (t *TwinTrainer) Build() (string, error) {
	_, doc, err := t.twin()
	if err != nil {
		return "", err
	}
	return t.write(doc)
}

// twin exports the trace's window: the loaded scenario and its document.
func (t *TwinTrainer) twin() (*scenario.Loaded, []byte, error) {
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	opt := trace.ExportOptions{Name: "site-twin", Until: now()}
	if t.Window > 0 {
		opt.Since = opt.Until.Add(-t.Window)
	}
	l, doc, _, err := t.Trace.ExportLoaded(opt)
	if errors.Is(err, trace.ErrEmpty) {
		return nil, nil, fmt.Errorf("%w: %w", ErrNoTwin, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("export the twin: %w", err)
	}
	return l, doc, nil
}

// write replaces Dir/twin.yaml with doc.
func (t *TwinTrainer) write(doc []byte) (string, error) {
	if t.Dir == "" {
		return "", errors.New("site: no twin directory")
	}
	if err := os.MkdirAll(t.Dir, 0o700); err != nil {
		return "", fmt.Errorf("twin directory: %w", err)
	}
	path := filepath.Join(t.Dir, "twin.yaml")
	if err := atomicfile.Write(path, doc, 0o600); err != nil {
		return "", fmt.Errorf("write the twin: %w", err)
	}
	return path, nil
}
