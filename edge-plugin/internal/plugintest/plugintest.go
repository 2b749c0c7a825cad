// Package plugintest holds the test fixtures edge-scheduler's packages
// share: a deterministic signing key, the shipped default model quantized
// on a small openb run, Kubernetes nodes and pods rendered from simulator
// specs with the edgesched conventions, NodeInfos and a scheduler handle
// that serves a snapshot. Only tests import it; nothing here is safe
// outside them (the keys are public).
package plugintest

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/legacyregistry"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/sage"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/int8net"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/openb"
)

// Signer is a deterministic signing key (never use outside tests).
const mib = 1 << 20

func Signer(t testing.TB, seed byte) *quant.Signer {
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

func Keyring(t testing.TB, s *quant.Signer) *quant.Keyring {
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

// Artifact quantizes the shipped "default" model with calibration rows
// from a small openb run (deterministic: fixed seeds).
func Artifact(t testing.TB) *quant.Artifact {
	t.Helper()
	artOnce.Do(func() {
		m, err := models.Load("default")
		if err != nil {
			artErr = err
			return
		}
		env, err := SmallOpenbEnv(40, 400)
		if err != nil {
			artErr = err
			return
		}
		rc := engine.DefaultRunConfig(engine.Inflate)
		rc.Seed = 9001
		rows, _, err := quant.CollectRows(context.Background(), env, m.Float(), []engine.RunConfig{rc}, 20000, 9001)
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

// EncodeVersion re-signs the test artifact with another version.
func EncodeVersion(t testing.TB, s *quant.Signer, version uint64) []byte {
	t.Helper()
	a := *Artifact(t)
	a.Header.Version = version
	b, err := a.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func Net(t testing.TB) *int8net.Net {
	t.Helper()
	n, err := int8net.New(Artifact(t))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// SmallOpenbEnv is a cluster of the first GPU and CPU nodes of the openb
// trace (renamed n000... so name order is index order) and the first pods
// of openb:default.
func SmallOpenbEnv(nodes, pods int) (*sim.Env, error) {
	cl, err := OpenbCluster(nodes)
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

func OpenbCluster(nodes int) (*sim.Cluster, error) {
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

// K8sNode renders a simulator node with the conventions.
func K8sNode(s sim.NodeSpec) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: map[string]string{kubefmt.LabelArch: s.Arch.String()}}}
	alloc := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(s.CPU, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(s.Memory*mib, resource.BinarySI),
		v1.ResourcePods:   *resource.NewQuantity(1000, resource.DecimalSI),
	}
	if s.GPUs > 0 {
		alloc[kubefmt.ResourceGPU] = *resource.NewQuantity(int64(s.GPUs), resource.DecimalSI)
		alloc[kubefmt.ResourceGPUMilli] = *resource.NewQuantity(int64(s.GPUs)*sim.MilliGPU, resource.DecimalSI)
		n.Labels[kubefmt.LabelGPUModel] = s.GPUModel
	}
	if s.Zone != "" {
		n.Labels[kubefmt.LabelZone] = s.Zone
	}
	if s.Power != nil {
		n.Annotations = map[string]string{kubefmt.AnnotationWattsPerCore: strconv.FormatFloat(s.Power.WattsPerCore, 'g', -1, 64)}
		if s.Power.WattsPerGPU > 0 {
			n.Annotations[kubefmt.AnnotationWattsPerGPU] = strconv.FormatFloat(s.Power.WattsPerGPU, 'g', -1, 64)
		}
	}
	n.Status.Allocatable = alloc
	n.Status.Capacity = alloc
	return n
}

// K8sPod renders a simulator pod spec with the conventions.
func K8sPod(s sim.PodSpec) *v1.Pod {
	req := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(s.CPU, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(s.Memory*mib, resource.BinarySI),
	}
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: "default", UID: types.UID("uid-" + s.Name),
		Annotations: map[string]string{kubefmt.AnnotationQoS: s.QoS.String()}}}
	switch {
	case s.GPUs == 1 && s.GPUMilli < sim.MilliGPU:
		p.Annotations[kubefmt.AnnotationGPUMilli] = fmt.Sprint(s.GPUMilli)
	case s.GPUs > 0:
		req[kubefmt.ResourceGPU] = *resource.NewQuantity(int64(s.GPUs), resource.DecimalSI)
	}
	if len(s.GPUSpec) > 0 {
		p.Annotations[kubefmt.AnnotationGPUModels] = joinComma(s.GPUSpec)
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

func NodeInfo(n *v1.Node, pods ...*v1.Pod) *framework.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(n)
	return ni
}

// Handle serves a snapshot; every other Handle method panics (nil
// embedded interface), which the tests never reach.
type Handle struct {
	fwk.Handle
	Lister *Lister
}

func (h *Handle) SnapshotSharedLister() fwk.SharedLister { return h.Lister }

type Lister struct {
	fwk.SharedLister
	Nodes []fwk.NodeInfo
}

func (l *Lister) NodeInfos() fwk.NodeInfoLister { return l }
func (l *Lister) List() ([]fwk.NodeInfo, error) { return l.Nodes, nil }
func (l *Lister) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) {
	return nil, nil
}
func (l *Lister) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	return nil, nil
}
func (l *Lister) HavePodsWithRequiredNonHostScopedAntiAffinityList() ([]fwk.NodeInfo, error) {
	return nil, nil
}
func (l *Lister) Get(name string) (fwk.NodeInfo, error) {
	for _, n := range l.Nodes {
		if n.Node().Name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("node %s not found", name)
}

func WriteFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Variant re-signs the test artifact as version, created at created; a
// non-zero tweak changes one weight (another model ID, same shape).
func Variant(t testing.TB, s *quant.Signer, version uint64, created time.Time, tweak int8) []byte {
	t.Helper()
	base := Artifact(t)
	a := quant.Artifact{Header: base.Header}
	for _, tn := range base.Tensors {
		c := tn
		c.F32, c.I8, c.I32 = append([]float32(nil), tn.F32...), append([]int8(nil), tn.I8...), append([]int32(nil), tn.I32...)
		if c.Name == "w1" && tweak != 0 {
			c.I8[0] = max(-127, min(127, c.I8[0]+tweak))
			if c.I8[0] == tn.I8[0] {
				c.I8[0] -= tweak
			}
		}
		a.Tensors = append(a.Tensors, c)
	}
	a.Header.Version, a.Header.Created = version, created
	b, err := a.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Counter is the value of the counter name (its full name, e.g.
// edgesched_plugin_model_swaps_total) with the given label values in the
// legacy registry the scheduler serves, 0 when no series has them yet.
func Counter(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	v, err := CounterValue(name, labels)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// CounterValue is Counter without a test: an error when the registry
// cannot be gathered.
func CounterValue(name string, labels map[string]string) (float64, error) {
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			return m.GetCounter().GetValue(), nil
		}
	}
	return 0, nil
}

// PermutationShapley is the textbook definition: the average over all G!
// orders of adding the groups to the baseline of each group's marginal
// contribution, one forward pass at a time (independent of ShapleyGroups'
// subset weights and batching).
func PermutationShapley(t testing.TB, sc policy.Scorer, x, base []float32, groups [][]int) []float64 {
	t.Helper()
	G := len(groups)
	phi := make([]float64, G)
	perm := make([]int, G)
	for i := range perm {
		perm[i] = i
	}
	one := func(row []float32) float64 {
		var out [1]float32
		if err := sc.Scores(row, 1, out[:]); err != nil {
			t.Fatal(err)
		}
		return float64(out[0])
	}
	count := 0
	var rec func(k int)
	rec = func(k int) {
		if k == G {
			row := slices.Clone(base)
			prev := one(row)
			for _, g := range perm {
				for _, j := range groups[g] {
					row[j] = x[j]
				}
				v := one(row)
				phi[g] += v - prev
				prev = v
			}
			count++
			return
		}
		for i := k; i < G; i++ {
			perm[k], perm[i] = perm[i], perm[k]
			rec(k + 1)
			perm[k], perm[i] = perm[i], perm[k]
		}
	}
	rec(0)
	for i := range phi {
		phi[i] /= float64(count)
	}
	return phi
}

// GPUNode is an amd64 node of 64 cores and 256 GiB with gpus GPUs of
// model.
func GPUNode(name, model string, gpus int) sim.NodeSpec {
	return sim.NodeSpec{Name: name, CPU: 64000, Memory: 256 << 10, GPUs: gpus, GPUModel: model, Arch: sim.ArchAMD64}
}

// RandomSnapshot builds a random cluster snapshot: nodes of random shapes with
// random pods on them.
func RandomSnapshot(rng *rand.Rand, n int) []fwk.NodeInfo {
	models := []string{"T4", "A10", "V100M16", "P100"}
	var out []fwk.NodeInfo
	for i := range n {
		spec := sim.NodeSpec{Name: fmt.Sprintf("r%05d", i), CPU: int64(4000 + rng.IntN(124000)), Memory: int64(8192 + rng.IntN(500000)), Arch: sim.ArchAMD64}
		if rng.IntN(3) > 0 {
			spec.GPUs = 1 + rng.IntN(8)
			spec.GPUModel = models[rng.IntN(len(models))]
		}
		if rng.IntN(5) == 0 {
			spec.Arch = sim.ArchARM64
		}
		var pods []*v1.Pod
		for j := range rng.IntN(6) {
			ps := sim.PodSpec{Name: fmt.Sprintf("%s-p%d", spec.Name, j), CPU: int64(rng.IntN(4000)), Memory: int64(rng.IntN(8192))}
			if spec.GPUs > 0 && rng.IntN(2) == 0 {
				ps.GPUs, ps.GPUMilli = 1, int64(100+rng.IntN(900))
			}
			pods = append(pods, K8sPod(ps))
		}
		out = append(out, NodeInfo(K8sNode(spec), pods...))
	}
	return out
}

// Plugin is the framework plugin RunCycle drives (EdgePolicy).
type Plugin interface {
	fwk.PreFilterPlugin
	fwk.FilterPlugin
	fwk.PreScorePlugin
	fwk.ScorePlugin
}

// RunCycle runs one scheduling cycle of pod over nodes as the scheduler
// does, up to NormalizeScore: PreFilter, Filter (with FitsCPUMem standing
// in for the upstream filters), PreScore, Score, NormalizeScore.
func RunCycle(t testing.TB, p Plugin, pod *v1.Pod, nodes []fwk.NodeInfo) (fwk.NodeScoreList, fwk.CycleState) {
	t.Helper()
	ctx := context.Background()
	cs := framework.NewCycleState()
	feasible := nodes
	if _, st := p.PreFilter(ctx, cs, pod, nodes); st.Code() == fwk.Success {
		feasible = nil
		for _, ni := range nodes {
			if p.Filter(ctx, cs, pod, ni).IsSuccess() && FitsCPUMem(pod, ni) {
				feasible = append(feasible, ni)
			}
		}
	} else if st.Code() != fwk.Skip {
		t.Fatalf("PreFilter: %v", st)
	} else {
		feasible = nil
		for _, ni := range nodes {
			if FitsCPUMem(pod, ni) {
				feasible = append(feasible, ni)
			}
		}
	}
	if st := p.PreScore(ctx, cs, pod, feasible); !st.IsSuccess() {
		t.Fatalf("PreScore: %v", st)
	}
	scores := make(fwk.NodeScoreList, 0, len(feasible))
	for _, ni := range feasible {
		s, st := p.Score(ctx, cs, pod, ni)
		if !st.IsSuccess() {
			t.Fatalf("Score: %v", st)
		}
		scores = append(scores, fwk.NodeScore{Name: ni.Node().Name, Score: s})
	}
	if st := p.ScoreExtensions().NormalizeScore(ctx, cs, pod, scores); !st.IsSuccess() {
		t.Fatalf("NormalizeScore: %v", st)
	}
	return scores, cs
}

// FitsCPUMem stands in for upstream NodeResourcesFit (CPU and memory).
func FitsCPUMem(pod *v1.Pod, ni fwk.NodeInfo) bool {
	sp, _, _ := kubefmt.SimPod(pod)
	a, r := ni.GetAllocatable(), ni.GetRequested()
	return r.GetMilliCPU()+sp.CPU <= a.GetMilliCPU() && r.GetMemory()+sp.Mem<<20 <= a.GetMemory()
}

// TestPolicy is a scheduling policy: payment and orders in one zone
// (required), web preferably on arm64, web never in zone c.
const TestPolicy = `apiVersion: edgesched.policy/v1
kind: SchedulingPolicy
rules:
- {name: pay-orders, kind: colocate, effect: required, pods: {services: [payment, orders]}, scope: zone}
- {name: web-arm, kind: arch, effect: preferred, weight: 50, pods: {services: [web]}, arch: [arm64]}
- {name: no-zone-c, kind: zone, effect: required, pods: {services: [web]}, zones: [c], negate: true}
`

// ServicePod is a small pod of service (label app).
func ServicePod(name, service string) *v1.Pod {
	p := K8sPod(sim.PodSpec{Name: name, CPU: 100, Memory: 64})
	p.Labels = map[string]string{"app": service}
	return p
}

// PolicyCluster: orders runs on n1 in zone a; n2 (zone b, amd64), n3
// (zone b, arm64), n4 (zone c, arm64).
func PolicyCluster() ([]*v1.Node, []*v1.Pod) {
	n1 := K8sNode(sim.NodeSpec{Name: "n1", CPU: 4000, Memory: 4096, Arch: sim.ArchAMD64, Zone: "a"})
	n2 := K8sNode(sim.NodeSpec{Name: "n2", CPU: 4000, Memory: 4096, Arch: sim.ArchAMD64, Zone: "b"})
	n3 := K8sNode(sim.NodeSpec{Name: "n3", CPU: 4000, Memory: 4096, Arch: sim.ArchARM64, Zone: "b"})
	n4 := K8sNode(sim.NodeSpec{Name: "n4", CPU: 4000, Memory: 4096, Arch: sim.ArchARM64, Zone: "c"})
	return []*v1.Node{n1, n2, n3, n4}, []*v1.Pod{OnNode(ServicePod("orders-0", "orders"), "n1")}
}

// OnNode is a copy of p bound to node.
func OnNode(p *v1.Pod, node string) *v1.Pod {
	c := p.DeepCopy()
	c.Spec.NodeName = node
	return c
}

// ReportCPU starts counting the process's CPU time (user and system, every
// thread: the garbage collector's work included); the function it returns
// reports it per operation as cpu-ms/op. On a shared machine wall time per
// operation moves with the other processes' load, CPU time much less.
func ReportCPU(b *testing.B) func() {
	t0 := processCPU(b)
	return func() {
		if b.N > 0 {
			b.ReportMetric((processCPU(b)-t0).Seconds()*1000/float64(b.N), "cpu-ms/op")
		}
	}
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// GraphOf is a dependency graph of edges and its ConfigMap encoding.
func GraphOf(t testing.TB, edges ...kubefmt.DependencyEdge) (*kubefmt.DependencyGraph, []byte) {
	t.Helper()
	g := &kubefmt.DependencyGraph{Version: kubefmt.DependencyGraphVersion, Edges: edges}
	b, err := g.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return g, b
}

// EmbeddingsOf is what a site leader with the shipped encoder and
// decoder (sage.Default) publishes beside the graph of edges: the
// services' embeddings and partners (sage.Publish), updated at the zero
// time as GraphOf's graph is.
func EmbeddingsOf(t testing.TB, edges ...kubefmt.DependencyEdge) *kubefmt.Embeddings {
	t.Helper()
	return EmbeddingsWith(t, policy.DefaultSage(), edges...)
}

// EmbeddingsWith is EmbeddingsOf with the GraphSAGE weights w (a model's
// own), under their ID.
func EmbeddingsWith(t testing.TB, w *policy.SageWeights, edges ...kubefmt.DependencyEdge) *kubefmt.Embeddings {
	t.Helper()
	pre, err := sage.FromWeights(w)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := sage.Publish(pre.Encoder, pre.Decoder, pre.ID(), sage.FromDependencies(edges), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// TopologyOf is tp's ConfigMap encoding (at kubefmt.TopologyVersion).
func TopologyOf(t testing.TB, tp *kubefmt.Topology) []byte {
	t.Helper()
	tp.Version = kubefmt.TopologyVersion
	b, err := tp.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
