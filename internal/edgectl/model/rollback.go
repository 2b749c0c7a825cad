package model

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/internal/edgectl/adminclient"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
)

func newModelRollbackCommand() *cobra.Command {
	var f adminclient.Flags
	cmd := &cobra.Command{
		Use:   "rollback VERSION",
		Short: "Republish an older model's weights as a new version",
		Long: `rollback brings back the weights of model VERSION. Sites refuse versions
that go back (rollback protection), so the old weights are re-signed and
published as the next version; the registry's note records the source.`,
		Example: `  edgectl model rollback 5`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := adminclient.VersionArg("version", args[0])
			if err != nil {
				return err
			}
			var m coordinator.Model
			if err := f.Call(coordinator.EndpointModelRollback, coordinator.AdminRequest{Version: v}, &m); err != nil {
				return err
			}
			return f.Print(cmd.OutOrStdout(), m, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "weights of version %d published as version %d (int8 %s)\n", v, m.Version, cmdutil.ShortOrDash(m.Int8Model))
			})
		},
	}
	f.Register(cmd)
	return cmd
}
