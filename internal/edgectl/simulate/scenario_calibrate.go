package simulate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/scenario"
	"github.com/edgesched/edgesched/sim/scenario/family"
)

type calibrateFlags struct {
	families, scenarioSeeds, policy string
	seed                            uint64
	parallel                        int
	output                          string
}

// calibration is scenario calibrate's -o json|yaml document.
type calibration struct {
	Policy   string              `json:"policy"`
	RunSeed  uint64              `json:"run_seed"`
	Families []familyCalibration `json:"families"`
}

type familyCalibration struct {
	Family       string          `json:"family"`
	Role         string          `json:"role"`
	Seeds        []uint64        `json:"scenario_seeds"`
	MeanPods     float64         `json:"mean_pods"`
	Measures     []measureInBand `json:"measures"`
	SeedsInBands int             `json:"seeds_in_all_bands"`
	// Headroom says how much of the failures and the latency tail a
	// placement could change (calibrateHeadroom); a measure no seed
	// reported (failures_with_room without failures) is left out.
	Headroom []measureRange `json:"headroom"`
}

type measureRange struct {
	Measure string  `json:"measure"`
	Mean    float64 `json:"mean"`
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
}

// calibrateHeadroom are the measures printed beside the bands: the share
// of failures of fragmentation (the rest met full nodes, which a placement
// cannot help) and the share of pod samples at the latency proxy's cap
// (above 5% the p95 is at least the cap under any placement of the rest).
var calibrateHeadroom = []string{"failures_with_room", "latency_capped_share"}

type measureInBand struct {
	Measure string  `json:"measure"`
	Mean    float64 `json:"mean"`
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	BandLo  float64 `json:"band_lo"`
	BandHi  float64 `json:"band_hi"`
}

func newScenarioCalibrateCommand(opts cmdutil.Options) *cobra.Command {
	f := &calibrateFlags{}
	cmd := &cobra.Command{
		Use:   "calibrate",
		Short: "Print the scenario families' calibration figures under a baseline",
		Long: `Run a baseline (default the kube-scheduler's default scoring) on every
scenario family for each --scenario-seeds seed (a fleet and a workload
each) and print, per family, the mean and range of its CPU use
(util_used_cpu_mean), scheduling failures (failure_rate) and cross-zone
dependency traffic (cross_zone_traffic), and how many seeds lie in all the
bands the families are built for (50-70%, 1-4%, 20-35%, and from
calibration version 2 on at most 5% of the pod samples at the latency
proxy's cap; docs/scenario.md). A family is its latest calibration;
NAME@v1 names the first.
Beside them, the headroom a placement has: the share of the failures that
were of fragmentation (failures_with_room: the pod's eligible nodes had
the room, split among them; the rest met full nodes) and the share of pod
samples at the latency proxy's cap (latency_capped_share: above 5% the
p95 latency proxy is at least the cap under any placement of the other pods).`,
		Example: `  edgectl scenario calibrate
  edgectl scenario calibrate --families retail-stores,rail-stations --scenario-seeds 1-10
  edgectl scenario calibrate --families retail-stores@v1,retail-stores`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmdutil.CheckOutput(f.output); err != nil {
				return err
			}
			c, err := f.run(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return cmdutil.PrintData(cmd.OutOrStdout(), f.output, c, c.print)
		},
	}
	cmdutil.AddOutputFlag(cmd, &f.output)
	fl := cmd.Flags()
	fl.StringVar(&f.families, "families", "", "comma-separated families (default all: "+strings.Join(family.Names(), ", ")+")")
	fl.StringVar(&f.scenarioSeeds, "scenario-seeds", "1-5", "family seeds (N,M or N-M): each draws a fleet and a workload")
	fl.StringVar(&f.policy, "policies", baseline.K8sDefault, "the baseline the bands refer to")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the runs (tie-breaks, disruptions)")
	fl.IntVar(&f.parallel, "parallel", 0, "concurrent runs (default: number of CPUs)")
	return cmd
}

func (f *calibrateFlags) run(ctx context.Context, opts cmdutil.Options) (*calibration, error) {
	if err := cmdutil.CheckParallel(f.parallel); err != nil {
		return nil, err
	}
	names := family.Names()
	if f.families != "" {
		names = nil
		for _, n := range strings.Split(f.families, ",") {
			n = strings.TrimPrefix(strings.TrimSpace(n), "builtin:")
			if _, err := family.Lookup(n); err != nil {
				return nil, cli.Usagef("--families: %w", err)
			}
			names = append(names, n)
		}
	}
	seeds, err := cmdutil.ParseSeeds(f.scenarioSeeds)
	if err != nil {
		return nil, fmt.Errorf("--scenario-seeds: %w", err)
	}
	pol, err := baseline.Lookup(f.policy)
	if errors.Is(err, baseline.ErrUnknownPolicy) {
		return nil, cli.Usagef("--policies: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("--policies: %w", err)
	}
	out := &calibration{Policy: pol.Name, RunSeed: f.seed, Families: []familyCalibration{}}
	for _, name := range names {
		info, _ := family.Lookup(name)
		bands := info.Bands
		vals := make([][]float64, len(bands))
		room := make([][]float64, len(calibrateHeadroom))
		var pods float64
		for _, s := range seeds {
			l, err := scenario.LoadWith("builtin:"+name, scenario.Options{Seed: &s})
			if err != nil {
				return nil, err
			}
			env, err := sim.NewEnv(l.Cluster, l.Workload, sim.EnvOptions{})
			if err != nil {
				return nil, fmt.Errorf("%s seed %d: %w", name, s, err)
			}
			opts.Log().Info("calibrating", "family", name, "scenario_seed", s, "policy", pol.Name, "run_seed", f.seed, "nodes", len(env.Nodes), "pods", len(env.Pods))
			res, err := engine.Compare(ctx, env, []sim.Factory{pol}, engine.CompareConfig{Run: engine.DefaultRunConfig(engine.Replay), Seeds: []uint64{f.seed}, Parallel: f.parallel})
			if err != nil {
				return nil, fmt.Errorf("%s seed %d: %w", name, s, err)
			}
			for i, b := range bands {
				vals[i] = append(vals[i], res[0].Measures[b.Measure])
			}
			for i, h := range calibrateHeadroom {
				if v, ok := res[0].Measures[h]; ok { // absent without failures
					room[i] = append(room[i], v)
				}
			}
			pods += float64(len(env.Pods)) / float64(len(seeds))
		}
		inside := make([]bool, len(seeds))
		for k := range inside {
			inside[k] = true
		}
		fc := familyCalibration{Family: name, Role: string(info.Role), Seeds: seeds, MeanPods: pods}
		for i, b := range bands {
			m := measureInBand{Measure: b.Measure, Min: math.Inf(1), Max: math.Inf(-1), BandLo: b.Lo, BandHi: b.Hi}
			for k, v := range vals[i] {
				m.Min, m.Max, m.Mean = min(m.Min, v), max(m.Max, v), m.Mean+v/float64(len(vals[i]))
				inside[k] = inside[k] && v >= b.Lo && v <= b.Hi
			}
			fc.Measures = append(fc.Measures, m)
		}
		for i, h := range calibrateHeadroom {
			if len(room[i]) == 0 {
				continue
			}
			m := measureRange{Measure: h, Min: math.Inf(1), Max: math.Inf(-1)}
			for _, v := range room[i] {
				m.Min, m.Max, m.Mean = min(m.Min, v), max(m.Max, v), m.Mean+v/float64(len(room[i]))
			}
			fc.Headroom = append(fc.Headroom, m)
		}
		for _, in := range inside {
			if in {
				fc.SeedsInBands++
			}
		}
		out.Families = append(out.Families, fc)
	}
	return out, nil
}

// print writes the calibration as a table for people.
func (c *calibration) print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	columns := family.BandsOf(1) // every version's; the capped share is a headroom column
	fmt.Fprintf(tw, "family\trole\tseeds\tpods\tcpu used\tfailures\tcross-zone\tseeds in all bands\tfailures with room\tlatency capped\n")
	cell := func(mean, lo, hi float64) string { return fmt.Sprintf("%.1f%% (%.1f-%.1f)", 100*mean, 100*lo, 100*hi) }
	for _, fc := range c.Families {
		cells := make([]string, len(columns))
		for i, b := range columns {
			cells[i] = "-"
			for _, m := range fc.Measures {
				if m.Measure == b.Measure {
					cells[i] = cell(m.Mean, m.Min, m.Max)
				}
			}
		}
		extra := make([]string, len(calibrateHeadroom))
		for i, h := range calibrateHeadroom {
			extra[i] = "-" // no failures on any seed
			for _, m := range fc.Headroom {
				if m.Measure == h {
					extra[i] = cell(m.Mean, m.Min, m.Max)
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%s\t%d/%d\t%s\n", fc.Family, fc.Role, seedList(fc.Seeds), fc.MeanPods, strings.Join(cells, "\t"), fc.SeedsInBands, len(fc.Seeds), strings.Join(extra, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "%s, run seed %d; cells: mean (min-max) over the family seeds; bands: cpu used %.0f-%.0f%%, failures %.0f-%.0f%%, cross-zone %.0f-%.0f%%",
		c.Policy, c.RunSeed, 100*columns[0].Lo, 100*columns[0].Hi, 100*columns[1].Lo, 100*columns[1].Hi, 100*columns[2].Lo, 100*columns[2].Hi); err != nil {
		return err
	}
	if hi, ok := c.cappedBand(); ok { // a band of version 2 on
		if _, err := fmt.Fprintf(w, ", latency capped at most %.0f%% (calibration v2 on; NAME@v1 has no such band)", 100*hi); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "failures with room: failures of fragmentation (the eligible nodes had the room, split); latency capped: pod samples at the latency proxy's cap (over 5%: the p95 is at least the cap)")
	return err
}

// cappedBand returns the capped-share band's upper end when a family
// printed is calibrated against it.
func (c *calibration) cappedBand() (float64, bool) {
	for _, fc := range c.Families {
		for _, m := range fc.Measures {
			if m.Measure == "latency_capped_share" {
				return m.BandHi, true
			}
		}
	}
	return 0, false
}

// seedList writes seeds as N-M when they are consecutive, else N,M,...
func seedList(s []uint64) string {
	if len(s) > 1 && s[len(s)-1]-s[0] == uint64(len(s)-1) {
		return fmt.Sprintf("%d-%d", s[0], s[len(s)-1])
	}
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, ",")
}
