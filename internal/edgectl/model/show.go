package model

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/internal/edgectl/adminclient"
)

func newModelShowCommand() *cobra.Command {
	var f adminclient.Flags
	cmd := &cobra.Command{
		Use:   "show [VERSION]",
		Short: "Show one registry entry (default: the newest)",
		Example: `  edgectl model show
  edgectl model show 7 -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var req coordinator.AdminRequest
			if len(args) == 1 {
				v, err := adminclient.VersionArg("version", args[0])
				if err != nil {
					return err
				}
				req.Version = v
			}
			var m coordinator.Model
			if err := f.Call(coordinator.EndpointModelShow, req, &m); err != nil {
				return err
			}
			return f.Print(cmd.OutOrStdout(), m, func(tw *tabwriter.Writer) { modelDetail(tw, m) })
		},
	}
	f.Register(cmd)
	return cmd
}

func modelDetail(tw *tabwriter.Writer, m coordinator.Model) {
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("version", m.Version)
	row("status", m.Status)
	row("round", adminclient.Dash(m.Round))
	row("int8 model", m.Int8Model)
	row("float model", m.FloatModel)
	if m.Parent != "" {
		row("parent", m.Parent)
	}
	row("created", m.Created.Format("2006-01-02 15:04:05Z07:00"))
	if m.Note != "" {
		row("note", m.Note)
	}
}
