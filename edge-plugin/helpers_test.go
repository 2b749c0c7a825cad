package edgeplugin

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	configv1 "github.com/edgesched/edgesched/edge-plugin/apis/config/v1"
	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/openb"
)

// testSigner is a deterministic signing key (never use outside tests).
const mib = 1 << 20

func testSigner(t testing.TB, seed byte) *quant.Signer {
	t.Helper()
	var b [ed25519.SeedSize]byte
	for i := range b {
		b[i] = seed + byte(i)
	}
	s, err := quant.NewSigner(ed25519.NewKeyFromSeed(b[:]))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testKeyring(t testing.TB, s *quant.Signer) *quant.Keyring {
	t.Helper()
	k := &quant.Keyring{}
	if _, err := k.Add(s.Public()); err != nil {
		t.Fatal(err)
	}
	return k
}

var (
	artOnce sync.Once
	artVal  *quant.Artifact
	artErr  error
)

// testArtifact quantizes the shipped "default" model with calibration rows
// from a small openb run (deterministic: fixed seeds).
func testArtifact(t testing.TB) *quant.Artifact {
	t.Helper()
	artOnce.Do(func() {
		m, err := models.Load("default")
		if err != nil {
			artErr = err
			return
		}
		env, err := smallOpenbEnv(40, 400)
		if err != nil {
			artErr = err
			return
		}
		rc := sim.DefaultRunConfig(sim.Inflate)
		rc.Seed = 9001
		rows, _, err := quant.CollectRows(context.Background(), env, m.Float(), []sim.RunConfig{rc}, 20000, 9001)
		if err != nil {
			artErr = err
			return
		}
		artVal, artErr = quant.Quantize(m.Float(), rows, quant.DefaultCalibration(), quant.Info{Version: 1, Created: time.Unix(1_800_000_000, 0)})
	})
	if artErr != nil {
		t.Fatal(artErr)
	}
	return artVal
}

// encodeVersion re-signs the test artifact with another version.
func encodeVersion(t testing.TB, s *quant.Signer, version uint64) []byte {
	t.Helper()
	a := *testArtifact(t)
	a.Header.Version = version
	b, err := a.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testNet(t testing.TB) *quant.Int8Net {
	t.Helper()
	n, err := quant.NewInt8Net(testArtifact(t))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// smallOpenbEnv is a cluster of the first GPU and CPU nodes of the openb
// trace (renamed n000... so name order is index order) and the first pods
// of openb:default.
func smallOpenbEnv(nodes, pods int) (*sim.Env, error) {
	cl, err := openbCluster(nodes)
	if err != nil {
		return nil, err
	}
	pl, err := openb.LoadPods("openb:default", nil)
	if err != nil {
		return nil, err
	}
	w := &sim.Workload{Name: "default", Pods: pl.Pods[:min(pods, len(pl.Pods))], Untimed: !pl.Timed}
	return sim.NewEnv(cl, w, sim.EnvOptions{})
}

func openbCluster(nodes int) (*sim.Cluster, error) {
	all, err := openb.LoadNodes("openb:all_node", nil)
	if err != nil {
		return nil, err
	}
	// interleave: mostly GPU nodes, some CPU-only ones
	var gpu, cpu []sim.NodeSpec
	for _, n := range all {
		if n.GPUs > 0 {
			gpu = append(gpu, n)
		} else {
			cpu = append(cpu, n)
		}
	}
	cl := &sim.Cluster{Name: "openb-small"}
	for i := range nodes {
		var n sim.NodeSpec
		if i%4 == 3 && len(cpu) > 0 {
			n, cpu = cpu[0], cpu[1:]
		} else {
			n, gpu = gpu[0], gpu[1:]
		}
		n.Name = fmt.Sprintf("n%03d", i)
		cl.Nodes = append(cl.Nodes, n)
	}
	return cl, nil
}

// k8sNode renders a simulator node with the conventions.
func k8sNode(s sim.NodeSpec) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: map[string]string{LabelArch: s.Arch.String()}}}
	alloc := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(s.CPU, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(s.Memory*mib, resource.BinarySI),
		v1.ResourcePods:   *resource.NewQuantity(1000, resource.DecimalSI),
	}
	if s.GPUs > 0 {
		alloc[ResourceGPU] = *resource.NewQuantity(int64(s.GPUs), resource.DecimalSI)
		alloc[ResourceGPUMilli] = *resource.NewQuantity(int64(s.GPUs)*sim.MilliGPU, resource.DecimalSI)
		n.Labels[LabelGPUModel] = s.GPUModel
	}
	if s.Zone != "" {
		n.Labels[LabelZone] = s.Zone
	}
	n.Status.Allocatable = alloc
	n.Status.Capacity = alloc
	return n
}

// k8sPod renders a simulator pod spec with the conventions.
func k8sPod(s sim.PodSpec) *v1.Pod {
	req := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(s.CPU, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(s.Memory*mib, resource.BinarySI),
	}
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: "default", UID: types.UID("uid-" + s.Name),
		Annotations: map[string]string{AnnotationQoS: s.QoS.String()}}}
	switch {
	case s.GPUs == 1 && s.GPUMilli < sim.MilliGPU:
		p.Annotations[AnnotationGPUMilli] = fmt.Sprint(s.GPUMilli)
	case s.GPUs > 0:
		req[ResourceGPU] = *resource.NewQuantity(int64(s.GPUs), resource.DecimalSI)
	}
	if len(s.GPUSpec) > 0 {
		p.Annotations[AnnotationGPUModels] = joinComma(s.GPUSpec)
	}
	prio := s.Priority
	p.Spec.Priority = &prio
	p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: req}}}
	return p
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

func nodeInfo(n *v1.Node, pods ...*v1.Pod) *framework.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(n)
	return ni
}

// fakeHandle serves a snapshot; every other Handle method panics (nil
// embedded interface), which the tests never reach.
type fakeHandle struct {
	fwk.Handle
	lister *fakeLister
}

func (h *fakeHandle) SnapshotSharedLister() fwk.SharedLister { return h.lister }

type fakeLister struct {
	fwk.SharedLister
	nodes []fwk.NodeInfo
}

func (l *fakeLister) NodeInfos() fwk.NodeInfoLister { return l }
func (l *fakeLister) List() ([]fwk.NodeInfo, error) { return l.nodes, nil }
func (l *fakeLister) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) {
	return nil, nil
}
func (l *fakeLister) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	return nil, nil
}
func (l *fakeLister) HavePodsWithRequiredNonHostScopedAntiAffinityList() ([]fwk.NodeInfo, error) {
	return nil, nil
}
func (l *fakeLister) Get(name string) (fwk.NodeInfo, error) {
	for _, n := range l.nodes {
		if n.Node().Name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("node %s not found", name)
}

// newTestPlugin returns a plugin with the test model installed and the
// given target workload.
func newTestPlugin(t testing.TB, h fwk.Handle, target *sim.TargetWorkload) *EdgePolicy {
	t.Helper()
	s := testSigner(t, 1)
	store := NewModelStore(testKeyring(t, s))
	if _, err := store.Install(encodeVersion(t, s, 1)); err != nil {
		t.Fatal(err)
	}
	a := Args{ModelPath: "unused", ModelKeys: []string{"unused"}}
	configv1.SetDefaults_EdgePolicyArgs(&a)
	return newEdgePolicy(h, a, store, target)
}

func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// scoredCandidates returns the cycle's scored candidates (in the view's
// node order), their raw scores and their raw feature rows, the features
// extracted afresh from the cycle's view (which must still be current).
func scoredCandidates(t testing.TB, p *EdgePolicy, cs fwk.CycleState) (names []string, raw, x []float32) {
	t.Helper()
	ps := readPreScore(cs)
	if ps == nil || ps.model == nil || len(ps.cand) == 0 {
		t.Fatal("the cycle fell back or scored no node")
	}
	const F = policy.NumFeatures
	ok, err := p.conv.withCurrent(ps.epoch, func(v *view) error {
		x = make([]float32, len(ps.cand)*F)
		v.ext.BeginPod(v.st, &ps.pod)
		for j, i := range ps.cand {
			names = append(names, v.env.Nodes[i].Name)
			v.ext.Extract(v.st, &ps.pod, int(i), x[j*F:(j+1)*F])
		}
		return nil
	})
	if !ok || err != nil {
		t.Fatalf("the cycle's view is gone (%v)", err)
	}
	return names, append([]float32(nil), ps.raw...), x
}
