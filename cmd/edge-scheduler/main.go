// Command edge-scheduler is kube-scheduler with the EdgePolicy plugin
// registered (package edgeplugin). Every kube-scheduler flag applies;
// enable the plugin in a profile of the KubeSchedulerConfiguration
// (--config), e.g. deploy/edge-scheduler/scheduler-config.yaml.
//
// `edge-scheduler extender [flags]` instead serves the same policy over the
// kube-scheduler HTTP extender protocol, for K3s's embedded scheduler
// (edgeplugin.ExtenderMain; deploy/edge-scheduler/k3s-extender.yaml).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
	"github.com/edgesched/edgesched/internal/memlimit"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "extender" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := edgeplugin.ExtenderMain(ctx, os.Args[2:], os.Stderr)
		stop()
		os.Exit(code)
	}
	if _, err := memlimit.Apply(memlimit.DefaultConfig()); err != nil {
		fmt.Fprintln(os.Stderr, "edge-scheduler: memory limit not applied:", err)
	}
	cmd := app.NewSchedulerCommand(app.WithPlugin(edgeplugin.Name, edgeplugin.New))
	os.Exit(cli.Run(cmd))
}
