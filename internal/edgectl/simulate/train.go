package simulate

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/edgesched/edgesched/internal/atomicfile"
	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/policy/ppo"
	"github.com/edgesched/edgesched/policy/ppo/curve"
)

type trainFlags struct {
	config, out, resume string
	scenario            string
	nodes, pods         string
	seed                uint64
	seeds               string
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
seed on one machine architecture.

With --seeds (1-20, or 1,3,5) it trains one model per seed, each into
--out/seed-N, and writes --out/seeds.csv (every seed's best evaluation
value and model) after each seed. A recipe's seeds can differ by more than
the gaps between policies, and the evaluation is measured where training
measures it: choose among them on selection workloads with edgectl sim,
e.g. --policies fgd,learned:OUT/seed-1/model.esm@net,...
(docs/training.md, "Choosing the training seed").`,
		Example: `  edgectl train --config configs/train-default.yaml --out out/train
  edgectl train --pods openb:default --iterations 10 --seed 7 --out out/quick
  edgectl train --config configs/train-default.yaml --out out/train --resume out/train/checkpoint.esc
  edgectl train --config configs/train-default.yaml --seeds 1-20 --out out/seeds`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkTrainFlags(cmd.Flags(), f); err != nil {
				return err
			}
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
			var seeds []uint64
			if fl.Changed("seeds") {
				var err error
				if seeds, err = trainSeedList(f); err != nil {
					return err
				}
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
			if f.resume != "" { // before the output directory gets its config.yaml
				if _, err := os.Stat(f.resume); err != nil {
					return fmt.Errorf("--resume: %w", err)
				}
			}
			show, err := cmdutil.WantProgress(f.progress, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if seeds == nil {
				_, err := trainOne(cmd, opts, f, cfg, f.out, show)
				return err
			}
			return trainSeeds(cmd, opts, f, cfg, seeds, show)
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
	fl.StringVar(&f.seeds, "seeds", "", "several training seeds: N,M or N-M (overrides --seed): one model each in --out/seed-N, and --out/seeds.csv")
	fl.IntVar(&f.iterations, "iterations", 0, "PPO iterations (overrides the config)")
	fl.IntVar(&f.episodes, "episodes", 0, "episodes per PPO iteration (overrides the config)")
	fl.IntVar(&f.workers, "workers", 0, "parallel rollouts (overrides the config)")
	fl.StringVar(&f.progress, "progress", "auto", "progress bar on stderr: auto, always or never")
	return cmd
}

// checkTrainFlags checks the values of the flags that override the
// config, each alone on the defaults, before any work: an error names the
// flag and is a usage error (ppo.Config.Validate names the config's key).
func checkTrainFlags(fl *pflag.FlagSet, f *trainFlags) error {
	if _, err := cmdutil.WantProgress(f.progress, io.Discard); err != nil {
		return err
	}
	if f.out != "" {
		if err := cmdutil.CheckOutDir("--out", f.out); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		flag string
		set  func(*ppo.Config)
	}{
		{"iterations", func(c *ppo.Config) { c.PPO.Iterations = f.iterations }},
		{"episodes", func(c *ppo.Config) { c.PPO.EpisodesPerIter = f.episodes }},
		{"workers", func(c *ppo.Config) { c.Workers = f.workers }},
	} {
		if !fl.Changed(c.flag) {
			continue
		}
		one := ppo.DefaultConfig()
		c.set(&one)
		if err := one.Validate(); err != nil {
			return cli.Usagef("--%s: %w", c.flag, err)
		}
	}
	return nil
}

// maxTrainSeeds bounds one --seeds list (each seed is a whole training).
const maxTrainSeeds = 100

// SeedsFile is the summary a training over several seeds writes into --out.
const SeedsFile = "seeds.csv"

// trainSeedList parses and checks --seeds (usage errors: the value is
// wrong on its face).
func trainSeedList(f *trainFlags) ([]uint64, error) {
	seeds, err := cmdutil.ParseSeeds(f.seeds)
	switch {
	case err != nil:
		return nil, cli.Usagef("--seeds: %w", err)
	case len(seeds) > maxTrainSeeds:
		return nil, cli.Usagef("--seeds: %d seeds, at most %d", len(seeds), maxTrainSeeds)
	case f.resume != "":
		return nil, cli.Usagef("--resume continues one training: give --seed, and --out the seed's directory")
	case f.out == "":
		return nil, cli.Usagef("--out: --seeds needs a directory for the models")
	}
	seen := make(map[uint64]bool, len(seeds))
	for _, s := range seeds {
		if seen[s] {
			return nil, cli.Usagef("--seeds: seed %d given twice", s)
		}
		seen[s] = true
	}
	return seeds, nil
}

// trainSeeds trains cfg once per seed, each into --out/seed-N, and rewrites
// --out/seeds.csv after each seed. It stops at the first error (Ctrl-C
// included); the seeds already trained stay, and the error says how to
// finish.
func trainSeeds(cmd *cobra.Command, opts cmdutil.Options, f *trainFlags, cfg ppo.Config, seeds []uint64, show bool) error {
	out := cmd.OutOrStdout()
	rows := [][]string{{"seed", "best_" + cfg.Eval.Measure, "model"}}
	path := filepath.Join(f.out, SeedsFile)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "seed\tbest %s\tmodel\n", cfg.Eval.Measure)
	for i, s := range seeds {
		dir := filepath.Join(f.out, fmt.Sprintf("seed-%d", s))
		err := cmd.Context().Err()
		if err == nil {
			c := cfg
			c.Seed = s
			fmt.Fprintf(out, "seed %d (%d of %d)\n", s, i+1, len(seeds))
			var res *ppo.Result
			if res, err = trainOne(cmd, opts, f, c, dir, show); err == nil {
				best := "" // no evaluation seeds: no best value
				if len(cfg.Eval.Seeds) > 0 {
					best = strconv.FormatFloat(res.Best, 'g', -1, 64)
				}
				rows = append(rows, []string{strconv.FormatUint(s, 10), best, filepath.Join(fmt.Sprintf("seed-%d", s), ppo.ModelFile)})
				shown := "-"
				if best != "" {
					shown = fmt.Sprintf("%.5g", res.Best)
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\n", s, shown, res.ModelPath)
				err = writeSeeds(path, rows)
			}
		}
		if err != nil {
			done := "none trained"
			if i > 0 {
				done = "the ones before it in " + path
			}
			return fmt.Errorf("seed %d (%d of %d; %s): %w; finish it with --seed %d --out %s, the rest with --seeds",
				s, i+1, len(seeds), done, err, s, dir)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %s (the evaluation is training's own: choose among the seeds on selection workloads with edgectl sim)\n", path)
	return nil
}

// writeSeeds writes the seeds summary (model paths relative to its directory).
func writeSeeds(path string, rows [][]string) error {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.WriteAll(rows); err != nil {
		return err
	}
	if err := atomicfile.Write(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write seeds summary: %w", err)
	}
	return nil
}

// trainOne runs one training into dir and reports it.
func trainOne(cmd *cobra.Command, opts cmdutil.Options, f *trainFlags, cfg ppo.Config, dir string, show bool) (*ppo.Result, error) {
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "training %q (seed %d): %d behaviour-cloning episodes, %d PPO iterations x %d episodes, output %s\n",
		cfg.Name, cfg.Seed, cfg.BC.Episodes, cfg.PPO.Iterations, cfg.PPO.EpisodesPerIter, dir)
	bar := newTrainBar(cmd.ErrOrStderr(), show, cfg)
	res, err := ppo.Train(cmd.Context(), cfg, ppo.Options{Out: dir, Resume: f.resume, Logger: opts.Log(), Progress: bar.update})
	bar.finish()
	if err != nil && cmd.Context().Err() != nil {
		ck := filepath.Join(dir, ppo.CheckpointFile)
		if _, statErr := os.Stat(ck); statErr == nil {
			return nil, fmt.Errorf("training interrupted; continue from the last checkpoint with --resume %s: %w", ck, err)
		}
	}
	if err != nil {
		return nil, err
	}
	if dir != "" { // the plot is not part of the model: ppo.Train does not draw it
		if err := curve.Write(filepath.Join(dir, curve.File), cfg, res.History); err != nil {
			return nil, err
		}
	}
	if len(res.Unread) > 0 {
		fmt.Fprintf(out, "inputs constant in the training data, not read: %s\n", strings.Join(res.Unread, ", "))
	}
	fmt.Fprintf(out, "done in %s: %d PPO iterations, %d episodes; best %s = %.5g\n", res.Wall.Round(time.Second), res.Iterations, res.Episodes, cfg.Eval.Measure, res.Best)
	fmt.Fprintf(out, "wrote %s, %s/{%s,%s,%s,%s}\n", res.ModelPath, dir, ppo.CheckpointFile, ppo.HistoryFile, curve.File, ppo.ConfigFile)
	return res, nil
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
