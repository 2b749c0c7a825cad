package edgeplugin

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
)

func TestPolicyFilterAndScore(t *testing.T) {
	nodes, pods := plugintest.PolicyCluster()
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
	p := newTestPlugin(t, &fakeHandle{Lister: &fakeLister{Nodes: infos}}, sim.NewTargetWorkload(nil, 0.95))
	p.core.SetClock(func() time.Time { return time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) })
	ctx := context.Background()

	// without a policy, a pod without GPUs skips Filter as before
	cs := framework.NewCycleState()
	if _, st := p.PreFilter(ctx, cs, plugintest.ServicePod("payment-0", "payment"), nil); !st.IsSkip() {
		t.Fatalf("no policy: PreFilter %v, want Skip", st)
	}
	if _, err := p.core.Policy().Install([]byte(plugintest.TestPolicy)); err != nil {
		t.Fatal(err)
	}
	// payment must join orders' zone a
	pay := plugintest.ServicePod("payment-0", "payment")
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
	web := plugintest.ServicePod("web-0", "web")
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
	if _, err := p.core.Policy().Install([]byte(strings.Replace(plugintest.TestPolicy, "colocate", "colocated", 1))); err == nil {
		t.Fatal("malformed policy installed")
	}
	if d := p.core.Policy().Current(); d == nil || d.Rules[0].Name != "pay-orders" {
		t.Fatalf("policy after a refusal: %+v", d)
	}
	if !p.core.Policy().Clear() || p.core.Policy().Current() != nil {
		t.Fatal("clear")
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
	nodes, _ := plugintest.PolicyCluster()
	var infos []fwk.NodeInfo
	for _, n := range nodes[:3] {
		infos = append(infos, nodeInfo(n))
	}
	p := newTestPlugin(t, &fakeHandle{Lister: &fakeLister{Nodes: infos}}, sim.NewTargetWorkload(nil, 0.95))
	p.core.SetClock(func() time.Time { return time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) })
	tp := &kubefmt.Topology{
		Zones:       []kubefmt.TopologyZone{{Name: "a", CarbonZone: "north"}, {Name: "b", CarbonZone: "south"}},
		CarbonZones: []kubefmt.CarbonZone{{Name: "north", GramsPerKWh: []float64{150}}, {Name: "south", GramsPerKWh: []float64{400}}},
	}
	if _, err := p.core.Topology().Install(plugintest.TopologyOf(t, tp)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.core.Policy().Install([]byte("apiVersion: edgesched.policy/v1\nkind: SchedulingPolicy\nrules:\n- {name: green, kind: carbon, effect: preferred, weight: 100, pods: {}}\n")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pod := plugintest.ServicePod("web-0", "web")
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

// bindingPhaseHandle is clientHandle whose snapshot lister fails the test
// once the binding cycle has begun (binding set): kube-scheduler updates
// the snapshot in place for the next pod's scheduling cycle while a pod's
// binding cycle runs, so the framework allows SnapshotSharedLister during
// the scheduling cycle only (fwk.Handle's documentation).
type bindingPhaseHandle struct {
	*clientHandle
	t       *testing.T
	binding atomic.Bool
}

func (h *bindingPhaseHandle) SnapshotSharedLister() fwk.SharedLister {
	if h.binding.Load() {
		h.t.Error("the scheduler's snapshot was read in the binding cycle")
	}
	return h.clientHandle.SnapshotSharedLister()
}

// TestPolicyAnnotationNotFromBindingCycle: the policy annotation Bind
// writes is the one of the scheduling cycle (computed at Reserve), and
// Bind never reads the scheduler's snapshot, which the next cycle may be
// rewriting (here it already did: n3 is now amd64, which would turn the
// web-arm rule's 1.00 into 0.00).
func TestPolicyAnnotationNotFromBindingCycle(t *testing.T) {
	nodes, _ := plugintest.PolicyCluster()
	var infos []fwk.NodeInfo
	for _, n := range nodes {
		infos = append(infos, nodeInfo(n))
	}
	client := newBindingClient()
	h := &bindingPhaseHandle{clientHandle: &clientHandle{fakeHandle: &fakeHandle{Lister: &fakeLister{Nodes: infos}}, cs: client}, t: t}
	p := newTestPlugin(t, h, sim.NewTargetWorkload(nil, 0.95))
	p.core.SetClock(func() time.Time { return time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) })
	if _, err := p.core.Policy().Install([]byte(plugintest.TestPolicy)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	web := plugintest.ServicePod("web-0", "web")
	if _, err := client.CoreV1().Pods(web.Namespace).Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs := framework.NewCycleState()
	if _, st := p.PreFilter(ctx, cs, web, nil); !st.IsSuccess() {
		t.Fatalf("PreFilter %v", st)
	}
	var feasible []fwk.NodeInfo
	for _, ni := range infos {
		if p.Filter(ctx, cs, web, ni).IsSuccess() {
			feasible = append(feasible, ni)
		}
	}
	if st := p.PreScore(ctx, cs, web, feasible); !st.IsSuccess() {
		t.Fatalf("PreScore %v", st)
	}
	if st := p.Reserve(ctx, cs, web, "n3"); !st.IsSuccess() {
		t.Fatalf("Reserve %v", st)
	}
	// the next cycle's snapshot update, in place (as the scheduler's
	// cache does: *existing = *clone)
	n3 := nodes[2].DeepCopy()
	n3.Labels[kubefmt.LabelArch] = sim.ArchAMD64.String()
	*infos[2].(*framework.NodeInfo) = *nodeInfo(n3)
	h.binding.Store(true)
	if st := p.Bind(ctx, cs, web, "n3"); !st.IsSuccess() {
		t.Fatalf("Bind %v", st)
	}
	got, err := client.CoreV1().Pods(web.Namespace).Get(ctx, web.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "web-arm: 1.00 (weight 50): prefer to run web on arm64 nodes (weight 50)\nno-zone-c: held: never run web in zone c"
	if a := got.Annotations[AnnotationPolicy]; a != want {
		t.Errorf("policy annotation:\n%s\nwant (the scheduling cycle's):\n%s", a, want)
	}
}
