package edgeplugin

import (
	"sync"

	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/edgesched/edgesched/edge-plugin/serving"
	"github.com/edgesched/edgesched/internal/cli"
)

// Metrics use k8s.io/component-base/metrics registered in its legacy
// registry: that is the registry kube-scheduler already serves on its
// secure /metrics endpoint (with its authn/authz), so the plugin's series
// appear next to scheduler_* without a second listener, and they follow
// the Kubernetes stability framework (all ALPHA here).

var registerOnce sync.Once

// RegisterMetrics registers edge-scheduler's metrics (the serving core's,
// serving.RegisterMetrics, and the build info) in the legacy registry
// kube-scheduler serves (once; New calls it).
func RegisterMetrics() {
	registerOnce.Do(func() {
		serving.RegisterMetrics()
		legacyregistry.RawMustRegister(cli.BuildInfoCollector("edge-scheduler"))
	})
}
