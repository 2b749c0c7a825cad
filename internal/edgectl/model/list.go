package model

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/internal/edgectl/adminclient"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
)

func newModelListCommand() *cobra.Command {
	var f adminclient.Flags
	var limit int
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the coordinator's model registry, newest first",
		Example: `  edgectl model list --server nats://cloud:4222`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := adminclient.CheckLimit(limit); err != nil {
				return err
			}
			var ms []coordinator.Model
			if err := f.Call(coordinator.EndpointModelList, coordinator.AdminRequest{Limit: limit}, &ms); err != nil {
				return err
			}
			if ms == nil {
				ms = []coordinator.Model{}
			}
			now := time.Now()
			return f.Print(cmd.OutOrStdout(), ms, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "VERSION\tSTATUS\tROUND\tINT8 MODEL\tFLOAT MODEL\tCREATED\tNOTE")
				for _, m := range ms {
					fmt.Fprintf(tw, "v%d\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Version, m.Status, adminclient.Dash(m.Round), cmdutil.ShortOrDash(m.Int8Model), cmdutil.ShortOrDash(m.FloatModel), adminclient.Ago(m.Created, now), m.Note)
				}
			})
		},
	}
	f.Register(cmd)
	cmd.Flags().IntVar(&limit, "limit", 20, "models to list")
	return cmd
}
