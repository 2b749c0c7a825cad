package model

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/agreement"
	"github.com/edgesched/edgesched/quant/int8net"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/engine"
)

type quantizeFlags struct {
	artifactFlags
	nodes, pods, scenario string
	calibSeeds, evalSeeds string
	calibration, rounding string
	maxRows               int
	progress              string
}

func newModelQuantizeCommand(opts cmdutil.Options) *cobra.Command {
	f := &quantizeFlags{}
	cmd := &cobra.Command{
		Use:   "quantize MODEL",
		Short: "Calibrate and quantize a model to a signed int8 artifact, and measure its fidelity",
		Long: `quantize runs the float model (a shipped name, .esm or float32 .esa) in the
simulator on calibration runs (--calib-seeds), gathers the candidate rows it
scores, sets the int8 scales from them (--calibration minmax or
percentile:P), rounds each weight to the level below or above it that
brings the int8 network nearer the float one on those rows (--rounding
adaptive; nearest rounds to the nearest level), writes the signed int8
artifact, and then measures on held-out
runs (--eval-seeds) how often the int8 policy picks the node the float policy
picks and how the headline measure moves.

Only ReLU networks quantize: the int8 scheme keeps unsigned 8-bit
activations after each ReLU. A model with Tanh hidden layers (imported from
ONNX) is refused; it runs in the float path ('edgectl sim --policies
learned:FILE.esm').

Inputs are as in 'edgectl sim': openb lists (inflate) or a scenario (replay;
with a workload generator the seeds select generated workloads).`,
		Example: `  edgectl model quantize default --key keys/coordinator.key --out default-int8.esa
  edgectl model quantize edge --scenario builtin:retail-fleet --key keys/coordinator.key --out edge-int8.esa`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, args[0])
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.nodes, "nodes", "", "openb node list (default openb:all_node)")
	fl.StringVar(&f.pods, "pods", "", "openb pod list (default openb:default)")
	fl.StringVar(&f.scenario, "scenario", "", "scenario file or builtin:NAME instead of openb lists")
	fl.StringVar(&f.calibSeeds, "calib-seeds", "9001-9002", "seeds of the calibration runs (or generated workloads)")
	fl.StringVar(&f.evalSeeds, "eval-seeds", "1-5", "held-out seeds to measure fidelity on; empty skips it")
	fl.StringVar(&f.calibration, "calibration", "percentile:99.99", "minmax or percentile:P")
	fl.StringVar(&f.rounding, "rounding", quant.DefaultCalibration().Rounding, "how weights round to int8 levels: nearest, or adaptive (up or down, whichever brings the int8 network nearer the float one on the calibration rows)")
	fl.IntVar(&f.maxRows, "max-rows", 100000, "calibration rows kept (a seeded reservoir sample)")
	fl.StringVar(&f.progress, "progress", "auto", "progress bars on stderr: auto (when a terminal), always or never")
	return cmd
}

func parseCalibration(s string) (quant.CalibrationOptions, error) {
	if s == "minmax" {
		return quant.CalibrationOptions{Method: "minmax"}, nil
	}
	if p, ok := strings.CutPrefix(s, "percentile:"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err == nil {
			o := quant.CalibrationOptions{Method: "percentile", Percentile: v}
			if err := o.Validate(); err != nil {
				return o, cli.Usagef("--calibration: %w", err)
			}
			return o, nil
		}
	}
	return quant.CalibrationOptions{}, cli.Usagef("--calibration: %q (want minmax or percentile:P)", s)
}

// envFor returns the environment and run configuration of one seed: the
// same openb cluster with the seed as sampling seed, or the scenario's
// workload generated with the seed, its partners from the GraphSAGE
// weights w (the model's; nil: the shipped pair's).
func (f *quantizeFlags) envFor(ctx context.Context, seed uint64, w *policy.SageWeights) (*sim.Env, engine.RunConfig, error) {
	if f.scenario != "" {
		in, err := cmdutil.LoadInput(ctx, "", "", f.scenario, &seed)
		if err != nil {
			return nil, engine.RunConfig{}, err
		}
		if err := cmdutil.PartnersFor(in.Env, w); err != nil {
			return nil, engine.RunConfig{}, err
		}
		rc := engine.DefaultRunConfig(engine.Replay)
		rc.Seed = seed
		return in.Env, rc, nil
	}
	in, err := cmdutil.LoadInput(ctx, f.nodes, f.pods, "", nil)
	if err != nil {
		return nil, engine.RunConfig{}, err
	}
	rc := engine.DefaultRunConfig(engine.Inflate)
	rc.Seed = seed
	return in.Env, rc, nil
}

func (f *quantizeFlags) run(cmd *cobra.Command, ref string) error {
	out := cmd.OutOrStdout()
	s, err := f.signer()
	if err != nil {
		return err
	}
	calib, err := parseCalibration(f.calibration)
	if err != nil {
		return err
	}
	calib.Rounding = f.rounding
	if err := calib.Validate(); err != nil {
		return cli.Usagef("--rounding: %w", err)
	}
	calibSeeds, err := cmdutil.ParseSeeds(f.calibSeeds)
	if err != nil {
		return fmt.Errorf("--calib-seeds: %w", err)
	}
	var evalSeeds []uint64
	if f.evalSeeds != "" {
		if evalSeeds, err = cmdutil.ParseSeeds(f.evalSeeds); err != nil {
			return fmt.Errorf("--eval-seeds: %w", err)
		}
	}
	if f.maxRows < 1 {
		return cli.Usagef("--max-rows: %d, want >= 1", f.maxRows)
	}
	show, err := cmdutil.WantProgress(f.progress, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	opt, err := cmdutil.DecodeOptions(f.keys, f.allowUnsigned)
	if err != nil {
		return err
	}
	m, id, err := loadFloatModel(ref, opt)
	if err != nil {
		return err
	}
	if err := quant.CheckQuantizable(m.Float()); err != nil { // before the calibration runs
		return fmt.Errorf("%s: %w", ref, err)
	}
	ctx := cmd.Context()
	var rows []float32
	var seen int
	for i, seed := range calibSeeds {
		env, rc, err := f.envFor(cmd.Context(), seed, m.Sage)
		if err != nil {
			return err
		}
		update, finish := cmdutil.NewBar(cmd.ErrOrStderr(), show, fmt.Sprintf("calibration run %d/%d (seed %d)", i+1, len(calibSeeds), seed))
		rc.Progress = update
		r, n, err := quant.CollectRows(ctx, env, m.Float(), []engine.RunConfig{rc}, f.maxRows/len(calibSeeds), seed)
		finish()
		if err != nil {
			return err
		}
		rows, seen = append(rows, r...), seen+n
		fmt.Fprintf(cmd.ErrOrStderr(), "calibration run %d/%d (seed %d): %d rows\n", i+1, len(calibSeeds), seed, n)
	}
	if c := quant.ConstantFeatures(rows); len(c) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: features %s never vary in the calibration rows: the int8 model clamps them near that value (calibrate on states that exercise them, e.g. --scenario for service dependencies)\n", strings.Join(c, ", "))
	}
	a, err := quant.Quantize(m.Float(), rows, calib, quant.Info{Version: f.version, Round: f.round, Parent: cmp.Or(f.parent, id), Metrics: metricsOf(m), Created: time.Now()})
	if err != nil {
		return err
	}
	if err := quant.WriteFile(f.out, a, s); err != nil {
		return err
	}
	fa, err := quant.FromModel(m.Float(), quant.Info{Created: a.Header.Created})
	if err != nil {
		return err
	}
	fb, err := fa.Encode(s)
	if err != nil {
		return err
	}
	qb, err := a.Encode(s)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %s: int8 model %s version %d, signed by %s\n", f.out, a.Header.ModelID[:12], a.Header.Version, s.ID)
	fmt.Fprintf(out, "calibration: %s on %d of %d candidate rows from seeds %v\n", calib, len(rows)/policy.NumFeatures, seen, calibSeeds)
	fmt.Fprintf(out, "size: int8 artifact %d bytes, float32 artifact %d bytes (%.3fx; the int8 artifact holds the scorer only)\n", len(qb), len(fb), float64(len(qb))/float64(len(fb)))
	if len(evalSeeds) == 0 {
		return nil
	}
	n, err := int8net.New(a)
	if err != nil {
		return err
	}
	var total agreement.Agreement
	measure := "unallocated_gpu_share_at_100"
	if f.scenario != "" {
		measure = "failure_rate"
	}
	var fsum, qsum float64
	for i, seed := range evalSeeds {
		env, rc, err := f.envFor(cmd.Context(), seed, m.Sage)
		if err != nil {
			return err
		}
		// three runs per seed (agreement, float, int8) on one bar; the
		// engine calls Progress from the run's own goroutine
		update, finish := cmdutil.NewBar(cmd.ErrOrStderr(), show, fmt.Sprintf("fidelity seed %d (%d/%d)", seed, i+1, len(evalSeeds)))
		var base, runTotal int64
		if update != nil {
			rc.Progress = func(done, total int64) { runTotal = total; update(base+done, 3*total) }
		}
		ag, err := agreement.Measure(ctx, env, m.Float(), n, rc)
		if err != nil {
			finish()
			return err
		}
		base += runTotal
		total.Decisions += ag.Decisions
		total.Same += ag.Same
		total.SameArgmax += ag.SameArgmax
		fr, err := engine.Run(ctx, env, nn.Factory("float", m), rc)
		if err != nil {
			finish()
			return err
		}
		base += runTotal
		qr, err := engine.Run(ctx, env, int8net.Factory("int8", n), rc)
		finish()
		if err != nil {
			return err
		}
		fsum += fr.Measures[measure]
		qsum += qr.Measures[measure]
	}
	k := float64(len(evalSeeds))
	fmt.Fprintf(out, "fidelity on held-out seeds %v: int8 picks the float policy's node in %.2f%% of %d decisions\n", evalSeeds, 100*total.Rate(), total.Decisions)
	if m.Decision != (policy.Decision{}) {
		fmt.Fprintf(out, "  by the model's decision rule: %s; the networks' own best nodes agree in %.2f%%\n", describeDecision(m.Decision), 100*total.ArgmaxRate())
	}
	fmt.Fprintf(out, "%s: float %.4f, int8 %.4f (change %+.4f)\n", measure, fsum/k, qsum/k, (qsum-fsum)/k)
	return nil
}
