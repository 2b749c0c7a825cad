package simulate

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/scenario"
	"github.com/edgesched/edgesched/sim/scenario/apps"
	"github.com/edgesched/edgesched/sim/scenario/family"
)

// NewScenarioCommand returns edgectl scenario and its verbs.
func NewScenarioCommand(opts cmdutil.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scenario",
		Short: "List, print, validate and calibrate simulator scenarios",
	}
	var showSeed uint64
	cmd.AddCommand(newScenarioListCommand(), showCmd(&showSeed), newScenarioValidateCommand(), newScenarioCalibrateCommand(opts))
	return cmd
}

// scenarioEntry is one row of scenario list (-o json|yaml: a list of them).
type scenarioEntry struct {
	Name        string `json:"name"`
	Role        string `json:"role,omitempty"`
	Nodes       *int   `json:"nodes,omitempty"` // unset for a library app (no cluster of its own)
	Pods        *int   `json:"pods,omitempty"`
	Description string `json:"description"`
}

func newScenarioListCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the built-in scenarios",
		Example: "  edgectl scenario list\n  edgectl scenario list -o yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmdutil.CheckOutput(output); err != nil {
				return err
			}
			list, err := scenarioEntries()
			if err != nil {
				return err
			}
			return cmdutil.PrintData(cmd.OutOrStdout(), output, list, func(w io.Writer) error {
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tROLE\tNODES\tPODS\tDESCRIPTION")
				for _, e := range list {
					nodes, pods := "-", "-"
					if e.Nodes != nil {
						nodes, pods = fmt.Sprint(*e.Nodes), fmt.Sprint(*e.Pods)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Name, cmp.Or(e.Role, "-"), nodes, pods, e.Description)
				}
				return tw.Flush()
			})
		},
	}
	cmdutil.AddOutputFlag(cmd, &output)
	return cmd
}

// scenarioEntries lists the built-in scenarios, the families and the
// library's apps.
func scenarioEntries() ([]scenarioEntry, error) {
	var list []scenarioEntry
	for _, name := range append(scenario.Builtins(), scenario.Families()...) {
		l, err := scenario.Load("builtin:" + name)
		if err != nil {
			return nil, err
		}
		e := scenarioEntry{Name: "builtin:" + name, Description: l.Description}
		if info, err := family.Lookup(name); err == nil {
			e.Role = string(info.Role) + " family"
		}
		nodes, pods := len(l.Cluster.Nodes), len(l.Workload.Pods)
		e.Nodes, e.Pods = &nodes, &pods
		list = append(list, e)
	}
	for _, name := range apps.Names() {
		role := "training"
		if apps.HeldOut(name) {
			role = "held-out"
		}
		list = append(list, scenarioEntry{Name: "app:" + name, Role: role + " app", Description: "(workload.apps: app: " + name + ")"})
	}
	return list, nil
}

// scenarioSummary is scenario validate's -o json|yaml document.
type scenarioSummary struct {
	File          string `json:"file"`
	Name          string `json:"name"`
	Nodes         int    `json:"nodes"`
	Zones         int    `json:"zones"`
	Pods          int    `json:"pods"`
	Shapes        int    `json:"shapes"`
	Services      int    `json:"services"`
	Dependencies  int    `json:"dependencies"`
	GeneratorSeed uint64 `json:"generator_seed"`
}

func newScenarioValidateCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "validate FILE",
		Short:   "Check a scenario file and summarise it",
		Example: "  edgectl scenario validate site.yaml\n  edgectl scenario validate builtin:retail-fleet -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cmdutil.CheckOutput(output); err != nil {
				return err
			}
			l, err := scenario.Load(args[0])
			if err != nil {
				return err
			}
			env, err := sim.NewEnv(l.Cluster, l.Workload, sim.EnvOptions{})
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			s := scenarioSummary{File: args[0], Name: l.Name, Nodes: len(env.Nodes), Zones: len(env.Zones), Pods: len(env.Pods), Shapes: env.Shapes,
				Services: len(env.Services), Dependencies: len(env.Edges), GeneratorSeed: l.Seed}
			return cmdutil.PrintData(cmd.OutOrStdout(), output, s, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s: ok: %d nodes in %d zones, %d pods (%d shapes), %d services, %d dependencies, generator seed %d\n",
					s.Name, s.Nodes, s.Zones, s.Pods, s.Shapes, s.Services, s.Dependencies, s.GeneratorSeed)
				return err
			})
		},
	}
	cmdutil.AddOutputFlag(cmd, &output)
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
