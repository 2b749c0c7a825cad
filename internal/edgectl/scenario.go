package edgectl

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/scenario"
)

func newScenarioCommand(_ Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scenario",
		Short: "List, print and validate simulator scenarios",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the built-in scenarios",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tNODES\tPODS\tDESCRIPTION")
			for _, name := range scenario.Builtins() {
				l, err := scenario.Load("builtin:" + name)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "builtin:%s\t%d\t%d\t%s\n", name, len(l.Cluster.Nodes), len(l.Workload.Pods), l.Description)
			}
			return tw.Flush()
		},
	}, &cobra.Command{
		Use:   "show NAME",
		Short: "Print a built-in scenario's YAML (a starting point for your own)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := scenario.BuiltinSource(trimBuiltin(args[0]))
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}, &cobra.Command{
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
	})
	return cmd
}

func trimBuiltin(s string) string {
	const p = "builtin:"
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}
