package schedcmd

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
	edgecli "github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/memlimit"
)

// Name is the binary's name in messages and the version line.
const Name = "edge-scheduler"

// commands are edge-scheduler's verbs; any other first argument that is
// not a flag is an unknown command.
var commands = []string{"completion", "extender", "version"}

// Main runs edge-scheduler with args (without the program name) until ctx
// ends (the extender) or the scheduler stops; it returns the process exit
// code. The version goes to stdout, everything else to stderr.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		switch args[0] {
		case "version":
			if len(args) > 1 {
				return usage(stderr, edgecli.Usagef("version takes no arguments, got %q", args[1:]))
			}
			return printVersion(stdout)
		case "extender":
			if wantsVersion(args[1:]) {
				return printVersion(stdout)
			}
			return edgecli.Execute(ctx, NewCommand(), args, stdout, stderr)
		case "completion", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
			// the scripts complete kube-scheduler's flags and the verbs
			return edgecli.Execute(ctx, newCompletionCommand(), args, stdout, stderr)
		}
		return usage(stderr, edgecli.UnknownCommand(Name, args[0], commands))
	}
	if wantsVersion(args) {
		return printVersion(stdout)
	}
	if _, err := memlimit.Apply(memlimit.DefaultConfig()); err != nil {
		fmt.Fprintln(stderr, Name+": memory limit not applied:", err)
	}
	cmd := app.NewSchedulerCommand(app.WithPlugin(edgeplugin.Name, edgeplugin.New))
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	// cli.Run prints the usage after a flag error unless SilenceUsage is
	// set, in which case it keeps this function: print the usage here and
	// remember that the command line was at fault.
	var bad bool
	cmd.SilenceUsage = true
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		bad = true
		_ = c.Usage()
		return edgecli.FlagError(c, err)
	})
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			err := check(c, args)
			bad = bad || err != nil
			return err
		}
	}
	code := cli.Run(cmd)
	if code != 0 && bad {
		return edgecli.ExitUsage
	}
	return code
}

// NewCommand is edge-scheduler's own verbs, extender and version, under
// a root that is not kube-scheduler's command (which registers global
// state when built: Main builds it only to run the scheduler, or for
// the completion scripts).
func NewCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           Name,
		Short:         "kube-scheduler with edgesched's EdgePolicy plugin",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Main answers --version before any command runs (with the
	// kube-scheduler's version); the flag is here for the help
	root.Flags().Bool("version", false, "print the version, commit and build date and exit")
	addVerbs(root)
	return root
}

// newCompletionCommand is kube-scheduler's command named edge-scheduler
// with the verbs added: what the completion scripts complete.
func newCompletionCommand() *cobra.Command {
	root := app.NewSchedulerCommand(app.WithPlugin(edgeplugin.Name, edgeplugin.New))
	root.Use = Name
	root.SilenceUsage, root.SilenceErrors = true, true
	addVerbs(root)
	return root
}

// addVerbs adds extender and version to root and makes the tree keep the
// CLI contract (completion and help included).
func addVerbs(root *cobra.Command) {
	ext := newExtender()
	ext.Version = versionLine()
	ext.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(ext, edgecli.NewVersionCommand(versionLine()))
	edgecli.EnforceContract(root)
}

// wantsVersion reports whether args ask for the version (--version before
// any "--"). kube-scheduler's own --version would print the Kubernetes
// version only; edge-scheduler's names both.
func wantsVersion(args []string) bool {
	if i := slices.Index(args, "--"); i >= 0 {
		args = args[:i]
	}
	return slices.ContainsFunc(args, edgecli.IsVersionFlag)
}

// versionLine is the version line and the kube-scheduler (module
// k8s.io/kubernetes) it is built from.
func versionLine() string {
	line := edgecli.Info().Line(Name)
	if k := edgecli.ModuleVersion("k8s.io/kubernetes"); k != "" {
		line += " kube-scheduler " + k
	}
	return line
}

// printVersion prints the version line.
func printVersion(stdout io.Writer) int {
	if _, err := fmt.Fprintln(stdout, versionLine()); err != nil {
		return edgecli.ExitFailure
	}
	return edgecli.ExitOK
}

// usage prints a usage error and returns its exit code.
func usage(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "%s: %s\nRun '%s --help' for usage.\n", Name, strings.TrimRight(err.Error(), "\n"), Name)
	return edgecli.ExitCode(err)
}
