package simulate

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/policy/ppo"
	"github.com/edgesched/edgesched/policy/ppo/curve"
)

type trainFlags struct {
	config, out, resume string
	scenario            string
	nodes, pods         string
	seed                uint64
	iterations          int
	episodes            int
	workers             int
	progress            string
}

// NewTrainCommand returns edgectl train.
func NewTrainCommand(opts cmdutil.Options) *cobra.Command {
	f := &trainFlags{}
	cmd := &cobra.Command{
		Use:   "train",
		Short: "Train a scheduling policy in the simulator (behaviour cloning, then PPO)",
		Long: `train learns a scheduling policy: the actor-critic network first imitates a
teacher baseline (FGD by default) on its rollouts, then improves with PPO in
the simulator. It writes into --out: model.esm (the best model by the
evaluation measure), checkpoint.esc (resume with --resume), history.csv,
training_curve.png and the effective config.yaml.

Start from a config file (see configs/ and docs/training.md) or the
defaults; the flags override it. Training is deterministic for a config and
seed on one machine architecture.`,
		Example: `  edgectl train --config configs/train-default.yaml --out out/train
  edgectl train --pods openb:default --iterations 10 --seed 7 --out out/quick
  edgectl train --config configs/train-default.yaml --out out/train --resume out/train/checkpoint.esc`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := ppo.DefaultConfig()
			if f.config != "" {
				var err error
				if cfg, err = ppo.LoadConfigContext(cmd.Context(), f.config); err != nil {
					return err
				}
			}
			fl := cmd.Flags()
			if fl.Changed("scenario") {
				cfg.Env.Scenario, cfg.Env.Scenarios, cfg.Env.Nodes, cfg.Env.Pods = f.scenario, nil, "", ""
				if !fl.Changed("config") {
					cfg.Env.Mode = "replay"
				}
			}
			if fl.Changed("nodes") {
				cfg.Env.Nodes, cfg.Env.Scenario, cfg.Env.Scenarios = f.nodes, "", nil
			}
			if fl.Changed("pods") {
				cfg.Env.Pods, cfg.Env.Scenario, cfg.Env.Scenarios = f.pods, "", nil
			}
			if fl.Changed("seed") {
				cfg.Seed = f.seed
			}
			if fl.Changed("iterations") {
				cfg.PPO.Iterations = f.iterations
			}
			if fl.Changed("episodes") {
				cfg.PPO.EpisodesPerIter = f.episodes
			}
			if fl.Changed("workers") {
				cfg.Workers = f.workers
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			show, err := cmdutil.WantProgress(f.progress, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "training %q (seed %d): %d behaviour-cloning episodes, %d PPO iterations x %d episodes, output %s\n",
				cfg.Name, cfg.Seed, cfg.BC.Episodes, cfg.PPO.Iterations, cfg.PPO.EpisodesPerIter, f.out)
			bar := newTrainBar(cmd.ErrOrStderr(), show, cfg)
			res, err := ppo.Train(cmd.Context(), cfg, ppo.Options{Out: f.out, Resume: f.resume, Logger: opts.Log(), Progress: bar.update})
			bar.finish()
			if err != nil && cmd.Context().Err() != nil {
				ck := filepath.Join(f.out, ppo.CheckpointFile)
				if _, statErr := os.Stat(ck); statErr == nil {
					return fmt.Errorf("training interrupted; continue from the last checkpoint with --resume %s: %w", ck, err)
				}
			}
			if err != nil {
				return err
			}
			if f.out != "" { // the plot is not part of the model: ppo.Train does not draw it
				if err := curve.Write(filepath.Join(f.out, curve.File), cfg, res.History); err != nil {
					return err
				}
			}
			if len(res.Unread) > 0 {
				fmt.Fprintf(out, "inputs constant in the training data, not read: %s\n", strings.Join(res.Unread, ", "))
			}
			fmt.Fprintf(out, "done in %s: %d PPO iterations, %d episodes; best %s = %.5g\n", res.Wall.Round(time.Second), res.Iterations, res.Episodes, cfg.Eval.Measure, res.Best)
			fmt.Fprintf(out, "wrote %s, %s/{%s,%s,%s,%s}\n", res.ModelPath, f.out, ppo.CheckpointFile, ppo.HistoryFile, curve.File, ppo.ConfigFile)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "training config YAML (default: the built-in defaults, openb default trace)")
	fl.StringVar(&f.out, "out", "out/train", "output directory")
	fl.StringVar(&f.resume, "resume", "", "continue from this checkpoint")
	fl.StringVar(&f.scenario, "scenario", "", "train on a scenario (file or builtin:NAME) instead of openb lists")
	fl.StringVar(&f.nodes, "nodes", "", "openb node list")
	fl.StringVar(&f.pods, "pods", "", "openb pod list")
	fl.Uint64Var(&f.seed, "seed", 0, "training seed (overrides the config)")
	fl.IntVar(&f.iterations, "iterations", 0, "PPO iterations (overrides the config)")
	fl.IntVar(&f.episodes, "episodes", 0, "episodes per PPO iteration (overrides the config)")
	fl.IntVar(&f.workers, "workers", 0, "parallel rollouts (overrides the config)")
	fl.StringVar(&f.progress, "progress", "auto", "progress bar on stderr: auto, always or never")
	return cmd
}

// trainBar shows training progress: phase, iteration, return, losses, KL.
type trainBar struct {
	w    io.Writer
	show bool
	bar  *progressbar.ProgressBar
	cfg  ppo.Config
}

func newTrainBar(w io.Writer, show bool, cfg ppo.Config) *trainBar {
	return &trainBar{w: w, show: show, cfg: cfg}
}

func (b *trainBar) update(p ppo.Progress) {
	if !b.show {
		return
	}
	total := int64(b.cfg.BC.Epochs + b.cfg.PPO.Iterations)
	done := int64(p.Iteration)
	if p.Phase == "ppo" {
		done += int64(b.cfg.BC.Epochs)
	}
	if b.bar == nil {
		b.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(b.w), progressbar.OptionSetWidth(20),
			progressbar.OptionSetPredictTime(true), progressbar.OptionShowCount(),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(b.w) }))
	}
	r := p.Row
	desc := fmt.Sprintf("%s %d/%d ep %d return %.4g loss %.3g/%.3g", p.Phase, p.Iteration, p.Iterations, p.Episodes, r.MeanReturn, r.PolicyLoss, r.ValueLoss)
	if p.Phase == "ppo" {
		desc += fmt.Sprintf(" H %.3g KL %.2g", r.Entropy, r.KL)
	}
	if r.EvalSet {
		desc += fmt.Sprintf(" eval %.4g", r.Eval)
	}
	b.bar.Describe(desc)
	_ = b.bar.Set64(done)
}

func (b *trainBar) finish() {
	if b.bar != nil {
		_ = b.bar.Finish()
	}
}
