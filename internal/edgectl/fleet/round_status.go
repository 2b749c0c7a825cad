package fleet

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/internal/edgectl/adminclient"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
)

func newRoundStatusCommand() *cobra.Command {
	var f adminclient.Flags
	cmd := &cobra.Command{
		Use:   "status [ROUND]",
		Short: "Show the current round, or round ROUND",
		Example: `  edgectl round status
  edgectl round status 12 -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var req coordinator.AdminRequest
			if len(args) == 1 {
				n, err := adminclient.VersionArg("round", args[0])
				if err != nil {
					return err
				}
				req.Round = n
			}
			var r coordinator.Round
			if err := f.Call(coordinator.EndpointRoundStatus, req, &r); err != nil {
				return err
			}
			return f.Print(cmd.OutOrStdout(), r, func(tw *tabwriter.Writer) { roundDetail(tw, r, time.Now()) })
		},
	}
	f.Register(cmd)
	return cmd
}

func roundDetail(tw *tabwriter.Writer, r coordinator.Round, now time.Time) {
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("round", r.Round)
	row("state", r.State)
	row("mode", r.Mode)
	row("base model", fmt.Sprintf("version %d (%s)", r.BaseVersion, cmdutil.ShortOrDash(r.BaseModel)))
	row("opened", adminclient.Ago(r.Opened, now))
	if r.State == coordinator.StateCollecting {
		row("deadline", fmt.Sprintf("in %v", r.Deadline.Sub(now).Round(time.Second)))
	}
	row("updates", fmt.Sprintf("%d accepted (quorum %d, %d sites expected)", r.Accepted, r.MinUpdates, len(r.Expected)))
	if len(r.Rejected) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(r.Rejected)) {
			parts = append(parts, fmt.Sprintf("%s=%d", k, r.Rejected[k]))
		}
		row("rejected", strings.Join(parts, " "))
	}
	row("local training", fmt.Sprintf("%d iterations x %d episodes, lr %g", r.Local.Iterations, r.Local.Episodes, r.Local.LR))
	if r.MaxNorm > 0 || r.MaxSamples > 0 || r.ClipNorm > 0 {
		row("bounds", fmt.Sprintf("norm <= %g (too_large), samples <= %d (too_heavy), clipped to %g (0: none)", r.MaxNorm, r.MaxSamples, r.ClipNorm))
	}
	if r.Reason != "" {
		row("failed", r.Reason)
	}
	if r.Result != 0 {
		row("result", fmt.Sprintf("model version %d", r.Result))
	}
	if r.Note != "" {
		row("note", r.Note)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Stats)) {
		row(k, fmt.Sprintf("%.4g", r.Stats[k]))
	}
}
