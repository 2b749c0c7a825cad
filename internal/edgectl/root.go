package edgectl

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/auth"
	"github.com/edgesched/edgesched/internal/edgectl/cluster"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/internal/edgectl/fleet"
	"github.com/edgesched/edgesched/internal/edgectl/model"
	"github.com/edgesched/edgesched/internal/edgectl/policy"
	"github.com/edgesched/edgesched/internal/edgectl/simulate"
)

// Options carry what a command needs from its process: the logger
// (cmdutil.Options). The zero value logs nothing.
type Options = cmdutil.Options

// NewRootCommand returns the edgectl command tree.
func NewRootCommand(opts Options) *cobra.Command {
	root := &cobra.Command{
		Use:   "edgectl",
		Short: "Operate edgesched: simulate, train policies, run federated rounds",
		Long: `edgectl is the operator's tool for edgesched, a learned, federated scheduler
for fleets of K3s edge clusters.

It runs the heterogeneous-cluster simulator (compare scheduling policies,
learned ones included, on the openb production traces or on edge
scenarios), trains learned policies in it, makes and checks signed int8
model artifacts, and drives the fleet's federated learning through the
coordinator's admin API over NATS (round, model list/show/promote/rollback,
sites), and keeps the fleet's identities and keys (auth). 'edgectl demo'
runs the whole system on one machine; 'edgectl bench' measures how fast
this machine scores candidate nodes.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		simulate.NewSimCommand(opts),
		simulate.NewDemoCommand(opts),
		simulate.NewTrainCommand(opts),
		model.NewCommand(opts),
		fleet.NewRoundCommand(),
		fleet.NewSitesCommand(),
		fleet.NewReplicasCommand(),
		fleet.NewRegionsCommand(),
		auth.NewCommand(),
		simulate.NewScenarioCommand(opts),
		cluster.NewTopologyCommand(),
		cluster.NewTraceCommand(),
		cluster.NewExplainCommand(),
		policy.NewCommand(opts),
		model.NewBenchCommand(),
		newVersionCommand(),
	)
	root.Version = cli.Info().Line("edgectl")
	root.SetVersionTemplate("{{.Version}}\n")
	root.Flags().Bool("version", false, "print the version, commit and build date (as 'edgectl version')")
	cli.EnforceContract(root)
	registerCompletions(root)
	reportInterrupts(root)
	return root
}

// ErrInterrupted marks the error of a command whose context ended (Ctrl-C,
// SIGTERM: cmd/edgectl cancels it) before the command finished.
var ErrInterrupted = errors.New("interrupted")

// reportInterrupts makes the error of every command that stops because its
// context ended say so first, with the cause (the signal), rather than
// end in a bare "context canceled" from wherever the work was.
func reportInterrupts(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			err := run(cmd, args)
			if ctx := cmd.Context(); err != nil && ctx != nil && ctx.Err() != nil && !errors.Is(err, ErrInterrupted) {
				return fmt.Errorf("%w (%v): %w", ErrInterrupted, context.Cause(ctx), err)
			}
			return err
		}
	}
	for _, sub := range c.Commands() {
		reportInterrupts(sub)
	}
}
