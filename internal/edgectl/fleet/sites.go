package fleet

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/internal/edgectl/adminclient"
)

// NewSitesCommand returns edgectl sites.
func NewSitesCommand() *cobra.Command {
	var f adminclient.Flags
	cmd := &cobra.Command{
		Use:   "sites",
		Short: "List the fleet's sites: last seen, model version, pending outbox",
		Long: `sites lists every registered site (and any unregistered one that tried to
send updates) as the coordinator knows it: the last update it received,
updates accepted and rejected, and from the site's own periodic report
the model version it runs and the updates still waiting in its outbox
("-" until the site has reported to this coordinator).`,
		Example: `  edgectl sites
  edgectl sites -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ss []coordinator.SiteStatus
			if err := f.Call(coordinator.EndpointSites, coordinator.AdminRequest{}, &ss); err != nil {
				return err
			}
			if ss == nil {
				ss = []coordinator.SiteStatus{}
			}
			now := time.Now()
			return f.Print(cmd.OutOrStdout(), ss, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "SITE\tREGISTERED\tLAST SEEN\tLAST ROUND\tMODEL\tOUTBOX\tACCEPTED\tREJECTED\tREPORTED")
				for _, s := range ss {
					rej := 0
					for _, n := range s.Rejected {
						rej += n
					}
					model, outbox, reported := "-", "-", "-"
					lastSeen := s.LastSeen
					if r := s.Report; r != nil {
						model, outbox, reported = versionOrDash(r.ModelVersion), fmt.Sprint(r.Outbox), adminclient.Ago(r.Sent, now)
						if r.Sent.After(lastSeen) {
							lastSeen = r.Sent
						}
					}
					fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", s.Site.Site, s.Registered, adminclient.Ago(lastSeen, now), adminclient.Dash(s.LastRound), model, outbox, s.Accepted, rej, reported)
				}
			})
		},
	}
	f.Register(cmd)
	return cmd
}
