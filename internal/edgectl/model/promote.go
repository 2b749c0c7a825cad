package model

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/internal/edgectl/adminclient"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
)

func newModelPromoteCommand() *cobra.Command {
	var f adminclient.Flags
	cmd := &cobra.Command{
		Use:   "promote VERSION",
		Short: "Publish a candidate model (coordinator run with --manual-publish)",
		Long: `promote publishes a candidate model version to every site. Versions only
move forward: a candidate older than the published model is refused (use
rollback to bring old weights back as a new version).`,
		Example: `  edgectl model promote 8`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := adminclient.VersionArg("version", args[0])
			if err != nil {
				return err
			}
			var m coordinator.Model
			if err := f.Call(coordinator.EndpointModelPromote, coordinator.AdminRequest{Version: v}, &m); err != nil {
				return err
			}
			return f.Print(cmd.OutOrStdout(), m, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "model version %d %s (int8 %s)\n", m.Version, m.Status, cmdutil.ShortOrDash(m.Int8Model))
			})
		},
	}
	f.Register(cmd)
	return cmd
}
