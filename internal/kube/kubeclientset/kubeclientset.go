package kubeclientset

import (
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/edgesched/edgesched/internal/kube"
)

// client-go's typed clients have the kube interfaces' method sets.
var (
	_ kube.NodeInterface      = corev1client.NodeInterface(nil)
	_ kube.PodInterface       = corev1client.PodInterface(nil)
	_ kube.ConfigMapInterface = corev1client.ConfigMapInterface(nil)
	_ kube.LeaseInterface     = coordinationv1client.LeaseInterface(nil)
)

// Clientset is a client-go clientset seen as a kube.Interface.
type Clientset struct {
	cs kubernetes.Interface
}

var _ kube.Interface = Clientset{}

// Wrap adapts cs.
func Wrap(cs kubernetes.Interface) Clientset { return Clientset{cs: cs} }

func (c Clientset) Nodes() kube.NodeInterface { return c.cs.CoreV1().Nodes() }

func (c Clientset) Pods(namespace string) kube.PodInterface { return c.cs.CoreV1().Pods(namespace) }

func (c Clientset) ConfigMaps(namespace string) kube.ConfigMapInterface {
	return c.cs.CoreV1().ConfigMaps(namespace)
}

func (c Clientset) Leases(namespace string) kube.LeaseInterface {
	return c.cs.CoordinationV1().Leases(namespace)
}

// IsWatchListSemanticsUnSupported passes on what the clientset says (the
// fake clientset cannot serve watch-list streams and says so): client-go's
// informers ask their list-watcher's client this optional question
// (k8s.io/client-go/util/watchlist), and agent/trace asks its Client.
func (c Clientset) IsWatchListSemanticsUnSupported() bool {
	s, ok := c.cs.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && s.IsWatchListSemanticsUnSupported()
}
