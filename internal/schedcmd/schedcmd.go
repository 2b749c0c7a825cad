package schedcmd

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	edgecli "github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/memlimit"
)

// Name is the binary's name in messages and the version line.
const Name = "edge-scheduler"

// Main runs edge-scheduler with args (without the program name) until ctx
// ends or the scheduler stops; it returns the process exit code. The
// version goes to stdout, everything else to stderr.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "version" {
		if len(args) > 1 {
			return usage(stderr, edgecli.Usagef("version takes no arguments, got %q", args[1:]))
		}
		return printVersion(stdout)
	}
	if wantsVersion(args) {
		return printVersion(stdout)
	}
	return edgecli.Execute(ctx, newCommand(runScheduler), args, stdout, stderr)
}

// NewCommand is edge-scheduler's command tree: the scheduler itself
// (the root), extender, version and completion.
func NewCommand() *cobra.Command { return newCommand(runScheduler) }

// newCommand is the tree with run as the scheduler.
func newCommand(run func(context.Context, *schedulerOptions) error) *cobra.Command {
	o := defaultSchedulerOptions()
	root := &cobra.Command{
		Use:   Name + " --config FILE [flags]",
		Short: "kube-scheduler with edgesched's EdgePolicy plugin",
		Long: `Runs kube-scheduler's scheduler (the framework, its in-tree plugins and
queue) with EdgePolicy registered: enable it in a profile of the
KubeSchedulerConfiguration given with --config
(deploy/edge-scheduler/scheduler-config.yaml). The configuration is decoded,
defaulted and validated as kube-scheduler does, EdgePolicy's args included.
The flags are the kube-scheduler flags a deployment uses, under the same
names; /livez, /readyz, /healthz and /metrics are served over HTTPS on
--secure-port (docs/edge-plugin.md, "Running edge-scheduler").`,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return edgecli.Usagef("unexpected argument %q", args[0])
			}
			if err := o.validate(); err != nil {
				return err
			}
			if _, err := memlimit.Apply(memlimit.DefaultConfig()); err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), Name+": memory limit not applied:", err)
			}
			defer klog.Flush()
			err := run(klog.NewContext(cmd.Context(), klog.Background()), o)
			if err == nil {
				klog.Background().Info("Scheduler stopped")
			}
			return err
		},
	}
	o.addFlags(root.Flags())
	// Main answers --version before any command runs; the flag is here
	// for the help
	root.Flags().Bool("version", false, "print the version, commit and build date (and kube-scheduler's) and exit")
	addVerbs(root)
	return root
}

// addVerbs adds extender and version to root and makes the tree keep the
// CLI contract (completion and help included).
func addVerbs(root *cobra.Command) {
	// no cobra Version or version template: Main answers --version, and
	// a template would link text/template, whose reflection keeps every
	// exported method of every type in the binary (docs/edge-plugin.md,
	// "Binary size")
	root.AddCommand(newExtender(), edgecli.NewVersionCommand(versionLine()))
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
