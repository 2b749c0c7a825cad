package fleet

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/internal/edgectl/adminclient"
)

// NewRegionsCommand returns edgectl regions.
func NewRegionsCommand() *cobra.Command {
	var f adminclient.Flags
	cmd := &cobra.Command{
		Use:   "regions",
		Short: "List the regional aggregators of hierarchical rounds",
		Long: `regions lists the regions the coordinator takes aggregates from
(edge-coordinator --regions; docs/federated.md "Hierarchical rounds"):
each region's sites, the aggregates accepted and refused from it in the
rounds the coordinator keeps verdicts for (the last 10), and
the verdict on its newest one; refusals of aggregates of rounds not yet
open are counted in the coordinator's rejects only.`,
		Example: `  edgectl regions
  edgectl regions -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rs []coordinator.RegionStatus
			if err := f.Call(coordinator.EndpointRegions, coordinator.AdminRequest{}, &rs); err != nil {
				return err
			}
			if rs == nil {
				rs = []coordinator.RegionStatus{}
			}
			return f.Print(cmd.OutOrStdout(), rs, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "REGION\tSITES\tACCEPTED\tREFUSED\tLAST ROUND\tSTATUS\tREASON")
				for _, r := range rs {
					status, reason := string(r.Status), r.Reason
					if status == "" {
						status = "-"
					}
					if reason == "" {
						reason = "-"
					}
					fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\n", r.Region, r.Sites, r.Accepted, r.Refused, adminclient.Dash(r.LastRound), status, reason)
				}
			})
		},
	}
	f.Register(cmd)
	return cmd
}
