package fleet

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/internal/edgectl/adminclient"
)

// NewReplicasCommand returns edgectl replicas.
func NewReplicasCommand() *cobra.Command {
	var f adminclient.Flags
	cmd := &cobra.Command{
		Use:   "replicas",
		Short: "Show the active coordinator replica (edge-coordinator --ha)",
		Long: `replicas asks the coordinator which replica is active: its name, its
epoch (the revision of the lease it took) and the newest checkpoint of its
store (object, the update stream's floor, the regional stream's floor
with regions, size, age). Only the active replica serves the admin API;
standbys wait for its lease. A coordinator run without --ha answers "not
highly available".`,
		Example: `  edgectl replicas
  edgectl replicas -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st coordinator.HAStatus
			if err := f.Call(coordinator.EndpointHAStatus, coordinator.AdminRequest{}, &st); err != nil {
				return err
			}
			now := time.Now()
			return f.Print(cmd.OutOrStdout(), st, func(tw *tabwriter.Writer) {
				if !st.HA {
					fmt.Fprintln(tw, "not highly available (edge-coordinator without --ha)")
					return
				}
				fmt.Fprintln(tw, "ACTIVE\tEPOCH\tCHECKPOINT\tFLOOR\tREGIONAL\tBYTES\tTAKEN")
				var c coordinator.Checkpoint
				if st.Checkpoint != nil {
					c = *st.Checkpoint
				}
				obj := c.Object
				if obj == "" {
					obj = "-"
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\n", st.Replica, st.Epoch, obj, c.Floor, c.Regional, c.Bytes, adminclient.Ago(c.Taken, now))
			})
		},
	}
	f.Register(cmd)
	return cmd
}
