package edgectl

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/cli"
)

// newVersionCommand prints the version, commit and build date
// (cli.BuildInfo.Line); --version on the root prints the same line.
func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the edgectl version, commit and build date",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), cli.Info().Line("edgectl"))
			return err
		},
	}
}
