// Command edge-scheduler is kube-scheduler's scheduler with the EdgePolicy
// plugin registered (package edgeplugin), with the kube-scheduler flags a
// deployment uses; enable the plugin in a profile of the
// KubeSchedulerConfiguration (--config), e.g.
// deploy/edge-scheduler/scheduler-config.yaml.
//
// `edge-scheduler extender [flags]` instead serves the same policy over the
// kube-scheduler HTTP extender protocol, for K3s's embedded scheduler
// (extender.Start; deploy/edge-scheduler/k3s-extender.yaml).
// `edge-scheduler version` and --version print the version (docs/cli.md);
// the command line is internal/schedcmd.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/edgesched/edgesched/internal/schedcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// the first signal stops the scheduler cleanly (releasing its
	// lease); a second one ends the process at once
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := schedcmd.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
