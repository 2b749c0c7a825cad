package ppo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
)

// Evaluation is a policy's mean result over evaluation workloads.
type Evaluation struct {
	// Return is the mean episode return under the configuration's reward
	// (greedy actions for a model).
	Return float64 `json:"return"`
	// Measures are the simulator's measures (engine.Measures), averaged.
	Measures map[string]float64 `json:"measures"`
	Seeds    []uint64           `json:"seeds"`
}

// Evaluate runs a policy on cfg's environment for each seed and averages
// the return under cfg.Reward and the simulator's measures. For scenarios
// with FreshWorkloads each seed is a scenario generator seed (the
// workloads PPO trains on come from other seeds), otherwise the run seed.
// The policy is m acting greedily, or, with m nil, the deterministic
// baseline named baseline. It is how `edgectl demo` compares federated,
// locally trained and baseline policies on the same held-out workloads.
func Evaluate(ctx context.Context, cfg Config, m *nn.Model, baseline string, seeds []uint64) (*Evaluation, error) {
	if len(seeds) == 0 {
		return nil, errors.New("ppo: evaluate: no seeds")
	}
	if m == nil && baseline == "" {
		return nil, errors.New("ppo: evaluate: neither a model nor a baseline")
	}
	if m != nil {
		if err := m.Validate(); err != nil {
			return nil, fmt.Errorf("evaluate: %w", err)
		}
	}
	t := &trainer{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := t.loadEnv(); err != nil {
		return nil, err
	}
	mode, bc := actGreedy, cfg.BC
	var net *nn.Net
	schema := policy.NewSchema()
	if m != nil {
		net, schema = m.Net, m.Schema
	} else {
		mode, bc.Teacher = actTeacher, baseline
	}
	out := &Evaluation{Measures: map[string]float64{}, Seeds: seeds}
	for _, seed := range seeds {
		env, err := t.evalEnv(seed)
		if err != nil {
			return nil, err
		}
		rc := t.runConfig(true)
		rc.Seed = seed
		var n *nn.Net
		if net != nil {
			n = net.Clone()
		}
		ep, err := runEpisode(ctx, env, n, schema, mode, bc, rc, cfg.Reward, seed, false, 0)
		if err != nil {
			return nil, err
		}
		out.Return += ep.ret / float64(len(seeds))
		for k, v := range ep.measures {
			out.Measures[k] += v / float64(len(seeds))
		}
	}
	return out, nil
}
