package edgectl

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/coordinator"
)

func newRoundStartCommand() *cobra.Command {
	var f adminFlags
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Open a new round (refused while one is collecting or aggregating)",
		Example: `  edgectl round start --server nats://cloud:4222
  edgectl round start -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var r coordinator.Round
			if err := f.call(coordinator.EndpointRoundStart, coordinator.AdminRequest{}, &r); err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), r, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "round %d opened (%s): training from model version %d (%s), deadline %s, quorum %d\n",
					r.Round, r.Mode, r.BaseVersion, shortOrDash(r.BaseModel), r.Deadline.Format("2006-01-02 15:04:05Z07:00"), r.MinUpdates)
			})
		},
	}
	f.register(cmd)
	return cmd
}
