package edgectl

import (
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/cli"
)

// Options carry what a command needs from its process: the logger.
// The zero value logs nothing.
type Options struct {
	Logger *slog.Logger
}

func (o Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

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
		newSimCommand(opts),
		newDemoCommand(opts),
		newTrainCommand(opts),
		newModelCommand(opts),
		newRoundCommand(),
		newSitesCommand(),
		newReplicasCommand(),
		newRegionsCommand(),
		newAuthCommand(),
		newScenarioCommand(opts),
		newTopologyCommand(),
		newTraceCommand(),
		newExplainCommand(),
		newPolicyCommand(opts),
		newBenchCommand(),
		newVersionCommand(),
	)
	root.Version = cli.Info().Line("edgectl")
	root.SetVersionTemplate("{{.Version}}\n")
	root.Flags().Bool("version", false, "print the version, commit and build date (as 'edgectl version')")
	cli.EnforceContract(root)
	registerCompletions(root)
	return root
}
