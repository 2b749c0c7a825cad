// Package scheme adds EdgePolicyArgs (internal and v1, with their
// defaults and conversions) to kube-scheduler's configuration scheme, so
// that kube-scheduler decodes, defaults and converts the args of plugin
// EdgePolicy in a KubeSchedulerConfiguration itself, as it does its
// in-tree plugins' args. Importing the package is enough; it registers at
// init, before any scheduler starts. Nothing here is safe to call after
// the scheme is in use.
package scheme

import (
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubescheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/edgesched/edgesched/edge-plugin/apis/config"
	configv1 "github.com/edgesched/edgesched/edge-plugin/apis/config/v1"
)

// Scheme is kube-scheduler's configuration scheme, EdgePolicyArgs added.
var Scheme = kubescheme.Scheme

func init() {
	// kube-scheduler's scheme is built at its package's init, which may
	// have run before this module's packages registered their types in
	// its builders: add them again (adding a type twice is harmless)
	utilruntime.Must(config.AddToScheme(Scheme))
	utilruntime.Must(configv1.AddToScheme(Scheme))
}
