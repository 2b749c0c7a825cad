package edgectl

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
	"github.com/edgesched/edgesched/sim/scenario"
	"github.com/edgesched/edgesched/sim/scenario/family"
)

type calibrateFlags struct {
	families, scenarioSeeds, policy string
	seed                            uint64
	parallel                        int
}

func newScenarioCalibrateCommand(opts Options) *cobra.Command {
	f := &calibrateFlags{}
	cmd := &cobra.Command{
		Use:   "calibrate",
		Short: "Print the scenario families' calibration figures under a baseline",
		Long: `Run a baseline (default the kube-scheduler's default scoring) on every
scenario family for each --scenario-seeds seed (a fleet and a workload
each) and print, per family, the mean and range of its CPU use
(util_used_cpu_mean), scheduling failures (failure_rate) and cross-zone
dependency traffic (cross_zone_traffic), and how many seeds lie in all the
bands the families are built for (50-70%, 1-4%, 20-35%; docs/scenario.md).`,
		Example: `  edgectl scenario calibrate
  edgectl scenario calibrate --families retail-stores,rail-stations --scenario-seeds 1-10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd.Context(), cmd.OutOrStdout(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.families, "families", "", "comma-separated families (default all: "+strings.Join(family.Names(), ", ")+")")
	fl.StringVar(&f.scenarioSeeds, "scenario-seeds", "1-5", "family seeds (N,M or N-M): each draws a fleet and a workload")
	fl.StringVar(&f.policy, "policies", baseline.K8sDefault, "the baseline the bands refer to")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the runs (tie-breaks, disruptions)")
	fl.IntVar(&f.parallel, "parallel", 0, "concurrent runs (default: number of CPUs)")
	return cmd
}

func (f *calibrateFlags) run(ctx context.Context, w io.Writer, opts Options) error {
	names := family.Names()
	if f.families != "" {
		names = nil
		for _, n := range strings.Split(f.families, ",") {
			n = strings.TrimPrefix(strings.TrimSpace(n), "builtin:")
			if _, err := family.Lookup(n); err != nil {
				return fmt.Errorf("--families: %w", err)
			}
			names = append(names, n)
		}
	}
	seeds, err := parseSeeds(f.scenarioSeeds)
	if err != nil {
		return fmt.Errorf("--scenario-seeds: %w", err)
	}
	pol, err := baseline.Lookup(f.policy)
	if err != nil {
		return fmt.Errorf("--policies: %w", err)
	}
	bands := family.Bands()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "family\trole\tseeds\tpods\tcpu used\tfailures\tcross-zone\tseeds in all bands\n")
	for _, name := range names {
		info, _ := family.Lookup(name)
		vals := make([][]float64, len(bands))
		var pods float64
		for _, s := range seeds {
			l, err := scenario.LoadWith("builtin:"+name, scenario.Options{Seed: &s})
			if err != nil {
				return err
			}
			env, err := sim.NewEnv(l.Cluster, l.Workload, sim.EnvOptions{})
			if err != nil {
				return fmt.Errorf("%s seed %d: %w", name, s, err)
			}
			opts.logger().Info("calibrating", "family", name, "scenario_seed", s, "policy", pol.Name, "run_seed", f.seed, "nodes", len(env.Nodes), "pods", len(env.Pods))
			res, err := sim.Compare(ctx, env, []sim.Factory{pol}, sim.CompareConfig{Run: sim.DefaultRunConfig(sim.Replay), Seeds: []uint64{f.seed}, Parallel: f.parallel})
			if err != nil {
				return fmt.Errorf("%s seed %d: %w", name, s, err)
			}
			for i, b := range bands {
				vals[i] = append(vals[i], res[0].Measures[b.Measure])
			}
			pods += float64(len(env.Pods)) / float64(len(seeds))
		}
		inside := make([]bool, len(seeds))
		for k := range inside {
			inside[k] = true
		}
		cells := make([]string, len(bands))
		for i, b := range bands {
			lo, hi, mean := math.Inf(1), math.Inf(-1), 0.0
			for k, v := range vals[i] {
				lo, hi, mean = min(lo, v), max(hi, v), mean+v/float64(len(vals[i]))
				inside[k] = inside[k] && v >= b.Lo && v <= b.Hi
			}
			cells[i] = fmt.Sprintf("%.1f%% (%.1f-%.1f)", 100*mean, 100*lo, 100*hi)
		}
		var ok int
		for _, in := range inside {
			if in {
				ok++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%s\t%d/%d\n", name, info.Role, f.scenarioSeeds, pods, strings.Join(cells, "\t"), ok, len(seeds))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s, run seed %d; cells: mean (min-max) over the family seeds; bands: cpu used %.0f-%.0f%%, failures %.0f-%.0f%%, cross-zone %.0f-%.0f%%\n",
		pol.Name, f.seed, 100*bands[0].Lo, 100*bands[0].Hi, 100*bands[1].Lo, 100*bands[1].Hi, 100*bands[2].Lo, 100*bands[2].Hi)
	return nil
}
