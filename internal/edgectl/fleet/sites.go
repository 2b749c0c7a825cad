package fleet

import (
	"errors"
	"fmt"
	"strings"
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
("-" until the site has reported to this coordinator). It asks for the
sites 500 at a time (fewer when an answer would not fit the NATS
server's max_payload), so a fleet of any size is listed.`,
		Example: `  edgectl sites
  edgectl sites -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ss, err := listSites(&f, sitesPerPage)
			if err != nil {
				return err
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

// sitesPerPage is how many sites edgectl sites asks for in one request: a
// site's status is at most about 1 KB of JSON (its report and a count per
// rejection reason), so a page fits NATS's default max_payload of 1 MiB.
const sitesPerPage = 500

// listSites asks for every site, page by page from limit sites a page,
// halving the page while the coordinator answers that it would not fit
// the server's max_payload (413). The names must rise from page to page:
// an answer that goes back is an error, so the walk always ends.
func listSites(f *adminclient.Flags, limit int) ([]coordinator.SiteStatus, error) {
	out := []coordinator.SiteStatus{}
	after := ""
	for {
		var page []coordinator.SiteStatus
		err := f.Call(coordinator.EndpointSites, coordinator.AdminRequest{After: after, Limit: limit}, &page)
		se := (*adminclient.ServerError)(nil)
		switch {
		case errors.As(err, &se) && se.Code == "413" && limit > 1:
			limit /= 2
			continue
		case errors.As(err, &se) && se.Code == "400" && after != "" && strings.Contains(se.Message, `unknown field "after"`):
			// a coordinator from before paging answered every site on
			// the first page (exactly limit of them)
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		for _, s := range page {
			if s.Site.Site <= after {
				return nil, fmt.Errorf("sites: the coordinator answered site %q after %q: not a page in name order", s.Site.Site, after)
			}
			after = s.Site.Site
		}
		out = append(out, page...)
		// fewer than asked for: the last page; more: a coordinator from
		// before paging, which answered every site at once
		if len(page) != limit {
			return out, nil
		}
	}
}
