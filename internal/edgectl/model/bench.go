package model

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/int8net"
	"github.com/edgesched/edgesched/sim/engine"
)

type benchFlags struct {
	nodes, pods, scenario string
	keys                  []string
	candidates, reps      int
	minTime               time.Duration
	seed                  uint64
	output                string
}

// NewBenchCommand returns edgectl bench.
func NewBenchCommand() *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench [MODEL]",
		Short: "Measure how fast this machine scores candidate nodes: float32 and every int8 kernel",
		Long: `bench measures the policy's scoring cost on this machine, the number that
decides whether a learned policy fits a scheduling cycle's budget here.

It runs the float model (a shipped name, .esm or float32 .esa; default
"default"; an .esa's signature is checked only with --model-keys, since bench
only measures) in the simulator for one run to gather real candidate
rows, quantizes it to int8 on those rows (unsigned, in memory), and builds
one decision of --candidates nodes of one pod from them. Then it scores
that decision with the float32 path (gorgonia.org/tensor) and with every
int8 kernel this build runs on this CPU (portable; avx2 and avx512 in
GOEXPERIMENT=simd builds), --reps times for at least --min-time each, and
reports the median, fastest and slowest nanoseconds per node, microseconds
per decision and the speed-up over float32. The int8 kernels must compute
the same scores (bench checks it and fails otherwise); the last one listed
is what edgectl's own build scores with. The released scheduler ('make
scheduler') is built with GOEXPERIMENT=simd on amd64 and logs its kernel
(int8Kernel) with every model it installs.

Figures on a shared machine move from run to run: compare medians and
ratios, not single runs.`,
		Example: `  edgectl bench
  edgectl bench edge --scenario builtin:retail-fleet --candidates 40
  edgectl bench default --candidates 1523 --reps 9 -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := "default"
			if len(args) == 1 {
				ref = args[0]
			}
			return f.run(cmd, ref)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.nodes, "nodes", "", "openb node list (default openb:all_node)")
	fl.StringVar(&f.pods, "pods", "", "openb pod list (default openb:default)")
	fl.StringVar(&f.scenario, "scenario", "", "scenario file or builtin:NAME instead of openb lists")
	cmdutil.AddModelKeysFlag(fl, &f.keys, "to verify an .esa model")
	fl.IntVar(&f.candidates, "candidates", 1000, "candidate nodes in the measured decision (1-100000)")
	fl.IntVar(&f.reps, "reps", 5, "repetitions per scorer (1-100); the median is reported")
	fl.DurationVar(&f.minTime, "min-time", 200*time.Millisecond, "least time per repetition (up to 1m)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the simulator run that supplies the rows (and of the row sample)")
	cmdutil.AddOutputFlag(cmd, &f.output)
	return cmd
}

// benchResult is one scorer's figures (JSON field names are stable).
type benchResult struct {
	Scorer        string  `json:"scorer"`
	NsPerNode     float64 `json:"ns_per_node_median"`
	NsPerNodeMin  float64 `json:"ns_per_node_min"`
	NsPerNodeMax  float64 `json:"ns_per_node_max"`
	UsPerDecision float64 `json:"us_per_decision_median"`
	Speedup       float64 `json:"speedup_vs_float32"`
}

type benchReport struct {
	Model      string `json:"model"`
	Layers     string `json:"layers"`
	Input      string `json:"input"`
	Candidates int    `json:"candidates"`
	Reps       int    `json:"reps"`
	MinTime    string `json:"min_time"`
	Seed       uint64 `json:"seed"`
	Kernel     string `json:"kernel_in_use"`
	// FloatKernel is the float scorer's kernel (nn.FloatScorer.Kernel):
	// what this edgectl simulates, and evaluates in training, with
	FloatKernel string        `json:"float_kernel"`
	Results     []benchResult `json:"results"`
}

func (f *benchFlags) validate() error {
	switch {
	case f.candidates < 1 || f.candidates > 100000:
		return fmt.Errorf("--candidates: %d, want 1 to 100000", f.candidates)
	case f.reps < 1 || f.reps > 100:
		return fmt.Errorf("--reps: %d, want 1 to 100", f.reps)
	case f.minTime <= 0 || f.minTime > time.Minute:
		return fmt.Errorf("--min-time: %v, want more than 0 and at most 1m", f.minTime)
	case f.output != "table" && f.output != "json":
		return cmdutil.CheckOutput(f.output)
	}
	return nil
}

func (f *benchFlags) run(cmd *cobra.Command, ref string) error {
	if err := f.validate(); err != nil {
		return cli.Usage(err) // every check is of a flag value
	}
	stderr := cmd.ErrOrStderr()
	opt, err := cmdutil.DecodeOptions(f.keys, true)
	if err != nil {
		return err
	}
	m, _, err := loadFloatModel(ref, opt)
	if err != nil {
		return err
	}
	in := &quantizeFlags{nodes: f.nodes, pods: f.pods, scenario: f.scenario}
	env, rc, err := in.envFor(cmd.Context(), f.seed, m.Sage)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "gathering candidate rows: one simulator run (seed %d)\n", f.seed)
	rows, _, err := quant.CollectRows(cmd.Context(), env, m.Float(), []engine.RunConfig{rc}, max(f.candidates, 5000), f.seed)
	if err != nil {
		return err
	}
	F, P := policy.NumFeatures, policy.NumPodFeatures
	if got := len(rows) / F; got < f.candidates {
		return fmt.Errorf("--candidates: the run scored only %d candidate rows; ask for at most that many or use a larger input", got)
	}
	a, err := quant.Quantize(m.Float(), rows, quant.DefaultCalibration(), quant.Info{Created: time.Now()})
	if err != nil {
		return err
	}
	n, err := int8net.New(a)
	if err != nil {
		return err
	}
	// one decision: the first pod's features on every candidate row
	batch := slices.Clone(rows[:f.candidates*F])
	for i := 1; i < f.candidates; i++ {
		copy(batch[i*F:i*F+P], batch[:P])
	}
	fs, err := nn.NewFloatScorer(m)
	if err != nil {
		return err
	}
	type entry struct {
		name string
		sc   policy.Scorer
	}
	scorers := []entry{{"float32", fs}}
	for _, k := range int8net.Kernels() {
		sc, err := n.ScorerWith(k)
		if err != nil {
			return err
		}
		scorers = append(scorers, entry{"int8 " + k, sc})
	}
	rep := benchReport{Model: ref, Layers: fmt.Sprintf("%d -> %d -> %d -> 1", m.Net.F, m.Net.H1, m.Net.H2),
		Input: inputName(f), Candidates: f.candidates, Reps: f.reps, MinTime: f.minTime.String(), Seed: f.seed, Kernel: int8net.Kernel(), FloatKernel: fs.Kernel()}
	out := make([]float32, f.candidates)
	var int8Ref []float32 // the first int8 kernel's scores
	for _, s := range scorers {
		fmt.Fprintf(stderr, "measuring %s: %d x %v\n", s.name, f.reps, f.minTime)
		per, err := measureScorer(cmd.Context(), s.sc, batch, out, f.candidates, f.reps, f.minTime)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if s.name != "float32" {
			if int8Ref == nil {
				int8Ref = slices.Clone(out)
			} else if i := firstDiff(int8Ref, out); i >= 0 {
				return fmt.Errorf("%s scores candidate %d as %v, %s as %v: the int8 kernels must agree exactly", s.name, i, out[i], scorers[1].name, int8Ref[i])
			}
		}
		slices.Sort(per)
		r := benchResult{Scorer: s.name, NsPerNode: median(per), NsPerNodeMin: per[0], NsPerNodeMax: per[len(per)-1]}
		r.UsPerDecision = r.NsPerNode * float64(f.candidates) / 1e3
		rep.Results = append(rep.Results, r)
	}
	for i := range rep.Results {
		rep.Results[i].Speedup = rep.Results[0].NsPerNode / rep.Results[i].NsPerNode
	}
	return cmdutil.PrintData(cmd.OutOrStdout(), f.output, rep, func(w io.Writer) error { return printBench(w, &rep) })
}

// firstDiff is the first index where a and b differ, or -1.
func firstDiff(a, b []float32) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func inputName(f *benchFlags) string {
	if f.scenario != "" {
		return f.scenario
	}
	return cmp.Or(f.nodes, "openb:all_node") + " + " + cmp.Or(f.pods, "openb:default")
}

// measureScorer returns reps figures of nanoseconds per candidate node,
// each from as many whole Scores calls as fill minTime (after one
// warm-up call and a garbage collection). It stops between two calls when
// ctx ends (Ctrl-C: --reps x --min-time can be 100 minutes).
func measureScorer(ctx context.Context, sc policy.Scorer, batch, out []float32, k, reps int, minTime time.Duration) ([]float64, error) {
	if err := sc.Scores(batch, k, out); err != nil {
		return nil, err
	}
	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	per := make([]float64, reps)
	for r := range per {
		// collect first: the simulator's heap and the float path's
		// garbage would otherwise be marked during the measurement
		runtime.GC()
		calls := 0
		start := time.Now()
		for calls == 0 || time.Since(start) < minTime {
			select {
			case <-done:
				return nil, context.Cause(ctx)
			default:
			}
			if err := sc.Scores(batch, k, out); err != nil {
				return nil, err
			}
			calls++
		}
		per[r] = float64(time.Since(start).Nanoseconds()) / float64(calls*k)
	}
	return per, nil
}

// median of sorted values.
func median(v []float64) float64 {
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func printBench(w io.Writer, r *benchReport) error {
	fmt.Fprintf(w, "model %s (%s), one decision of %d candidate nodes from %s (seed %d); %d repetitions of at least %s\n\n",
		r.Model, r.Layers, r.Candidates, r.Input, r.Seed, r.Reps, r.MinTime)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scorer\tns/node (median)\tmin\tmax\tus/decision\tvs float32\t")
	for _, x := range r.Results {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1fx\t\n", x.Scorer, x.NsPerNode, x.NsPerNodeMin, x.NsPerNodeMax, x.UsPerDecision, x.Speedup)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nthe int8 kernels agree exactly; this edgectl build scores with int8 %s (the scheduler logs its own as int8Kernel), and simulates (and evaluates in training) with the float32 %s kernel\n", r.Kernel, r.FloatKernel)
	return err
}
