package simulate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/report"
)

type simFlags struct {
	nodes, pods, scenario string
	policies              string
	scenarioSeeds         string
	versus                string
	keys                  []string
	allowUnsigned         bool
	mode                  string
	seed                  uint64
	seeds                 string
	target, step          float64
	inflateBy             string
	tieBreak              string
	samples               int
	baseLatencyMs         float64
	parallel              int
	out                   string
	output                string
	progress              string
	columns               string
}

// NewSimCommand returns edgectl sim.
func NewSimCommand(opts cmdutil.Options) *cobra.Command {
	f := &simFlags{}
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Compare scheduling policies in the heterogeneous-cluster simulator",
		Long: `Run scheduling policies side by side on a cluster and a workload and report
every measure of scheduling quality (allocation, failures, fragmentation,
utilisation, latency proxy, cross-zone traffic, carbon, decision time).

Inputs are an openb node and pod list (--nodes/--pods; files or the embedded
openb:NAME traces) or a scenario (--scenario FILE or builtin:NAME).

Modes: inflate (the FGD paper's method: sample pods until the arrived GPU
demand reaches --target of capacity) and replay (pods arrive and leave at
their trace times). The default is inflate for openb inputs and replay for
scenarios.

Learned policies: "learned" is the shipped default model (trained on openb),
"learned:edge" another shipped model (see models/), "learned:FILE" a model
written by 'edgectl train', "learned:FILE.esa" a float32 or int8 artifact
('edgectl model'), verified with --model-keys. The suffix @net (learned@net,
learned:FILE@net) runs the network alone, without the model's decision
rule (docs/policy.md, "Decision rule").`,
		Example: `  edgectl sim                                        # all baselines, openb default, inflate, seed 1
  edgectl sim --seeds 1-5 --policies fgd,best-fit,random-fit --out out/openb
  edgectl sim --scenario builtin:retail-fleet --mode replay -o json
  edgectl sim --nodes openb:gpu_node --pods openb:gpushare40 --tie-break first
  edgectl sim --seeds 1-5 --policies fgd,learned,learned@net
  edgectl sim --scenario builtin:retail-fleet --policies k8s-default,learned:edge,learned:out/train/model.esm`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd.Context(), cmd, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.nodes, "nodes", "", "openb node list: a CSV file or openb:all_node|gpu_node (default openb:all_node)")
	fl.StringVar(&f.pods, "pods", "", "openb pod list: a CSV file or openb:default|cpu050|gpushare40|gpuspec10|multigpu20 (default openb:default)")
	fl.StringVar(&f.scenario, "scenario", "", "scenario YAML file, or builtin:NAME (see 'edgectl scenario list')")
	fl.StringVar(&f.policies, "policies", "all", "comma-separated policies (see 'edgectl sim --help'): random-fit, best-fit, dot-product, gpu-packing, gpu-clustering, fgd, k8s-default, trimaran-tlp, all (the baselines), fgd-pressure, fgd-strand, network-overhead, dep-load, carbon-load, learned, learned:NAME (shipped model) or learned:FILE")
	fl.StringVar(&f.scenarioSeeds, "scenario-seeds", "", "scenarios with a generator: regenerate the workload with each of these seeds (N,M or N-M) and run on every one (held-out workloads)")
	cmdutil.AddModelKeysFlag(fl, &f.keys, "that learned:FILE.esa artifacts must be signed with")
	fl.BoolVar(&f.allowUnsigned, "allow-unsigned", false, "accept unsigned learned:FILE.esa artifacts")
	fl.StringVar(&f.versus, "versus", "", "also print a before / after / change table of every policy against this one, with paired standard errors where they ran on the same seeds and workloads")
	fl.StringVar(&f.mode, "mode", "", "inflate or replay (default: inflate for openb, replay for scenarios)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of a single run (sampling and tie-breaks)")
	fl.StringVar(&f.seeds, "seeds", "", "several seeds: N,M or N-M (overrides --seed)")
	fl.Float64Var(&f.target, "target", 1.3, "inflate: stop when arrived demand reaches this share of capacity")
	fl.Float64Var(&f.step, "step", 0.01, "inflate: spacing of the recorded curve, as a share of capacity")
	fl.StringVar(&f.inflateBy, "inflate-by", "", "inflate: resource whose capacity the target refers to, gpu or cpu (default gpu when the cluster has GPUs)")
	fl.StringVar(&f.tieBreak, "tie-break", "random", "how equally scored nodes are chosen: random (seeded) or first (lowest node index)")
	fl.IntVar(&f.samples, "samples", 240, "replay: evenly spaced time samples for the measures")
	fl.Float64Var(&f.baseLatencyMs, "base-latency-ms", 10, "latency proxy: service time on an idle node")
	fl.IntVar(&f.parallel, "parallel", 0, "concurrent runs (default: number of CPUs)")
	fl.StringVar(&f.out, "out", "", "directory for results.json, runs.csv, failures.csv, curve.csv, series.csv and PNG plots")
	cmdutil.AddOutputFlag(cmd, &f.output)
	fl.StringVar(&f.progress, "progress", "auto", "progress bar on stderr: auto (when a terminal), always or never")
	fl.StringVar(&f.columns, "columns", "", "table columns, comma-separated measure names (default depends on the mode)")
	return cmd
}

func (f *simFlags) run(ctx context.Context, cmd *cobra.Command, opts cmdutil.Options) error {
	// the flags first, each error naming its flag (a usage error), before
	// the inputs and the policies load
	if err := cmdutil.CheckOutput(f.output); err != nil {
		return err
	}
	if _, err := cmdutil.WantProgress(f.progress, io.Discard); err != nil {
		return err
	}
	if err := cmdutil.CheckParallel(f.parallel); err != nil {
		return err
	}
	if f.out != "" {
		if err := cmdutil.CheckOutDir("--out", f.out); err != nil {
			return err
		}
	}
	var err error
	var workloads []uint64
	if f.scenarioSeeds != "" {
		if f.scenario == "" {
			return cli.Usagef("--scenario-seeds: needs a --scenario with a workload generator")
		}
		if workloads, err = cmdutil.ParseSeeds(f.scenarioSeeds); err != nil {
			return fmt.Errorf("--scenario-seeds: %w", err)
		}
	}
	seeds := []uint64{f.seed}
	if f.seeds != "" {
		if seeds, err = cmdutil.ParseSeeds(f.seeds); err != nil {
			return fmt.Errorf("--seeds: %w", err)
		}
	}
	mode := engine.Inflate
	if f.scenario != "" { // LoadInput: a scenario's input
		mode = engine.Replay
	}
	if f.mode != "" {
		if mode, err = engine.ParseMode(f.mode); err != nil {
			return cli.Usagef("--mode: %w", err)
		}
	}
	cfg := engine.DefaultRunConfig(mode)
	cfg.FailedClasses = true // runs[].failures, failures.csv
	cfg.InflateTarget, cfg.InflateStep, cfg.InflateResource = f.target, f.step, f.inflateBy
	cfg.TieBreak = engine.TieBreak(f.tieBreak)
	cfg.Samples, cfg.BaseLatencyMs = f.samples, f.baseLatencyMs
	if err := validateRun(cfg); err != nil {
		return err
	}
	var cols []string
	if f.columns != "" {
		var known []string
		for _, m := range engine.Measures() {
			known = append(known, m.Name)
		}
		for _, c := range strings.Split(f.columns, ",") {
			c = strings.TrimSpace(c)
			if !slices.Contains(known, c) {
				return cli.UnknownValue("--columns", c, known) // docs/sim.md describes them
			}
			cols = append(cols, c)
		}
	}
	in, err := cmdutil.LoadInput(ctx, f.nodes, f.pods, f.scenario, nil)
	if err != nil {
		return err
	}
	if f.scenarioSeeds != "" && !in.Generated {
		return fmt.Errorf("--scenario-seeds: needs a --scenario with a workload generator")
	}
	dopt, err := cmdutil.DecodeOptions(f.keys, f.allowUnsigned)
	if err != nil {
		return err
	}
	factories, err := cmdutil.ResolvePolicies(f.policies, dopt)
	if err != nil {
		return err
	}
	if mode == engine.Replay && !in.Timed {
		return fmt.Errorf("--mode replay: %s has no creation times; use --mode inflate", in.Name)
	}
	var doc *report.Document
	if len(workloads) == 0 {
		doc, err = runComparison(ctx, cmd.ErrOrStderr(), opts, comparison{in: in, factories: factories, seeds: seeds, cfg: cfg, parallel: f.parallel, progress: f.progress})
	} else {
		doc, err = runWorkloads(ctx, cmd.ErrOrStderr(), opts, f.scenario, workloads, comparison{factories: factories, seeds: seeds, cfg: cfg, parallel: f.parallel, progress: f.progress})
	}
	if err != nil {
		return err
	}
	if f.versus != "" {
		if !slices.Contains(doc.Policies(), f.versus) {
			return fmt.Errorf("--versus: %q is not among --policies", f.versus)
		}
		if err := doc.AddVersus(f.versus); err != nil {
			return err
		}
	}
	stdout := cmd.OutOrStdout()
	if f.output != "table" {
		if err := cmdutil.PrintData(stdout, f.output, doc, nil); err != nil {
			return err
		}
	} else {
		if err := printTable(stdout, doc, cols); err != nil {
			return err
		}
		if f.versus != "" {
			vc := cols
			if vc == nil {
				vc = report.DefaultColumns(doc.Mode, doc.Capacity.GPUMilli > 0)
			}
			if err := doc.WriteVersus(stdout, f.versus, vc); err != nil {
				return err
			}
		}
	}
	if f.out != "" {
		// Keep stdout one JSON or YAML document: paths go to stderr.
		pathsTo := stdout
		if f.output != "table" {
			pathsTo = cmd.ErrOrStderr()
		}
		return writeOutputs(pathsTo, doc, f.out)
	}
	return nil
}

// validateRun checks the run configuration the flags made; an error
// names the flag of the bad value and is a usage error. Each flag's value
// is checked alone on the mode's defaults, then all together (the step
// against the target).
func validateRun(cfg engine.RunConfig) error {
	def := engine.DefaultRunConfig(cfg.Mode)
	for _, c := range []struct {
		flag string
		set  func(*engine.RunConfig)
	}{
		{"--target", func(d *engine.RunConfig) { d.InflateTarget = cfg.InflateTarget }},
		{"--inflate-by", func(d *engine.RunConfig) { d.InflateResource = cfg.InflateResource }},
		{"--tie-break", func(d *engine.RunConfig) { d.TieBreak = cfg.TieBreak }},
		{"--samples", func(d *engine.RunConfig) { d.Samples = cfg.Samples }},
		{"--base-latency-ms", func(d *engine.RunConfig) { d.BaseLatencyMs = cfg.BaseLatencyMs }},
	} {
		one := def
		c.set(&one)
		if err := one.Validate(); err != nil && !errors.Is(err, engine.ErrInflateStep) {
			return cli.Usagef("%s: %w", c.flag, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		if errors.Is(err, engine.ErrInflateStep) {
			return cli.Usagef("--step: %w", err)
		}
		return cli.Usage(err)
	}
	return nil
}

// comparison is one run of several policies and seeds on an input.
type comparison struct {
	in        *cmdutil.Input
	factories []sim.Factory
	seeds     []uint64
	cfg       engine.RunConfig
	parallel  int
	progress  string
}

func runComparison(ctx context.Context, stderr io.Writer, opts cmdutil.Options, c comparison) (*report.Document, error) {
	show, err := cmdutil.WantProgress(c.progress, stderr)
	if err != nil {
		return nil, err
	}
	log := opts.Log()
	log.Info("simulating", "input", c.in.Name, "mode", c.cfg.Mode, "nodes", len(c.in.Env.Nodes), "pods", len(c.in.Env.Pods), "policies", len(c.factories), "seeds", c.seeds, "scenario_seed", c.in.ScenarioSeed)
	update, finish := cmdutil.NewBar(stderr, show, fmt.Sprintf("%s %s (%d runs)", c.cfg.Mode, c.in.Name, len(c.factories)*len(c.seeds)))
	results, err := engine.Compare(ctx, c.in.Env, c.factories, engine.CompareConfig{Run: c.cfg, Seeds: c.seeds, Parallel: c.parallel, Progress: update})
	finish()
	if err != nil {
		return nil, err
	}
	doc := report.NewDocument(c.in.Name, c.in.Env, c.cfg, c.seeds, results)
	doc.Config.ScenarioSeed = c.in.ScenarioSeed
	return doc, nil
}

// runWorkloads runs the comparison on the scenario's workload regenerated
// with each seed and merges the runs into one document.
func runWorkloads(ctx context.Context, stderr io.Writer, opts cmdutil.Options, scen string, workloads []uint64, c comparison) (*report.Document, error) {
	var doc *report.Document
	for _, ws := range workloads {
		in, err := cmdutil.LoadInput(ctx, "", "", scen, &ws)
		if err != nil {
			return nil, err
		}
		c.in = in
		d, err := runComparison(ctx, stderr, opts, c)
		if err != nil {
			return nil, err
		}
		for i := range d.Runs {
			d.Runs[i].ScenarioSeed = ws
		}
		if doc == nil {
			doc = d
			doc.Config.ScenarioSeed = 0
		} else {
			doc.Runs = append(doc.Runs, d.Runs...)
		}
	}
	doc.Config.ScenarioSeeds = workloads
	return doc, nil
}

func printTable(w io.Writer, doc *report.Document, cols []string) error {
	if cols == nil {
		cols = report.DefaultColumns(doc.Mode, doc.Capacity.GPUMilli > 0)
	}
	fmt.Fprintf(w, "%s, %s mode, %d nodes, %d workload pods, seeds %v, ties %s\n", doc.Scenario, doc.Mode, doc.Nodes, doc.WorkloadPods, doc.Seeds, doc.Config.TieBreak)
	if len(doc.Config.ScenarioSeeds) > 0 {
		fmt.Fprintf(w, "%d workloads: scenario generator seeds %v (means over every workload and seed)\n", len(doc.Config.ScenarioSeeds), doc.Config.ScenarioSeeds)
	} else if doc.Config.ScenarioSeed != 0 {
		fmt.Fprintf(w, "scenario generator seed %d\n", doc.Config.ScenarioSeed)
	}
	fmt.Fprintln(w)
	return doc.WriteTable(w, cols)
}

func writeOutputs(w io.Writer, doc *report.Document, dir string) error {
	if err := doc.WriteFiles(dir); err != nil {
		return err
	}
	plots, err := doc.WritePlots(dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nwrote %s/{results.json,runs.csv,failures.csv,series.csv", dir)
	if doc.Mode == engine.Inflate {
		fmt.Fprint(w, ",curve.csv")
	}
	fmt.Fprintln(w, "}")
	for _, p := range plots {
		fmt.Fprintf(w, "wrote %s\n", p)
	}
	return nil
}
