package ppo

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/sim"
)

// FineTuneOptions are one local fine-tuning run's settings (a federated
// round's, for a site). The zero value is not valid: Iterations, Episodes
// and LR must be positive.
type FineTuneOptions struct {
	// Iterations and Episodes are PPO iterations and episodes per
	// iteration; LR the learning rate.
	Iterations, Episodes int
	LR                   float64
	// ProxMu is FedProx's coefficient (0: none): the local model is kept
	// near base.
	ProxMu float64
	// KeepBounds trains on rows held within base's input bounds and keeps
	// them (Options.KeepBounds): a federated round's local training.
	KeepBounds bool
	// Seed seeds the run's random source (episodes, minibatches).
	Seed uint64
	// Logger receives progress lines; nil discards them.
	Logger *slog.Logger
}

// FineTune trains base with PPO on env, in memory: no behaviour cloning,
// no evaluation seeds, no files. It is the site twin's local training
// (agent/site) and the federated client's (agent/flclient). cfg supplies
// the PPO hyperparameters, the reward and the run settings (mode, workers,
// network exclusions); its network sizes, cloning, refine, evaluation and
// iteration counts are replaced by base's and o's. With env nil the
// episodes come from cfg's env section (a scenario, or openb lists and
// their node fractions), as in Train. The returned model decides with
// base's decision rule (the round's, not the configuration's); decisions
// counts the PPO samples it learned from.
func FineTune(ctx context.Context, env *sim.Env, base *nn.Model, cfg Config, o FineTuneOptions) (m *nn.Model, decisions int, err error) {
	if base == nil {
		return nil, 0, fmt.Errorf("%w: fine-tuning needs a base model", ErrConfig)
	}
	if o.Iterations < 1 || o.Episodes < 1 || !(o.LR > 0) || !(o.ProxMu >= 0) {
		return nil, 0, fmt.Errorf("%w: fine-tuning needs iterations and episodes >= 1, lr > 0 and proxMu >= 0 (got %d, %d, %v, %v)",
			ErrConfig, o.Iterations, o.Episodes, o.LR, o.ProxMu)
	}
	cfg.Seed = o.Seed
	cfg.BC.Episodes, cfg.BC.BackgroundLoad = 0, nil
	cfg.Refine = nil
	cfg.PPO.Iterations, cfg.PPO.EpisodesPerIter, cfg.PPO.LR = o.Iterations, o.Episodes, o.LR
	cfg.Eval.Seeds = nil
	cfg.Net.Hidden1, cfg.Net.Hidden2, cfg.Net.CriticHidden = base.Net.H1, base.Net.H2, base.Net.HC
	if env != nil {
		// the configuration's environment does not apply
		cfg.Env.Scenario, cfg.Env.Scenarios, cfg.Env.Nodes, cfg.Env.Pods = "", nil, "", ""
		cfg.Env.Mixtures, cfg.Env.FreshWorkloads, cfg.Env.BackgroundLoad = nil, false, nil
	}
	res, err := Train(ctx, cfg, Options{Init: base, KeepBounds: o.KeepBounds, ProxMu: o.ProxMu, Logger: o.Logger, env: env})
	if err != nil {
		return nil, 0, err
	}
	res.Model.Decision = base.Decision
	return res.Model, res.Decisions, nil
}
