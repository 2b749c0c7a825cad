package edgeplugin

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	configv1 "github.com/edgesched/edgesched/edge-plugin/apis/config/v1"
	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/edge-plugin/serving"
	"github.com/edgesched/edgesched/edge-plugin/sources"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/sim"
)

// The shared fixtures (package plugintest), by the names these tests use.
var (
	testSigner     = plugintest.Signer
	testKeyring    = plugintest.Keyring
	testArtifact   = plugintest.Artifact
	encodeVersion  = plugintest.EncodeVersion
	testNet        = plugintest.Net
	smallOpenbEnv  = plugintest.SmallOpenbEnv
	openbCluster   = plugintest.OpenbCluster
	k8sNode        = plugintest.K8sNode
	k8sPod         = plugintest.K8sPod
	nodeInfo       = plugintest.NodeInfo
	writeFile      = plugintest.WriteFile
	gpuNode        = plugintest.GPUNode
	randomSnapshot = plugintest.RandomSnapshot
	fitsCPUMem     = plugintest.FitsCPUMem
)

// runCycle runs one scheduling cycle of p (plugintest.RunCycle).
func runCycle(t testing.TB, p *EdgePolicy, pod *v1.Pod, nodes []fwk.NodeInfo) (fwk.NodeScoreList, fwk.CycleState) {
	t.Helper()
	return plugintest.RunCycle(t, p, pod, nodes)
}

type (
	fakeHandle = plugintest.Handle
	fakeLister = plugintest.Lister
)

const mib = 1 << 20

// newTestPlugin returns a plugin with the test model installed and the
// given target workload.
func newTestPlugin(t testing.TB, h fwk.Handle, target *sim.TargetWorkload) *EdgePolicy {
	t.Helper()
	s := testSigner(t, 1)
	store := sources.NewModelStore(testKeyring(t, s))
	if _, err := store.Install(encodeVersion(t, s, 1)); err != nil {
		t.Fatal(err)
	}
	return newTestPluginWith(t, h, target, store)
}

// newTestPluginWith returns a plugin scoring with store's model.
func newTestPluginWith(t testing.TB, h fwk.Handle, target *sim.TargetWorkload, store *sources.ModelStore) *EdgePolicy {
	t.Helper()
	a := Args{ModelPath: "unused", ModelKeys: []string{"unused"}}
	configv1.SetDefaults_EdgePolicyArgs(&a)
	return NewWithModels(h, a, store, target)
}

// scoredCandidates returns the cycle's scored candidates (in the view's
// node order), their raw scores and their raw feature rows, the features
// extracted afresh from the cycle's view (which must still be current).
func scoredCandidates(t testing.TB, p *EdgePolicy, cs fwk.CycleState) (names []string, raw, x []float32) {
	t.Helper()
	ps := readPreScore(cs)
	if ps == nil || ps.Model == nil || len(ps.Cand) == 0 {
		t.Fatal("the cycle fell back or scored no node")
	}
	const F = policy.NumFeatures
	ok, err := p.core.WithCurrent(ps.Epoch, func(v *serving.View) error {
		x = make([]float32, len(ps.Cand)*F)
		v.Extractor().BeginPod(v.State(), &ps.Pod)
		for j, i := range ps.Cand {
			names = append(names, v.Env().Nodes[i].Name)
			v.Extractor().Extract(v.State(), &ps.Pod, int(i), x[j*F:(j+1)*F])
		}
		return nil
	})
	if !ok || err != nil {
		t.Fatalf("the cycle's view is gone (%v)", err)
	}
	return names, append([]float32(nil), ps.Raw...), x
}

// simPod converts a pod as the plugin does (kubefmt.SimPod).
func simPod(p *v1.Pod) (sim.Pod, error) {
	sp, _, err := kubefmt.SimPod(p)
	return sp, err
}
