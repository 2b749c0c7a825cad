package fleet

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/internal/edgectl/adminclient"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
)

func newRoundStartCommand() *cobra.Command {
	var f adminclient.Flags
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Open a new round (refused while one is collecting or aggregating)",
		Example: `  edgectl round start --server nats://cloud:4222
  edgectl round start -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var r coordinator.Round
			if err := f.Call(coordinator.EndpointRoundStart, coordinator.AdminRequest{}, &r); err != nil {
				return err
			}
			return f.Print(cmd.OutOrStdout(), r, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "round %d opened (%s): training from model version %d (%s), deadline %s, quorum %d\n",
					r.Round, r.Mode, r.BaseVersion, cmdutil.ShortOrDash(r.BaseModel), r.Deadline.Format("2006-01-02 15:04:05Z07:00"), r.MinUpdates)
			})
		},
	}
	f.Register(cmd)
	return cmd
}
