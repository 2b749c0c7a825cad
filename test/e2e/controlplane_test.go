//go:build unix

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/openb"
)

// gpuTaint keeps pods that do not tolerate it off GPU nodes.
const gpuTaint = "nvidia.com/gpu"

// podShape is a test pod: its requests and an optional GPU-model selector.
type podShape struct {
	cpu      string // e.g. "500m"
	mem      string // e.g. "1Gi"
	gpus     int64  // nvidia.com/gpu
	gpuMilli int64  // edgesched.io/gpu-milli
	model    string // nodeSelector on GPUModelLabel
}

func testPod(name string, s podShape) *corev1.Pod {
	req := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(s.cpu),
		corev1.ResourceMemory: resource.MustParse(s.mem),
	}
	lim := corev1.ResourceList{}
	// Extended resources cannot be overcommitted: request == limit.
	if s.gpus > 0 {
		req[GPUResource] = *resource.NewQuantity(s.gpus, resource.DecimalSI)
		lim[GPUResource] = *resource.NewQuantity(s.gpus, resource.DecimalSI)
	}
	if s.gpuMilli > 0 {
		req[GPUMilliResource] = *resource.NewQuantity(s.gpuMilli, resource.DecimalSI)
		lim[GPUMilliResource] = *resource.NewQuantity(s.gpuMilli, resource.DecimalSI)
	}
	var sel map[string]string
	if s.model != "" {
		sel = map[string]string{GPUModelLabel: s.model}
	}
	var tol []corev1.Toleration
	if s.gpus > 0 || s.gpuMilli > 0 {
		tol = []corev1.Toleration{{Key: gpuTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	}
	no := false
	zero := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "e2e"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: &zero,
			NodeSelector:                  sel,
			Tolerations:                   tol,
			Containers: []corev1.Container{{
				Name:      "main",
				Image:     "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: req, Limits: lim},
			}},
		},
	}
}

// TestStockSchedulerBindsPods runs kine + kube-apiserver + the stock
// kube-scheduler, registers heterogeneous openb nodes and checks that
// every pod is bound to a node it fits.
func TestStockSchedulerBindsPods(t *testing.T) {
	// One go build for all three programs (they share most packages).
	bins := Build(t, KinePkg, APIServerPkg, SchedulerPkg)
	began := time.Now()
	cp := Start(t, Options{})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	all, err := openb.LoadNodes("openb:"+openb.AllNodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Taint the GPU nodes, as GPU clusters do, so CPU pods stay off them.
	const numNodes = 32
	picked := slices.Clone(SelectNodes(all, numNodes))
	for i := range picked {
		if picked[i].GPUs > 0 {
			picked[i].Taints = append(slices.Clone(picked[i].Taints), sim.Taint{Key: gpuTaint, Value: "present", Effect: sim.EffectNoSchedule})
		}
	}
	registered, err := RegisterNodes(ctx, cp.Client, picked, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(registered) != numNodes {
		t.Fatalf("registered %d nodes, want %d", len(registered), numNodes)
	}
	shapes := map[string]bool{}
	gpuNodes := 0
	for _, n := range registered {
		shapes[fmt.Sprint(n.Status.Allocatable.Cpu(), n.Status.Allocatable.Memory(), n.Labels[GPUModelLabel])] = true
		if _, ok := n.Status.Allocatable[GPUResource]; ok {
			gpuNodes++
		}
	}
	t.Logf("registered %d nodes: %d distinct shapes, %d with GPUs", len(registered), len(shapes), gpuNodes)
	if len(shapes) < 10 || gpuNodes < 10 || gpuNodes == numNodes {
		t.Fatalf("nodes are not heterogeneous enough: %d shapes, %d GPU nodes of %d", len(shapes), gpuNodes, numNodes)
	}

	// The apiserver must store them Ready and without the not-ready taint.
	nodeList, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodeList.Items {
		ready := slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		})
		notReady := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == NotReadyTaint })
		if !ready || notReady {
			t.Fatalf("node %s: ready=%v taints=%v", n.Name, ready, n.Spec.Taints)
		}
	}

	cp.StartScheduler(t, SchedulerOptions{Binary: bins[2]})

	const ns = "e2e"
	if err := CreateNamespace(ctx, cp.Client, ns); err != nil {
		t.Fatal(err)
	}
	// The workload fits whatever the scheduler's (randomly tie-broken)
	// choices: CPU pods only see the CPU-only nodes, where the small pods
	// together (31 cores, 93 GiB) cannot crowd out both 48-core pods from
	// the 9 nodes large enough; GPU pods are pinned by model (no T4 or P100
	// node has 8 GPUs), so nothing competes with the 8-GPU pods.
	shapesOf := []podShape{
		{cpu: "500m", mem: "512Mi"},
		{cpu: "1", mem: "2Gi"},
		{cpu: "2", mem: "4Gi"},
		{cpu: "4", mem: "8Gi"},
		{cpu: "8", mem: "32Gi"},
		{cpu: "48", mem: "192Gi"}, // only nodes with >= 48 cores and 192 GiB
		{cpu: "500m", mem: "512Mi"},
		{cpu: "1", mem: "2Gi"},
		{cpu: "2", mem: "4Gi"},
		{cpu: "4", mem: "8Gi"},
		{cpu: "8", mem: "32Gi"},
		{cpu: "48", mem: "192Gi"},
		{cpu: "1", mem: "4Gi", gpuMilli: 250, model: "P100"},
		{cpu: "1", mem: "4Gi", gpuMilli: 500, model: "P100"},
		{cpu: "2", mem: "8Gi", gpus: 1, gpuMilli: 1000, model: "P100"},
		{cpu: "2", mem: "8Gi", gpus: 1, gpuMilli: 1000, model: "P100"},
		{cpu: "2", mem: "8Gi", gpus: 1, gpuMilli: 1000, model: "T4"},
		{cpu: "2", mem: "8Gi", gpus: 1, gpuMilli: 1000, model: "T4"},
		{cpu: "4", mem: "16Gi", gpus: 8, gpuMilli: 8000}, // only 8-GPU nodes, any model
		{cpu: "4", mem: "16Gi", gpus: 8, gpuMilli: 8000},
	}
	var want []*corev1.Pod
	for i, shape := range shapesOf {
		p := testPod(fmt.Sprintf("pod-%02d", i), shape)
		if _, err := cp.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", p.Name, err)
		}
		want = append(want, p)
	}
	created := time.Now()

	pods, err := WaitForPodsBound(ctx, cp.Client, ns, "app=e2e", len(want), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("all %d pods bound %s after creation", len(pods), time.Since(created).Round(time.Millisecond))

	nodeList, err = cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckFits(nodeList.Items, pods); err != nil {
		t.Fatalf("a binding does not fit its node:\n%v", err)
	}
	nodes := map[string]corev1.Node{}
	for _, n := range nodeList.Items {
		nodes[n.Name] = n
	}
	for _, p := range pods {
		n := nodes[p.Spec.NodeName]
		req := PodRequests(&p)
		if model := p.Spec.NodeSelector[GPUModelLabel]; model != "" && n.Labels[GPUModelLabel] != model {
			t.Errorf("pod %s wants GPU model %s, bound to %s with %q", p.Name, model, n.Name, n.Labels[GPUModelLabel])
		}
		_, gpuPod := req[GPUMilliResource]
		if _, gpuNode := n.Status.Allocatable[GPUResource]; gpuNode != gpuPod {
			t.Errorf("pod %s (GPU pod: %v) bound to %s (GPU node: %v): the %s taint did not hold", p.Name, gpuPod, n.Name, gpuNode, gpuTaint)
		}
		t.Logf("%s (cpu %s, mem %s, gpu %s, gpu-milli %s) -> %s (cpu %s, mem %s, %s GPUs %s)",
			p.Name, req.Cpu(), req.Memory(), ptrQ(req, GPUResource), ptrQ(req, GPUMilliResource),
			n.Name, n.Status.Allocatable.Cpu(), n.Status.Allocatable.Memory(), ptrQ(n.Status.Allocatable, GPUResource), n.Labels[GPUModelLabel])
	}
	t.Logf("control plane + nodes + scheduler + %d bindings in %s", len(pods), time.Since(began).Round(time.Millisecond))
}

func ptrQ(l corev1.ResourceList, name corev1.ResourceName) string {
	if q, ok := l[name]; ok {
		return q.String()
	}
	return "0"
}

// The helpers below need no control plane.

func TestSelectNodesCoversShapes(t *testing.T) {
	all, err := openb.LoadNodes("openb:"+openb.AllNodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := SelectNodes(all, 32)
	if len(got) != 32 {
		t.Fatalf("got %d nodes", len(got))
	}
	names := map[string]bool{}
	shapes := map[string]bool{}
	for _, n := range got {
		if names[n.Name] {
			t.Fatalf("duplicate %s", n.Name)
		}
		names[n.Name] = true
		shapes[fmt.Sprint(n.CPU, n.Memory, n.GPUs, n.GPUModel)] = true
	}
	if len(shapes) < 25 {
		t.Errorf("only %d distinct shapes in 32 nodes", len(shapes))
	}
	if again := SelectNodes(all, 32); !slices.EqualFunc(got, again, func(a, b sim.NodeSpec) bool { return a.Name == b.Name }) {
		t.Error("SelectNodes is not deterministic")
	}
	if len(SelectNodes(all, 0)) != len(all) || len(SelectNodes(all[:3], 10)) != 3 {
		t.Error("n <= 0 or n >= len must return all specs")
	}
}

func TestNodeObject(t *testing.T) {
	n := NodeObject(sim.NodeSpec{Name: "g", CPU: 96000, Memory: 393216, GPUs: 8, GPUModel: "G2", Arch: sim.ArchARM64,
		Taints: []sim.Taint{{Key: "k", Value: "v", Effect: sim.EffectNoExecute}}})
	a := n.Status.Allocatable
	if a.Cpu().MilliValue() != 96000 || a.Memory().Value() != 393216<<20 || a.Pods().Value() != DefaultMaxPods {
		t.Errorf("allocatable %v", a)
	}
	if g := a[GPUResource]; g.Value() != 8 {
		t.Errorf("gpu %v", g.String())
	}
	if g := a[GPUMilliResource]; g.Value() != 8000 {
		t.Errorf("gpu-milli %v", g.String())
	}
	if n.Labels[GPUModelLabel] != "G2" || n.Labels["kubernetes.io/arch"] != "arm64" {
		t.Errorf("labels %v", n.Labels)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Effect != corev1.TaintEffectNoExecute {
		t.Errorf("taints %v", n.Spec.Taints)
	}
	cpuOnly := NodeObject(sim.NodeSpec{Name: "c", CPU: 1000, Memory: 1024})
	if _, ok := cpuOnly.Status.Allocatable[GPUResource]; ok || cpuOnly.Labels[GPUModelLabel] != "" || cpuOnly.Labels["kubernetes.io/arch"] != "amd64" {
		t.Errorf("cpu-only node %v %v", cpuOnly.Status.Allocatable, cpuOnly.Labels)
	}
}

func TestCheckFits(t *testing.T) {
	node := *NodeObject(sim.NodeSpec{Name: "n", CPU: 4000, Memory: 8192, GPUs: 1, GPUModel: "T4"})
	bound := func(name string, s podShape) corev1.Pod {
		p := testPod(name, s)
		p.Spec.NodeName = "n"
		return *p
	}
	ok := []corev1.Pod{bound("a", podShape{cpu: "2", mem: "4Gi", gpuMilli: 500}), bound("b", podShape{cpu: "2", mem: "4Gi", gpuMilli: 500})}
	if err := CheckFits([]corev1.Node{node}, ok); err != nil {
		t.Errorf("fitting pods rejected: %v", err)
	}
	over := append(ok, bound("c", podShape{cpu: "1m", mem: "1Mi", gpuMilli: 1}))
	if err := CheckFits([]corev1.Node{node}, over); err == nil || !strings.Contains(err.Error(), string(GPUMilliResource)) {
		t.Errorf("gpu-milli overcommit not caught: %v", err)
	}
	cpuNode := *NodeObject(sim.NodeSpec{Name: "n", CPU: 4000, Memory: 8192})
	if err := CheckFits([]corev1.Node{cpuNode}, ok[:1]); err == nil {
		t.Error("GPU pod on a CPU-only node not caught")
	}
	stray := bound("d", podShape{cpu: "1", mem: "1Gi"})
	stray.Spec.NodeName = "elsewhere"
	if err := CheckFits([]corev1.Node{node}, []corev1.Pod{stray}); err == nil {
		t.Error("pod on an unknown node not caught")
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("zero options: %v", err)
	}
	if d := DefaultOptions(); d.ReadyTimeout <= 0 || d.StopGrace <= 0 || d.QPS <= 0 || d.ServiceClusterIPRange == "" {
		t.Errorf("defaults %+v", d)
	}
	for _, o := range []Options{{ReadyTimeout: -1}, {StopGrace: -1}, {Token: "a,b"}, {ServiceClusterIPRange: "x"}, {QPS: -1}} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
