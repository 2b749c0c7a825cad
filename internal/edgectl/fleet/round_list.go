package fleet

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/internal/edgectl/adminclient"
)

func newRoundListCommand() *cobra.Command {
	var f adminclient.Flags
	var limit int
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List recent rounds, newest first",
		Example: `  edgectl round list --limit 10`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := adminclient.CheckLimit(limit); err != nil {
				return err
			}
			var rs []coordinator.Round
			if err := f.Call(coordinator.EndpointRoundList, coordinator.AdminRequest{Limit: limit}, &rs); err != nil {
				return err
			}
			if rs == nil {
				rs = []coordinator.Round{}
			}
			now := time.Now()
			return f.Print(cmd.OutOrStdout(), rs, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "ROUND\tSTATE\tMODE\tBASE\tUPDATES\tREJECTED\tRESULT\tOPENED")
				for _, r := range rs {
					rej := 0
					for _, n := range r.Rejected {
						rej += n
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\tv%d\t%d/%d\t%d\t%s\t%s\n", r.Round, r.State, r.Mode, r.BaseVersion, r.Accepted, r.MinUpdates, rej, versionOrDash(r.Result), adminclient.Ago(r.Opened, now))
				}
			})
		},
	}
	f.Register(cmd)
	cmd.Flags().IntVar(&limit, "limit", 20, "rounds to list")
	return cmd
}

func versionOrDash(v uint64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("v%d", v)
}
