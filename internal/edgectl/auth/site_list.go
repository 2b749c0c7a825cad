package auth

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
)

func newAuthSiteListCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the registry's sites: NKey, update key, created, revoked",
		Example: `  edgectl auth site list --dir fleet -o json`,
		Args:    cobra.NoArgs,
	}
	dir := fleetDir(cmd)
	cmdutil.AddOutputFlag(cmd, &output)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := cmdutil.CheckOutput(output); err != nil {
			return err
		}
		f, err := dir().Load()
		if err != nil {
			return err
		}
		return cmdutil.PrintData(cmd.OutOrStdout(), output, f.Sites, func(w io.Writer) error {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "SITE\tSTATUS\tNKEY\tUPDATE KEY\tCREATED\tREVOKED")
			for _, s := range f.Sites {
				status := "active"
				if s.Revoked != nil {
					status = "revoked"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, status, s.NKey, s.UpdateKey, stamp(&s.Created), stamp(s.Revoked))
			}
			return tw.Flush()
		})
	}
	return cmd
}
