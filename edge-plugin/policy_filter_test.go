package edgeplugin

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policydoc"
	"github.com/edgesched/edgesched/sim"
)

const testPolicy = `apiVersion: edgesched.policy/v1
kind: SchedulingPolicy
rules:
- {name: pay-orders, kind: colocate, effect: required, pods: {services: [payment, orders]}, scope: zone}
- {name: web-arm, kind: arch, effect: preferred, weight: 50, pods: {services: [web]}, arch: [arm64]}
- {name: no-zone-c, kind: zone, effect: required, pods: {services: [web]}, zones: [c], negate: true}
`

func servicePod(name, service string) *v1.Pod {
	p := k8sPod(sim.PodSpec{Name: name, CPU: 100, Memory: 64})
	p.Labels = map[string]string{"app": service}
	return p
}

// policyCluster: orders runs on n1 in zone a; n2 (zone b, amd64), n3
// (zone b, arm64), n4 (zone c, arm64).
func policyCluster() ([]*v1.Node, []*v1.Pod) {
	n1 := k8sNode(sim.NodeSpec{Name: "n1", CPU: 4000, Memory: 4096, Arch: sim.ArchAMD64, Zone: "a"})
	n2 := k8sNode(sim.NodeSpec{Name: "n2", CPU: 4000, Memory: 4096, Arch: sim.ArchAMD64, Zone: "b"})
	n3 := k8sNode(sim.NodeSpec{Name: "n3", CPU: 4000, Memory: 4096, Arch: sim.ArchARM64, Zone: "b"})
	n4 := k8sNode(sim.NodeSpec{Name: "n4", CPU: 4000, Memory: 4096, Arch: sim.ArchARM64, Zone: "c"})
	return []*v1.Node{n1, n2, n3, n4}, []*v1.Pod{onNode(servicePod("orders-0", "orders"), "n1")}
}

func TestPolicyFilterAndScore(t *testing.T) {
	nodes, pods := policyCluster()
	var infos []fwk.NodeInfo
	for _, n := range nodes {
		var on []*v1.Pod
		for _, p := range pods {
			if p.Spec.NodeName == n.Name {
				on = append(on, p)
			}
		}
		infos = append(infos, nodeInfo(n, on...))
	}
	p := newTestPlugin(t, &fakeHandle{lister: &fakeLister{nodes: infos}}, sim.NewTargetWorkload(nil, 0.95))
	p.now = func() time.Time { return time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) }
	ctx := context.Background()

	// without a policy, a pod without GPUs skips Filter as before
	cs := framework.NewCycleState()
	if _, st := p.PreFilter(ctx, cs, servicePod("payment-0", "payment"), nil); !st.IsSkip() {
		t.Fatalf("no policy: PreFilter %v, want Skip", st)
	}
	if _, err := p.policy.install([]byte(testPolicy)); err != nil {
		t.Fatal(err)
	}
	// payment must join orders' zone a
	pay := servicePod("payment-0", "payment")
	cs = framework.NewCycleState()
	if _, st := p.PreFilter(ctx, cs, pay, nil); !st.IsSuccess() {
		t.Fatalf("PreFilter %v", st)
	}
	if st := p.Filter(ctx, cs, pay, infos[0]); !st.IsSuccess() {
		t.Errorf("n1 (zone a): %v", st)
	}
	st := p.Filter(ctx, cs, pay, infos[1])
	if st.Code() != fwk.Unschedulable || !strings.Contains(st.Message(), "policy rule pay-orders (keep payment and orders in the same zone): zone b is not where payment, orders run (a)") {
		t.Errorf("n2 (zone b): %v", st)
	}
	// web: zone c refused, arm64 preferred: with no model score (0), the
	// preference decides half of the score: 0.5*100 = 50 on arm64, 0 else
	web := servicePod("web-0", "web")
	cs = framework.NewCycleState()
	p.PreFilter(ctx, cs, web, nil)
	if st := p.Filter(ctx, cs, web, infos[3]); st.IsSuccess() || !strings.Contains(st.Message(), "no-zone-c") {
		t.Errorf("n4 (zone c): %v", st)
	}
	s2, _ := p.Score(ctx, cs, web, infos[1])
	s3, _ := p.Score(ctx, cs, web, infos[2])
	if s2 != 0 || s3 != 50 {
		t.Errorf("scores amd64 %d, arm64 %d; want 0 and 50", s2, s3)
	}
	// the placement's explanation names the rules: web on n3 (arm64)
	if got := p.policyAnnotation(cs, "n3"); got != "web-arm: 1.00 (weight 50): prefer to run web on arm64 nodes (weight 50)\nno-zone-c: held: never run web in zone c" {
		t.Errorf("policy annotation:\n%s", got)
	}
	// a malformed policy is refused and the last good one stays
	if _, err := p.policy.install([]byte(strings.Replace(testPolicy, "colocate", "colocated", 1))); err == nil {
		t.Fatal("malformed policy installed")
	}
	if d := p.policy.current(); d == nil || d.Rules[0].Name != "pay-orders" {
		t.Fatalf("policy after a refusal: %+v", d)
	}
	if !p.policy.clear() || p.policy.current() != nil {
		t.Fatal("clear")
	}
}

func TestPolicyExtender(t *testing.T) {
	nodes, pods := policyCluster()
	p := newTestPlugin(t, nil, sim.NewTargetWorkload(nil, 0.95))
	doc, err := policydoc.Decode([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	p.policy.set(doc)
	srv := httptest.NewServer(NewExtender(p, NewStaticSource(nodes, pods...), ExtenderOptions{}))
	defer srv.Close()
	res := filterCall(t, srv, &extenderv1.ExtenderArgs{Pod: servicePod("payment-0", "payment"), Nodes: nodeList(nodes...)})
	if res.Nodes == nil || len(res.Nodes.Items) != 1 || res.Nodes.Items[0].Name != "n1" {
		t.Fatalf("kept %+v, want n1 only (%+v)", res.Nodes, res.FailedNodes)
	}
	if !strings.Contains(res.FailedNodes["n2"], "policy rule pay-orders") {
		t.Errorf("n2: %q", res.FailedNodes["n2"])
	}
	prio := prioritizeCall(t, srv, &extenderv1.ExtenderArgs{Pod: servicePod("web-0", "web"), Nodes: nodeList(nodes[1], nodes[2])})
	got := map[string]int64{}
	for _, h := range prio {
		got[h.Host] = h.Score
	}
	if !(got["n3"] > got["n2"]) {
		t.Errorf("prioritize %v: arm64 n3 should rank above n2", got)
	}
}

// TestPolicyCarbonPreference: a carbon preference ranks nodes by the
// pod's estimated emissions (grid intensity x the node's power for the
// pod), relative to the least among the nodes PreScore sees. Zone a's
// grid is at 150 g/kWh, zone b's at 400; amd64 nodes draw the reference 8
// W/core, arm64 2 W/core. A CPU pod's emissions: n1 (a, amd64) 150, n2 (b,
// amd64) 400, n3 (b, arm64) 400*2/8 = 100, the least; so the rule's
// satisfaction (named in the placement's annotation) is n1 100/150 = 0.67,
// n2 100/400 = 0.25, n3 1. Scores mix in the model's (checked in
// TestPolicyFilterAndScore); here they need only stay in range.
func TestPolicyCarbonPreference(t *testing.T) {
	nodes, _ := policyCluster()
	var infos []fwk.NodeInfo
	for _, n := range nodes[:3] {
		infos = append(infos, nodeInfo(n))
	}
	p := newTestPlugin(t, &fakeHandle{lister: &fakeLister{nodes: infos}}, sim.NewTargetWorkload(nil, 0.95))
	p.now = func() time.Time { return time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) }
	tp := &kubefmt.Topology{
		Zones:       []kubefmt.TopologyZone{{Name: "a", CarbonZone: "north"}, {Name: "b", CarbonZone: "south"}},
		CarbonZones: []kubefmt.CarbonZone{{Name: "north", GramsPerKWh: []float64{150}}, {Name: "south", GramsPerKWh: []float64{400}}},
	}
	if _, err := p.conv.topo.install(topologyOf(t, tp)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.policy.install([]byte("apiVersion: edgesched.policy/v1\nkind: SchedulingPolicy\nrules:\n- {name: green, kind: carbon, effect: preferred, weight: 100, pods: {}}\n")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pod := servicePod("web-0", "web")
	cs := framework.NewCycleState()
	if _, st := p.PreFilter(ctx, cs, pod, nil); !st.IsSuccess() {
		t.Fatalf("PreFilter %v", st)
	}
	p.PreScore(ctx, cs, pod, infos)
	for i, want := range []string{"green: 0.67 (weight 100)", "green: 0.25 (weight 100)", "green: 1.00 (weight 100)"} {
		n := infos[i].Node().Name
		if got := p.policyAnnotation(cs, n); !strings.HasPrefix(got, want) {
			t.Errorf("%s: policy annotation %q, want %q", n, got, want)
		}
		if s, st := p.Score(ctx, cs, pod, infos[i]); s < fwk.MinNodeScore || s > fwk.MaxNodeScore || !st.IsSuccess() {
			t.Errorf("%s: score %d (%v)", n, s, st)
		}
	}
	// without PreScore's least emissions the rule falls back to the
	// absolute scale: n1 1 - 150/1000 = 0.85
	cs = framework.NewCycleState()
	p.PreFilter(ctx, cs, pod, nil)
	if got := p.policyAnnotation(cs, "n1"); !strings.HasPrefix(got, "green: 0.85 (weight 100)") {
		t.Errorf("n1 without PreScore: %q", got)
	}
}

// TestPolicyExtenderPrioritizeBounded: with scoreShare 100 the preferred
// rule alone decides, and the extender's scores are exactly the bounds of
// its range: MaxExtenderPriority where the rule holds, 0 where it does not.
func TestPolicyExtenderPrioritizeBounded(t *testing.T) {
	nodes, pods := policyCluster()
	p := newTestPlugin(t, nil, sim.NewTargetWorkload(nil, 0.95))
	doc, err := policydoc.Decode([]byte(strings.Replace(testPolicy, "rules:", "scoreShare: 100\nrules:", 1)))
	if err != nil {
		t.Fatal(err)
	}
	p.policy.set(doc)
	srv := httptest.NewServer(NewExtender(p, NewStaticSource(nodes, pods...), ExtenderOptions{}))
	defer srv.Close()
	got := map[string]int64{}
	for _, h := range prioritizeCall(t, srv, &extenderv1.ExtenderArgs{Pod: servicePod("web-0", "web"), Nodes: nodeList(nodes...)}) {
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
	nodes, pods := policyCluster()
	p := newTestPlugin(t, nil, sim.NewTargetWorkload(nil, 0.95))
	doc, err := policydoc.Decode([]byte(testPolicy + "- {name: one-cache, kind: spread, effect: required, pods: {services: [cache]}, scope: node, maxPerDomain: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p.policy.set(doc)
	ca, cb, cc, cf := servicePod("cache-a", "cache"), servicePod("cache-b", "cache"), servicePod("cache-c", "cache"), servicePod("cache-fails", "cache")
	pay, other := servicePod("payment-0", "payment"), servicePod("other-0", "other")
	cd := servicePod("cache-d", "cache")
	client, got := fakeBinder(ca, cb, cc, cd, cf, pay, other)
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if ca, ok := a.(k8stesting.CreateAction); ok && a.GetSubresource() == "binding" && ca.GetObject().(*v1.Binding).Name == "cache-fails" {
			return true, nil, errors.New("injected binding failure")
		}
		return false, nil, nil
	})
	src := NewStaticSource(nodes, pods...) // never shows the bindings: only assumption counts them
	ext := NewExtender(p, src, ExtenderOptions{Client: client})
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
	if bd := got.last(); bd.Name != "cache-b" || !strings.HasPrefix(bd.Annotations[AnnotationPolicy], "one-cache: held: run at most 1 replica of cache per node") {
		t.Fatalf("binding of cache-b: %+v, want %s naming one-cache", bd, AnnotationPolicy)
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
