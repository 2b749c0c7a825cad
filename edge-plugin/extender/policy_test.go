package extender

import (
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policydoc"
	"github.com/edgesched/edgesched/sim"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

func TestPolicyExtender(t *testing.T) {
	nodes, pods := plugintest.PolicyCluster()
	p := newTestPlugin(t, nil, sim.NewTargetWorkload(nil, 0.95))
	doc, err := policydoc.Decode([]byte(plugintest.TestPolicy))
	if err != nil {
		t.Fatal(err)
	}
	p.Core().Policy().Set(doc)
	srv := httptest.NewServer(New(p, NewStaticSource(nodes, pods...), Options{}))
	defer srv.Close()
	res := filterCall(t, srv, &extenderv1.ExtenderArgs{Pod: plugintest.ServicePod("payment-0", "payment"), Nodes: nodeList(nodes...)})
	if res.Nodes == nil || len(res.Nodes.Items) != 1 || res.Nodes.Items[0].Name != "n1" {
		t.Fatalf("kept %+v, want n1 only (%+v)", res.Nodes, res.FailedNodes)
	}
	if !strings.Contains(res.FailedNodes["n2"], "policy rule pay-orders") {
		t.Errorf("n2: %q", res.FailedNodes["n2"])
	}
	prio := prioritizeCall(t, srv, &extenderv1.ExtenderArgs{Pod: plugintest.ServicePod("web-0", "web"), Nodes: nodeList(nodes[1], nodes[2])})
	got := map[string]int64{}
	for _, h := range prio {
		got[h.Host] = h.Score
	}
	if !(got["n3"] > got["n2"]) {
		t.Errorf("prioritize %v: arm64 n3 should rank above n2", got)
	}
}

// TestPolicyExtenderPrioritizeBounded: with scoreShare 100 the preferred
// rule alone decides, and the extender's scores are exactly the bounds of
// its range: MaxExtenderPriority where the rule holds, 0 where it does not.
func TestPolicyExtenderPrioritizeBounded(t *testing.T) {
	nodes, pods := plugintest.PolicyCluster()
	p := newTestPlugin(t, nil, sim.NewTargetWorkload(nil, 0.95))
	doc, err := policydoc.Decode([]byte(strings.Replace(plugintest.TestPolicy, "rules:", "scoreShare: 100\nrules:", 1)))
	if err != nil {
		t.Fatal(err)
	}
	p.Core().Policy().Set(doc)
	srv := httptest.NewServer(New(p, NewStaticSource(nodes, pods...), Options{}))
	defer srv.Close()
	got := map[string]int64{}
	for _, h := range prioritizeCall(t, srv, &extenderv1.ExtenderArgs{Pod: plugintest.ServicePod("web-0", "web"), Nodes: nodeList(nodes...)}) {
		got[h.Host] = h.Score
	}
	want := map[string]int64{"n1": 0, "n2": 0, "n3": extenderv1.MaxExtenderPriority, "n4": extenderv1.MaxExtenderPriority}
	if len(got) != len(want) {
		t.Fatalf("prioritize %v, want %v", got, want)
	}
	for n, s := range want {
		if got[n] != s {
			t.Errorf("prioritize %v, want %v", got, want)
			break
		}
	}
}

// TestPolicyExtenderBind: the bind verb is where the extender commits the
// policy's required rules. Two cache replicas filtered at once both see
// n2 free of cache (the extender cannot know where the scheduler puts the
// first before it is bound); binding the first there holds, binding the
// second there is refused naming the rule, and the filter then refuses n2
// for it, the first being assumed there. A pod bound where a rule applied
// carries edgesched.io/policy; a failed binding takes its assumption
// back; a pod no rule applies to binds anywhere without annotations.
func TestPolicyExtenderBind(t *testing.T) {
	nodes, pods := plugintest.PolicyCluster()
	p := newTestPlugin(t, nil, sim.NewTargetWorkload(nil, 0.95))
	doc, err := policydoc.Decode([]byte(plugintest.TestPolicy + "- {name: one-cache, kind: spread, effect: required, pods: {services: [cache]}, scope: node, maxPerDomain: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p.Core().Policy().Set(doc)
	ca, cb, cc, cf := plugintest.ServicePod("cache-a", "cache"), plugintest.ServicePod("cache-b", "cache"), plugintest.ServicePod("cache-c", "cache"), plugintest.ServicePod("cache-fails", "cache")
	pay, other := plugintest.ServicePod("payment-0", "payment"), plugintest.ServicePod("other-0", "other")
	cd := plugintest.ServicePod("cache-d", "cache")
	client, got := fakeBinder(ca, cb, cc, cd, cf, pay, other)
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if ca, ok := a.(k8stesting.CreateAction); ok && a.GetSubresource() == "binding" && ca.GetObject().(*v1.Binding).Name == "cache-fails" {
			return true, nil, errors.New("injected binding failure")
		}
		return false, nil, nil
	})
	src := NewStaticSource(nodes, pods...) // never shows the bindings: only assumption counts them
	ext := New(p, src, Options{Client: client})
	srv := httptest.NewServer(ext)
	defer srv.Close()
	kept := func(pod *v1.Pod) []string {
		t.Helper()
		res := filterCall(t, srv, &extenderv1.ExtenderArgs{Pod: pod, Nodes: nodeList(nodes...)})
		var out []string
		for _, n := range res.Nodes.Items {
			out = append(out, n.Name)
		}
		return out
	}
	if a, b := kept(ca), kept(cb); !slices.Contains(a, "n2") || !slices.Contains(b, "n2") {
		t.Fatalf("before any binding both replicas may take n2: %v, %v", a, b)
	}
	if res := bindCall(t, srv, ca, "n2"); res.Error != "" {
		t.Fatalf("bind cache-a to n2: %s", res.Error)
	}
	if res := bindCall(t, srv, cb, "n2"); !strings.Contains(res.Error, "policy rule one-cache (run at most 1 replica of cache per node): node n2 already runs 1 cache replica(s) (at most 1)") {
		t.Fatalf("bind cache-b to n2 after cache-a: %q, want a refusal naming one-cache", res.Error)
	}
	if b := kept(cb); slices.Contains(b, "n2") {
		t.Fatalf("filter after cache-a's binding keeps n2 for cache-b: %v", b)
	}
	if res := bindCall(t, srv, cb, "n3"); res.Error != "" {
		t.Fatalf("bind cache-b to n3: %s", res.Error)
	}
	if bd := got.last(); bd.Name != "cache-b" || !strings.HasPrefix(bd.Annotations[kubefmt.AnnotationPolicy], "one-cache: held: run at most 1 replica of cache per node") {
		t.Fatalf("binding of cache-b: %+v, want %s naming one-cache", bd, kubefmt.AnnotationPolicy)
	}
	// a failed binding takes the assumption back: n4 stays free of cache
	if res := bindCall(t, srv, cf, "n4"); !strings.Contains(res.Error, "injected binding failure") {
		t.Fatalf("bind cache-fails: %q", res.Error)
	}
	if res := bindCall(t, srv, cc, "n4"); res.Error != "" {
		t.Fatalf("bind cache-c to n4 after a failed binding there: %s", res.Error)
	}
	// colocation: payment must join orders in zone a
	if res := bindCall(t, srv, pay, "n2"); !strings.Contains(res.Error, "policy rule pay-orders") || !strings.Contains(res.Error, "zone b is not where payment, orders run (a)") {
		t.Fatalf("bind payment to zone b: %q", res.Error)
	}
	if res := bindCall(t, srv, pay, "n1"); res.Error != "" {
		t.Fatalf("bind payment to n1: %s", res.Error)
	}
	// no rule applies: bound anywhere, no annotations
	if res := bindCall(t, srv, other, "n4"); res.Error != "" {
		t.Fatalf("bind other: %s", res.Error)
	}
	if bd := got.last(); bd.Name != "other-0" || len(bd.Annotations) != 0 {
		t.Fatalf("binding of other-0: %+v, want no annotations", bd)
	}
	// until the cache syncs, a pod a rule applies to is not bound (called
	// directly: the server's goroutines read NotSynced)
	srv.Close()
	src.NotSynced = true
	if res := ext.Bind(t.Context(), &extenderv1.ExtenderBindingArgs{PodName: cd.Name, PodNamespace: cd.Namespace, PodUID: cd.UID, Node: "n1"}); !strings.Contains(res.Error, "not synced") {
		t.Fatalf("bind while not synced: %q", res.Error)
	}
}
