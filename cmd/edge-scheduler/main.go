// Command edge-scheduler is kube-scheduler with the EdgePolicy plugin
// registered (package edgeplugin). Every kube-scheduler flag applies;
// enable the plugin in a profile of the KubeSchedulerConfiguration
// (--config), e.g. deploy/edge-scheduler/scheduler-config.yaml.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
)

func main() {
	cmd := app.NewSchedulerCommand(app.WithPlugin(edgeplugin.Name, edgeplugin.New))
	os.Exit(cli.Run(cmd))
}
