package extender

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
)

// bindings records the pods/binding requests a fake clientset receives.
type bindings struct {
	mu   sync.Mutex
	list []*v1.Binding
}

func (b *bindings) last() *v1.Binding {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.list) == 0 {
		return nil
	}
	return b.list[len(b.list)-1]
}

func fakeBinder(objs ...runtime.Object) (*fake.Clientset, *bindings) {
	c := fake.NewClientset(objs...)
	b := &bindings{}
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok || a.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b.mu.Lock()
		b.list = append(b.list, ca.GetObject().(*v1.Binding).DeepCopy())
		b.mu.Unlock()
		return true, nil, nil
	})
	return c, b
}

func bindCall(t *testing.T, srv *httptest.Server, pod *v1.Pod, node string) *extenderv1.ExtenderBindingResult {
	t.Helper()
	return verbCall[extenderv1.ExtenderBindingResult](t, srv, "bind", &extenderv1.ExtenderBindingArgs{PodName: pod.Name, PodNamespace: pod.Namespace, PodUID: pod.UID, Node: node})
}

// t4Held700 is a plugin and a cluster of one node, t4, with two T4
// devices, device 0 holding a 700 milli-GPU share (annotated).
func t4Held700(t *testing.T) (*edgeplugin.EdgePolicy, *StaticSource) {
	t.Helper()
	p := newTestPlugin(t, nil, sim.NewTargetWorkload(nil, 0.95))
	held := k8sPod(sim.PodSpec{Name: "held", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 700})
	held.Annotations[kubefmt.AnnotationGPUDevices] = "0"
	return p, NewStaticSource([]*v1.Node{k8sNode(gpuNode("t4", "T4", 2))}, onNode(held, "t4"))
}

// TestExtenderBind: the bind verb binds with the devices the policy picks
// on the node, in the Binding's annotations; the pod then counts on its
// node until the source shows it (or AssumeTTL passes); pods without GPUs
// are bound without annotations; and every failure comes back in the
// result's Error.
//
// Node t4 has two T4 devices; device 0 holds a 700 milli-GPU share
// (annotated), so 300 is left there and device 1 is free.
func TestExtenderBind(t *testing.T) {
	p, src := t4Held700(t)

	a := k8sPod(sim.PodSpec{Name: "a", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 400})
	b := k8sPod(sim.PodSpec{Name: "b", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 700})
	cpu := k8sPod(sim.PodSpec{Name: "cpu", CPU: 100, Memory: 10})
	pinned := k8sPod(sim.PodSpec{Name: "pinned", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 200})
	pinned.Annotations[kubefmt.AnnotationGPUDevices] = "0"
	client, got := fakeBinder(a, b, cpu, pinned)
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	var clock sync.Mutex
	ext := New(p, src, Options{Client: client, Now: func() time.Time { clock.Lock(); defer clock.Unlock(); return now }})
	srv := httptest.NewServer(ext)
	defer srv.Close()

	// a (400) fits only device 1 (device 0 has 300 left)
	if res := bindCall(t, srv, a, "t4"); res.Error != "" {
		t.Fatalf("bind a: %s", res.Error)
	}
	bd := got.last()
	if bd == nil || bd.Name != "a" || bd.UID != a.UID || bd.Target.Name != "t4" || bd.Annotations[kubefmt.AnnotationGPUDevices] != "1" {
		t.Fatalf("binding of a: %+v, want to t4 with devices 1", bd)
	}
	// b (700): device 1 has 1000 - 400 = 600 left with a assumed there,
	// device 0 300: it fits nowhere, though the source does not show a yet
	if res := bindCall(t, srv, b, "t4"); !strings.Contains(res.Error, "does not fit") {
		t.Fatalf("bind b with a assumed on t4: %q, want a refusal", res.Error)
	}
	// once a is in the source, the assumption is dropped and a counts as
	// the source says (here: on device 1, as bound)
	src.AddPod(onNode(withDevices(a, "1"), "t4"))
	if res := bindCall(t, srv, b, "t4"); !strings.Contains(res.Error, "does not fit") {
		t.Fatalf("bind b with a in the source: %q, want a refusal", res.Error)
	}
	if n := len(ext.assumed); n != 0 {
		t.Fatalf("%d pods still assumed after the source showed them", n)
	}

	// no GPUs: a plain binding
	if res := bindCall(t, srv, cpu, "t4"); res.Error != "" {
		t.Fatalf("bind cpu: %s", res.Error)
	}
	if bd := got.last(); bd.Name != "cpu" || len(bd.Annotations) != 0 {
		t.Fatalf("binding of cpu: %+v, want no annotations", bd)
	}
	// devices a pod arrives with are replaced by the policy's choice, as
	// the plugin's Bind does: pinned (200) fits device 0 (300 left) or 1
	// (600 left), and the binding names one of them
	if res := bindCall(t, srv, pinned, "t4"); res.Error != "" {
		t.Fatalf("bind pinned: %s", res.Error)
	}
	if bd := got.last(); bd.Name != "pinned" || (bd.Annotations[kubefmt.AnnotationGPUDevices] != "0" && bd.Annotations[kubefmt.AnnotationGPUDevices] != "1") {
		t.Fatalf("binding of pinned: %+v, want the policy's device", bd)
	}

	// a retry of a binding that went through is a success; a pod bound
	// elsewhere is refused
	done := onNode(k8sPod(sim.PodSpec{Name: "done", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 100}), "t4")
	if _, err := client.CoreV1().Pods(done.Namespace).Create(t.Context(), done, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := len(got.list)
	if res := ext.Bind(t.Context(), &extenderv1.ExtenderBindingArgs{PodName: "done", PodNamespace: done.Namespace, PodUID: done.UID, Node: "t4"}); res.Error != "" || len(got.list) != before {
		t.Fatalf("retried bind of a bound pod: %q, %d new bindings; want success and none", res.Error, len(got.list)-before)
	}
	if res := ext.Bind(t.Context(), &extenderv1.ExtenderBindingArgs{PodName: "done", PodNamespace: done.Namespace, PodUID: done.UID, Node: "other"}); !strings.Contains(res.Error, "bound to t4 already") {
		t.Fatalf("bind of a pod bound elsewhere: %q", res.Error)
	}

	for _, tc := range []struct {
		name string
		args extenderv1.ExtenderBindingArgs
		want string
	}{
		{"recreated pod", extenderv1.ExtenderBindingArgs{PodName: "a", PodNamespace: a.Namespace, PodUID: "other", Node: "t4"}, "recreated"},
		{"unknown pod", extenderv1.ExtenderBindingArgs{PodName: "ghost", PodNamespace: a.Namespace, PodUID: "x", Node: "t4"}, "get pod"},
		{"unknown node", extenderv1.ExtenderBindingArgs{PodName: "b", PodNamespace: b.Namespace, PodUID: b.UID, Node: "ghost"}, "node ghost unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if res := ext.Bind(t.Context(), &tc.args); !strings.Contains(res.Error, tc.want) {
				t.Fatalf("error %q, want it to name %q", res.Error, tc.want)
			}
		})
	}

	// without a client the verb answers an error, not a crash
	bare := httptest.NewServer(New(p, src, Options{}))
	defer bare.Close()
	if res := bindCall(t, bare, cpu, "t4"); !strings.Contains(res.Error, "no API client") {
		t.Fatalf("bind without a client: %q", res.Error)
	}
	// malformed arguments are a bad request
	for _, body := range []string{`{}`, `{"PodName":"a","PodNamespace":"default"}`, `{"PodName":"a","PodNamespace":"default","Node":"t4","Extra":1}`, `{"PodName":"a"} {}`} {
		if code, reply := post(t, srv.URL+"/bind", []byte(body)); code != http.StatusBadRequest {
			t.Errorf("bind %s: %d %s, want 400", body, code, reply)
		}
	}
}

// TestExtenderBindAssumeTTL: an assumed pod the source never shows is
// forgotten after AssumeTTL, so a lost binding does not hold its devices
// for ever.
func TestExtenderBindAssumeTTL(t *testing.T) {
	p := newTestPlugin(t, nil, sim.NewTargetWorkload(nil, 0.95))
	t4 := k8sNode(gpuNode("t4", "T4", 1))
	src := NewStaticSource([]*v1.Node{t4})
	a := k8sPod(sim.PodSpec{Name: "a", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 600})
	b := k8sPod(sim.PodSpec{Name: "b", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 600})
	client, _ := fakeBinder(a, b)
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	ext := New(p, src, Options{Client: client, Now: func() time.Time { return now }})
	if res := ext.Bind(t.Context(), &extenderv1.ExtenderBindingArgs{PodName: "a", PodNamespace: a.Namespace, PodUID: a.UID, Node: "t4"}); res.Error != "" {
		t.Fatal(res.Error)
	}
	args := &extenderv1.ExtenderBindingArgs{PodName: "b", PodNamespace: b.Namespace, PodUID: b.UID, Node: "t4"}
	// 600 + 600 > 1000 on the one device while a is assumed
	if res := ext.Bind(t.Context(), args); !strings.Contains(res.Error, "does not fit") {
		t.Fatalf("bind b with a assumed: %q", res.Error)
	}
	now = now.Add(AssumeTTL + time.Second)
	if res := ext.Bind(t.Context(), args); res.Error != "" {
		t.Fatalf("bind b after AssumeTTL: %q", res.Error)
	}
}

func withDevices(p *v1.Pod, dev string) *v1.Pod {
	p = p.DeepCopy()
	p.Annotations[kubefmt.AnnotationGPUDevices] = dev
	return p
}

// FuzzDecodeBindingArgs: the bind verb's decoder never panics, and what it
// accepts names a pod (name and namespace) and a node. Seeded with the
// arguments kube-scheduler sends.
func FuzzDecodeBindingArgs(f *testing.F) {
	for _, a := range []extenderv1.ExtenderBindingArgs{
		{PodName: "a", PodNamespace: "default", PodUID: "0b0c6f3e-1a2b-4c5d-8e9f-0a1b2c3d4e5f", Node: "openb-node-0001"},
		{PodName: "web-7d9c", PodNamespace: "shop", Node: "edge-a-1"},
	} {
		b, err := json.Marshal(a)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"podname":"a","podnamespace":"x","node":"n"}`))
	f.Add([]byte(`{"PodName":"a","PodNamespace":"x","Node":"n"} {}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := decodeBindingArgs(raw)
		if err != nil {
			return
		}
		if a.PodName == "" || a.PodNamespace == "" || a.Node == "" {
			t.Fatalf("accepted %q as %+v", raw, a)
		}
	})
}

// FuzzDecodeExtenderArgs: the filter and prioritize decoder never panics,
// and what it accepts has a pod and exactly one of Nodes or NodeNames,
// with named, distinct nodes. Seeded with real requests.
func FuzzDecodeExtenderArgs(f *testing.F) {
	n1, n2 := k8sNode(gpuNode("t4", "T4", 2)), k8sNode(sim.NodeSpec{Name: "cpu", CPU: 8000, Memory: 8192, Arch: sim.ArchAMD64})
	pod := k8sPod(sim.PodSpec{Name: "a", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 400, GPUSpec: []string{"T4"}})
	names := []string{"t4", "cpu"}
	for _, a := range []extenderv1.ExtenderArgs{{Pod: pod, Nodes: nodeList(n1, n2)}, {Pod: pod, NodeNames: &names}} {
		b, err := json.Marshal(a)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"Pod":{},"NodeNames":["a","a"]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := decodeExtenderArgs(raw)
		if err != nil {
			return
		}
		if a.Pod == nil || (a.Nodes == nil) == (a.NodeNames == nil) {
			t.Fatalf("accepted %q as %+v", raw, a)
		}
		seen := map[string]bool{}
		var list []string
		if a.NodeNames != nil {
			list = *a.NodeNames
		} else {
			for _, n := range a.Nodes.Items {
				list = append(list, n.Name)
			}
		}
		for _, n := range list {
			if n == "" || seen[n] {
				t.Fatalf("accepted %q with node names %v", raw, list)
			}
			seen[n] = true
		}
	})
}

// slowBinds is a clientset whose pods/binding calls take latency: binds
// that start together overlap. (The fake clientset runs reactors under one
// lock, so a reactor cannot stand in for a slow API server.)
type slowBinds struct {
	*fake.Clientset
	latency time.Duration
}

func (c *slowBinds) CoreV1() corev1client.CoreV1Interface {
	return slowCore{CoreV1Interface: c.Clientset.CoreV1(), c: c}
}

type slowCore struct {
	corev1client.CoreV1Interface
	c *slowBinds
}

func (s slowCore) Pods(ns string) corev1client.PodInterface {
	return slowPods{PodInterface: s.CoreV1Interface.Pods(ns), c: s.c}
}

type slowPods struct {
	corev1client.PodInterface
	c *slowBinds
}

func (p slowPods) Bind(ctx context.Context, b *v1.Binding, o metav1.CreateOptions) error {
	time.Sleep(p.c.latency)
	return p.PodInterface.Bind(ctx, b, o)
}

// TestExtenderBindConcurrent: two binds at once of 600 milli-GPU pods to a
// node with one free T4 never both get the device (1200 on a 1000
// device): one is bound on device 0, the other refused.
func TestExtenderBindConcurrent(t *testing.T) {
	p := newTestPlugin(t, nil, sim.NewTargetWorkload(nil, 0.95))
	src := NewStaticSource([]*v1.Node{k8sNode(gpuNode("t4", "T4", 1))})
	a := k8sPod(sim.PodSpec{Name: "a", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 600})
	b := k8sPod(sim.PodSpec{Name: "b", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 600})
	inner, got := fakeBinder(a, b)
	// both binds choose their devices while the first binding is in flight
	client := &slowBinds{Clientset: inner, latency: 300 * time.Millisecond}
	ext := New(p, src, Options{Client: client})
	var wg sync.WaitGroup
	res := make([]*extenderv1.ExtenderBindingResult, 2)
	for i, pod := range []*v1.Pod{a, b} {
		wg.Go(func() {
			res[i] = ext.Bind(t.Context(), &extenderv1.ExtenderBindingArgs{PodName: pod.Name, PodNamespace: pod.Namespace, PodUID: pod.UID, Node: "t4"})
		})
	}
	wg.Wait()
	ok := 0
	for i, r := range res {
		switch {
		case r.Error == "":
			ok++
		case !strings.Contains(r.Error, "does not fit"):
			t.Errorf("bind %d: %q, want success or a refusal", i, r.Error)
		}
	}
	got.mu.Lock()
	defer got.mu.Unlock()
	if ok != 1 || len(got.list) != 1 || got.list[0].Annotations[kubefmt.AnnotationGPUDevices] != "0" {
		t.Fatalf("%d binds succeeded, bindings %v: want exactly one, on device 0", ok, got.list)
	}
}

// TestExtenderBindKeepsNodeCache: the bind verb models one node, and must
// not make the node cache forget the rest of the cluster (the next filter
// and prioritize calls would rebuild every NodeInfo and miss the
// converter's caches).
func TestExtenderBindKeepsNodeCache(t *testing.T) {
	p := newTestPlugin(t, nil, sim.NewTargetWorkload(nil, 0.95))
	var nodes []*v1.Node
	for i := range 100 {
		n := k8sNode(gpuNode(fmt.Sprintf("n%03d", i), "T4", 1))
		n.ResourceVersion = "1" // cacheable
		nodes = append(nodes, n)
	}
	src := NewStaticSource(nodes)
	a := k8sPod(sim.PodSpec{Name: "a", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 600})
	client, _ := fakeBinder(a)
	ext := New(p, src, Options{Client: client})
	ext.infos(nodes, "")
	if n := len(ext.cache); n != 100 {
		t.Fatalf("cache holds %d nodes after a whole-cluster call, want 100", n)
	}
	if res := ext.Bind(t.Context(), &extenderv1.ExtenderBindingArgs{PodName: "a", PodNamespace: a.Namespace, PodUID: a.UID, Node: "n007"}); res.Error != "" {
		t.Fatal(res.Error)
	}
	if n := len(ext.cache); n != 100 {
		t.Fatalf("cache holds %d nodes after a bind, want 100", n)
	}
}

// TestExtenderFilterWaitsForBinding: the scheduler filters the next pod
// while the previous one's binding is on its way; a filter call for a GPU
// pod waits until the bindings of the pods filtered and prioritized before
// it reach the bind verb, so it sees their devices taken (without the wait, b below
// passes filter on t4 and its binding is refused). A pod prioritized and
// never bound is given up after BindWait; before the scheduler has
// delegated any binding nothing waits.
//
// Node t4 has two T4 devices; device 0 holds a 700 milli-GPU share, so
// an 800 share fits device 1 only, and a second one nowhere.
func TestExtenderFilterWaitsForBinding(t *testing.T) {
	p, src := t4Held700(t)
	share := func(name string) *v1.Pod {
		return k8sPod(sim.PodSpec{Name: name, CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 800})
	}
	a, b, c, warm := share("a"), share("b"), share("c"), k8sPod(sim.PodSpec{Name: "warm", CPU: 100, Memory: 10})
	client, _ := fakeBinder(a, b, c, warm)
	names := func(pod *v1.Pod) *extenderv1.ExtenderArgs {
		return &extenderv1.ExtenderArgs{Pod: pod, NodeNames: &[]string{"t4"}}
	}
	waits := func(outcome waitOutcome) float64 {
		v, _ := testutil.GetCounterMetricValue(metricExtBindWaits.WithLabelValues(string(outcome)))
		return v
	}

	ext := New(p, src, Options{Client: client, BindWait: time.Minute})
	srv := httptest.NewServer(ext)
	defer srv.Close()

	// before any binding was delegated, filter and prioritize mark nothing
	filterCall(t, srv, names(a))
	prioritizeCall(t, srv, names(a))
	if n := len(ext.inflight.pods); n != 0 {
		t.Fatalf("%d pods in flight before the scheduler delegated a binding", n)
	}
	if res := bindCall(t, srv, warm, "t4"); res.Error != "" {
		t.Fatalf("bind warm: %s", res.Error)
	}

	// a pod only ranked (the filter-and-bind extender is not interested
	// in it: the scheduler binds it) is not waited for
	prioritizeCall(t, srv, names(warm))
	if n := len(ext.inflight.pods); n != 0 {
		t.Fatalf("%d pods in flight after prioritizing a pod never filtered", n)
	}
	// a is filtered and prioritized; b's filter waits until a's binding
	// arrives
	filterCall(t, srv, names(a))
	prioritizeCall(t, srv, names(a))
	bound := waits(waitBound)
	got := make(chan *extenderv1.ExtenderFilterResult, 1)
	go func() { got <- filterCall(t, srv, names(b)) }()
	deadline := time.Now().Add(30 * time.Second)
	for ext.inflight.waiters.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("b's filter call did not wait for a's binding")
		}
		goruntime.Gosched()
	}
	if res := bindCall(t, srv, a, "t4"); res.Error != "" {
		t.Fatalf("bind a: %s", res.Error)
	}
	res := <-got
	if _, failed := res.FailedNodes["t4"]; !failed || len(*res.NodeNames) != 0 {
		t.Fatalf("filter b after a's binding: passed %v, failed %v; want t4 failed (a took device 1)", *res.NodeNames, res.FailedNodes)
	}
	if d := waits(waitBound) - bound; d != 1 {
		t.Fatalf("filter waits ended by a binding: %v, want 1", d)
	}

	// c is prioritized and never bound: a short BindWait gives it up
	short := New(p, src, Options{Client: client, BindWait: 20 * time.Millisecond})
	ssrv := httptest.NewServer(short)
	defer ssrv.Close()
	short.binds.Store(true)
	// c in flight, then pod's filter call ends its wait with outcome
	waitAfterC := func(pod *v1.Pod, outcome waitOutcome) {
		t.Helper()
		filterCall(t, ssrv, names(c))
		prioritizeCall(t, ssrv, names(c))
		before := waits(outcome)
		filterCall(t, ssrv, names(pod))
		if d := waits(outcome) - before; d != 1 {
			t.Fatalf("filter of %s with c in flight: %v waits ended %s, want 1", pod.Name, d, outcome)
		}
	}
	waitAfterC(b, waitExpired)
	if n := len(short.inflight.pods); n != 0 {
		t.Fatalf("%d pods still in flight after BindWait", n)
	}
	waitAfterC(c, waitNone) // a pod does not wait for itself
}
