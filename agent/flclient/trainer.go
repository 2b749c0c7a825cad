package flclient

import (
	"context"
	"errors"
	"math/rand/v2"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/ppo"
)

// PPOTrainer trains in the site's twin: PPO fine-tuning (package
// policy/ppo) of the round's base model on the site's environment (Config's
// env: its scenario, or its slice of a cluster and its pods), with the
// round's iterations, episodes, learning rate and FedProx coefficient.
type PPOTrainer struct {
	Config ppo.Config
}

var _ Trainer = (*PPOTrainer)(nil)

// Train implements Trainer.
func (p *PPOTrainer) Train(ctx context.Context, base *nn.Model, local federated.LocalTraining, seed uint64) (*nn.Model, int64, error) {
	m, n, err := ppo.FineTune(ctx, nil, base, p.Config, LocalOptions(local, seed))
	return m, int64(n), err
}

// LocalOptions are a round's local training settings as ppo.FineTune's,
// on rows held within the base model's input bounds, which the
// federation's versions keep (ppo.FineTuneOptions.KeepBounds).
func LocalOptions(local federated.LocalTraining, seed uint64) ppo.FineTuneOptions {
	return ppo.FineTuneOptions{Iterations: local.Iterations, Episodes: local.Episodes, LR: local.LR, ProxMu: local.ProxMu, KeepBounds: true, Seed: seed}
}

// SyntheticTrainer moves the model a fixed fraction of the way towards a
// target (plus seeded noise): a stand-in for training in protocol tests
// and benchmarks, where what matters is that updates are real weight
// deltas of the right shape, not what they learn.
type SyntheticTrainer struct {
	// Target in nn.Model.Flat order; Rate in (0, 1]; Noise is the
	// standard deviation added per parameter; Samples the update weight.
	Target  []float32
	Rate    float32
	Noise   float64
	Samples int64
}

// Train implements Trainer.
func (s *SyntheticTrainer) Train(_ context.Context, base *nn.Model, _ federated.LocalTraining, seed uint64) (*nn.Model, int64, error) {
	w := base.Flat()
	if len(s.Target) != len(w) {
		return nil, 0, errors.New("flclient: synthetic target has the wrong size")
	}
	rng := rand.New(rand.NewPCG(seed, 0x5e))
	delta := make([]float32, len(w))
	for i := range w {
		delta[i] = s.Rate*(s.Target[i]-w[i]) + float32(s.Noise*rng.NormFloat64())
	}
	out := base.Clone()
	if err := out.AddFlat(delta, 1); err != nil {
		return nil, 0, err
	}
	return out, max(1, s.Samples), nil
}
