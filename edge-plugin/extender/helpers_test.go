package extender

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
	configv1 "github.com/edgesched/edgesched/edge-plugin/apis/config/v1"
	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/edge-plugin/sources"
	"github.com/edgesched/edgesched/sim"
)

// The shared fixtures (package plugintest), by the names these tests use.
var (
	testSigner     = plugintest.Signer
	testKeyring    = plugintest.Keyring
	encodeVersion  = plugintest.EncodeVersion
	openbCluster   = plugintest.OpenbCluster
	k8sNode        = plugintest.K8sNode
	k8sPod         = plugintest.K8sPod
	nodeInfo       = plugintest.NodeInfo
	writeFile      = plugintest.WriteFile
	gpuNode        = plugintest.GPUNode
	randomSnapshot = plugintest.RandomSnapshot
)

type (
	fakeHandle = plugintest.Handle
	fakeLister = plugintest.Lister
)

// newTestPlugin returns a plugin with the test model installed and the
// given target workload.
func newTestPlugin(t testing.TB, h fwk.Handle, target *sim.TargetWorkload) *edgeplugin.EdgePolicy {
	t.Helper()
	s := testSigner(t, 1)
	store := sources.NewModelStore(testKeyring(t, s))
	if _, err := store.Install(encodeVersion(t, s, 1)); err != nil {
		t.Fatal(err)
	}
	a := edgeplugin.Args{ModelPath: "unused", ModelKeys: []string{"unused"}}
	configv1.SetDefaults_EdgePolicyArgs(&a)
	return edgeplugin.NewWithModels(h, a, store, target)
}

// runCycle runs one scheduling cycle of the plugin p (plugintest.RunCycle).
func runCycle(t testing.TB, p *edgeplugin.EdgePolicy, pod *v1.Pod, nodes []fwk.NodeInfo) (fwk.NodeScoreList, fwk.CycleState) {
	t.Helper()
	return plugintest.RunCycle(t, p, pod, nodes)
}
