package edgectl

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/scenario"
	"github.com/edgesched/edgesched/sim/scenario/apps"
	"github.com/edgesched/edgesched/sim/scenario/family"
)

func newScenarioCommand(opts Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scenario",
		Short: "List, print, validate and calibrate simulator scenarios",
	}
	var showSeed uint64
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the built-in scenarios",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tROLE\tNODES\tPODS\tDESCRIPTION")
			for _, name := range append(scenario.Builtins(), scenario.Families()...) {
				l, err := scenario.Load("builtin:" + name)
				if err != nil {
					return err
				}
				role := "-"
				if info, err := family.Lookup(name); err == nil {
					role = string(info.Role) + " family"
				}
				fmt.Fprintf(tw, "builtin:%s\t%s\t%d\t%d\t%s\n", name, role, len(l.Cluster.Nodes), len(l.Workload.Pods), l.Description)
			}
			for _, name := range apps.Names() {
				role := "training"
				if apps.HeldOut(name) {
					role = "held-out"
				}
				fmt.Fprintf(tw, "app:%s\t%s app\t-\t-\t(workload.apps: app: %s)\n", name, role, name)
			}
			return tw.Flush()
		},
	}, showCmd(&showSeed), &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a scenario file and summarise it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := scenario.Load(args[0])
			if err != nil {
				return err
			}
			env, err := sim.NewEnv(l.Cluster, l.Workload, sim.EnvOptions{})
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok: %d nodes in %d zones, %d pods (%d shapes), %d services, %d dependencies, generator seed %d\n",
				l.Name, len(env.Nodes), len(env.Zones), len(env.Pods), env.Shapes, len(env.Services), len(env.Edges), l.Seed)
			return nil
		},
	}, newScenarioCalibrateCommand(opts))
	return cmd
}

func showCmd(seed *uint64) *cobra.Command {
	c := &cobra.Command{
		Use:   "show NAME",
		Short: "Print a built-in scenario's YAML (a starting point for your own) or a library app's (app:NAME)",
		Long: `Print a built-in scenario (builtin:NAME; a family is generated for --seed)
or an app of the service-graph library (app:NAME; see 'edgectl scenario
list').`,
		Example: `  edgectl scenario show builtin:retail-fleet
  edgectl scenario show builtin:rail-stations --seed 7
  edgectl scenario show app:train-ticket`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var b []byte
			var err error
			switch name, isApp := strings.CutPrefix(args[0], "app:"); {
			case isApp:
				b, err = apps.Source(name)
			case cmd.Flags().Changed("seed"):
				b, err = scenario.BuiltinSourceSeed(trimBuiltin(args[0]), *seed)
			default:
				b, err = scenario.BuiltinSource(trimBuiltin(args[0]))
			}
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	c.Flags().Uint64Var(seed, "seed", family.DefaultSeed, "a family's seed (draws the fleet, the apps and the workload)")
	return c
}

func trimBuiltin(s string) string {
	const p = "builtin:"
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}
