package simulate

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/internal/fldemo"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/sim/engine"
)

// NewDemoCommand returns edgectl demo.
func NewDemoCommand(opts cmdutil.Options) *cobra.Command {
	var (
		out, progress, parts string
		seed                 uint64
		parallel             int
		sites                []string
	)
	fc := fldemo.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole system on this machine: simulator comparison, then federated learning over an embedded NATS server",
		Long: `demo shows edgesched end to end in a few minutes (--parts chooses):

  sim        every baseline scheduler and the shipped learned policies on
             the real openb production trace (1,523 heterogeneous nodes, FGD
             paper's inflate method; model "default"), on a replay of the
             built-in retail-fleet edge scenario (model "edge") and on a
             loaded edge fleet (the retail-stores family: real service
             graphs, real grids, usage that is not requests, failures).
  federated  an embedded NATS server with JetStream, the coordinator and
             simulated sites (two retail stores and two factories, each its
             own hardware and workload), each training the policy with PPO
             in its twin; --rounds synchronous FedAvg rounds with int8
             updates and signed int8 models every site verifies and
             installs. Then every site trains alone for comparison, and the
             federated policy, the local ones and baselines are evaluated
             on every site's held-out workloads.

Tables go to stdout; results, report.md and plots under --out.`,
		Example: `  edgectl demo
  edgectl demo --parts federated --rounds 4 --sites store-east,factory-a,factory-b`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			runSim, runFed := false, false
			for _, p := range strings.Split(parts, ",") {
				switch strings.TrimSpace(p) {
				case "sim":
					runSim = true
				case "federated":
					runFed = true
				default:
					return cli.Usagef("--parts: unknown part %q (want sim, federated or both)", p)
				}
			}
			chosen, err := pickSites(fc.Sites, sites)
			if err != nil {
				return err
			}
			if _, err := cmdutil.WantProgress(progress, io.Discard); err != nil {
				return err
			}
			if err := cmdutil.CheckParallel(parallel); err != nil {
				return err
			}
			if err := cmdutil.CheckOutDir("--out", out); err != nil {
				return err
			}
			if runFed {
				// before the simulator part's minutes, not after them
				if err := checkDemoConfig(fc, chosen, out); err != nil {
					return err
				}
			}
			if runSim {
				if err := demoSimulator(cmd, opts, out, progress, seed, parallel); err != nil {
					return err
				}
			}
			if !runFed {
				return nil
			}
			if runSim {
				fmt.Fprintln(w)
			}
			fmt.Fprintln(w, "== Federated learning over NATS ==")
			cfg := fc
			cfg.Sites, cfg.Seed, cfg.Out = chosen, seed, filepath.Join(out, "federated")
			cfg.Progress, cfg.Logger = w, opts.Log()
			res, err := fldemo.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			fmt.Fprintln(w)
			if err := res.WriteTables(w); err != nil {
				return err
			}
			files, err := res.WriteFiles(cfg.Out)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "\nwrote %s\n", strings.Join(files, ", "))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "demo-out", "directory for results and plots")
	fl.StringVar(&parts, "parts", "sim,federated", "what to run: sim, federated or both")
	fl.Uint64Var(&seed, "seed", 1, "seed of the runs (keys, networks, training)")
	fl.IntVar(&parallel, "parallel", 0, "concurrent simulator runs (default: number of CPUs)")
	fl.StringVar(&progress, "progress", "auto", "simulator progress bar on stderr: auto, always or never")
	fl.StringSliceVar(&sites, "sites", nil, "simulated sites in the federation, at least 2 (default: store-east,store-west,factory-a,factory-b)")
	fl.IntVar(&fc.Rounds, "rounds", fc.Rounds, "federated rounds")
	fl.IntVar(&fc.Local.Iterations, "local-iterations", fc.Local.Iterations, "PPO iterations per site per round")
	fl.IntVar(&fc.Local.Episodes, "local-episodes", fc.Local.Episodes, "episodes per PPO iteration")
	fl.Float64Var(&fc.ServerLR, "server-lr", fc.ServerLR, "server learning rate on the aggregated update (1: plain FedAvg)")
	return cmd
}

// demoSimulator is the simulator part: baselines and shipped models on
// openb, the retail fleet and a loaded family.
func demoSimulator(cmd *cobra.Command, opts cmdutil.Options, out, progress string, seed uint64, parallel int) error {
	w := cmd.OutOrStdout()
	runs := []struct {
		sub, scenario string
		mode          engine.Mode
		policies      string
	}{
		{"openb", "", engine.Inflate, "all,learned"},
		{"retail-fleet", "builtin:retail-fleet", engine.Replay, "all,learned:edge"},
		{"retail-stores", "builtin:retail-stores", engine.Replay, "all,network-overhead,dep-load,learned:edge,learned:edge-loaded,learned:edge-sage"},
	}
	for i, r := range runs {
		in, err := cmdutil.LoadInput(cmd.Context(), "", "", r.scenario, nil)
		if err != nil {
			return err
		}
		factories, err := cmdutil.ResolvePolicies(r.policies, quant.DecodeOptions{})
		if err != nil {
			return err
		}
		cfg := engine.DefaultRunConfig(r.mode)
		doc, err := runComparison(cmd.Context(), cmd.ErrOrStderr(), opts, comparison{in: in, factories: factories, seeds: []uint64{seed}, cfg: cfg, parallel: parallel, progress: progress})
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := printTable(w, doc, nil); err != nil {
			return err
		}
		if err := writeOutputs(w, doc, filepath.Join(out, r.sub)); err != nil {
			return err
		}
	}
	return nil
}

// checkDemoConfig checks the federated part's flags: an error names the
// flag of the bad value and is a usage error. Each flag's value is
// checked alone on the defaults (fldemo.Config.Validate names the field),
// then the whole configuration.
func checkDemoConfig(fc fldemo.Config, sites []fldemo.Site, out string) error {
	def := fldemo.DefaultConfig()
	def.Out = "demo-out"
	for _, c := range []struct {
		flag string
		set  func(*fldemo.Config)
	}{
		{"--out", func(d *fldemo.Config) { d.Out = out }},
		{"--rounds", func(d *fldemo.Config) { d.Rounds = fc.Rounds }},
		{"--local-iterations", func(d *fldemo.Config) { d.Local.Iterations = fc.Local.Iterations }},
		{"--local-episodes", func(d *fldemo.Config) { d.Local.Episodes = fc.Local.Episodes }},
		{"--server-lr", func(d *fldemo.Config) { d.ServerLR = fc.ServerLR }},
	} {
		one := def
		c.set(&one)
		if err := one.Validate(); err != nil {
			return cli.Usagef("%s: %w", c.flag, err)
		}
	}
	cfg := fc
	cfg.Sites, cfg.Out = sites, out
	return cli.Usage(cfg.Validate())
}

// pickSites returns the named sites (all with no names).
func pickSites(all []fldemo.Site, names []string) ([]fldemo.Site, error) {
	if len(names) == 0 {
		return all, nil
	}
	var out []fldemo.Site
	for _, n := range names {
		i := slices.IndexFunc(all, func(s fldemo.Site) bool { return s.Name == n })
		if i < 0 {
			var known []string
			for _, s := range all {
				known = append(known, s.Name)
			}
			return nil, cli.Usagef("--sites: unknown site %q (known: %s)", n, strings.Join(known, ", "))
		}
		out = append(out, all[i])
	}
	if len(out) < 2 {
		return nil, cli.Usagef("--sites: %d site(s); the comparison needs at least 2", len(out))
	}
	return out, nil
}
