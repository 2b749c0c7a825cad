package edgectl

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
)

// versionInfo is version's -o json|yaml document.
type versionInfo struct {
	Binary string `json:"binary"`
	cli.BuildInfo
}

// newVersionCommand prints the version, commit and build date
// (cli.BuildInfo.Line); --version on the root prints the same line.
func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the edgectl version, commit and build date",
		Example: `  edgectl version
  edgectl version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmdutil.CheckOutput(output); err != nil {
				return err
			}
			info := cli.Info()
			return cmdutil.PrintData(cmd.OutOrStdout(), output, versionInfo{Binary: "edgectl", BuildInfo: info}, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, info.Line("edgectl"))
				return err
			})
		},
	}
	cmdutil.AddOutputFlag(cmd, &output)
	return cmd
}
