package fleet

import (
	"github.com/spf13/cobra"
)

// NewRoundCommand returns edgectl round and its verbs.
func NewRoundCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "round",
		Short: "Start and follow federated-learning rounds on the coordinator",
		Long: `round talks to edge-coordinator's admin API over NATS (--server, or
$NATS_URL or a nats context) to open rounds and follow them (docs/federated.md).

  start   open a new round now
  status  show the current round, or round N
  list    list recent rounds, newest first`,
	}
	cmd.AddCommand(newRoundStartCommand(), newRoundStatusCommand(), newRoundListCommand())
	return cmd
}
