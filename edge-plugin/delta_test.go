package edgeplugin

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/edge-plugin/serving"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
)

// TestSnapshotDeltaMatchesFresh drives one plugin through a random stream
// of the snapshot changes a scheduler sees between cycles (a binding, a
// pod gone, a telemetry annotation set or removed, a label or capacity
// change (a node's static spec), a node added or removed, a node no longer
// modellable, the list reordered, the clock moved past telemetry's
// staleness bound), scoring a random pod after each; after every cycle a
// new plugin (no kept view, no delta) scores the same pod on the same
// snapshot at the same time. Raw and normalised scores, every node's
// CPUUsed and the cycle's telemetry fallback counts must agree: the
// incremental path (only changed nodes re-bound, telemetry re-applied
// only to changed nodes until the earliest recheck) may not drift from a
// full conversion. Each change kind must have happened (else it tested
// nothing).
func TestSnapshotDeltaMatchesFresh(t *testing.T) {
	seed := uint64(27)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	tgt, err := LoadTarget(DefaultTargetWorkload, DefaultTargetThreshold)
	if err != nil {
		t.Fatal(err)
	}
	now := telT0
	clock := func() time.Time { return now }
	lister := &fakeLister{Nodes: randomSnapshot(rng, 30)}
	p := newTestPlugin(t, &fakeHandle{Lister: lister}, tgt)
	p.core.SetClock(clock)
	replace := func(i int, edit func(n *v1.Node)) {
		ni := lister.Nodes[i].(*framework.NodeInfo)
		n := ni.Node().DeepCopy()
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		edit(n)
		ni.SetNode(n)
	}
	added := 0
	changes := []struct {
		name  string
		apply func()
	}{
		{"bind", func() {
			i := rng.IntN(len(lister.Nodes))
			lister.Nodes[i].(*framework.NodeInfo).AddPod(k8sPod(sim.PodSpec{Name: fmt.Sprintf("b%d", rng.Uint32()), CPU: int64(1 + rng.IntN(800)), Memory: 64}))
		}},
		{"pod gone", func() {
			for range 10 {
				ni := lister.Nodes[rng.IntN(len(lister.Nodes))].(*framework.NodeInfo)
				if pods := ni.GetPods(); len(pods) > 0 {
					if err := ni.RemovePod(klog.Background(), pods[rng.IntN(len(pods))].GetPod()); err != nil {
						t.Fatal(err)
					}
					return
				}
			}
		}},
		{"telemetry", func() {
			s, err := kubefmt.EncodeTelemetry(kubefmt.TelemetrySummary{Time: now.Add(-time.Duration(rng.IntN(20)) * time.Second), Window: 10 * time.Second,
				CPU: rng.Float64(), Mem: 0.5, Load1: 1})
			if err != nil {
				t.Fatal(err)
			}
			replace(rng.IntN(len(lister.Nodes)), func(n *v1.Node) { n.Annotations[kubefmt.AnnotationTelemetry] = s })
		}},
		{"telemetry gone", func() {
			replace(rng.IntN(len(lister.Nodes)), func(n *v1.Node) { delete(n.Annotations, kubefmt.AnnotationTelemetry) })
		}},
		{"malformed telemetry", func() {
			replace(rng.IntN(len(lister.Nodes)), func(n *v1.Node) { n.Annotations[kubefmt.AnnotationTelemetry] = "{not json" })
		}},
		{"zone", func() {
			replace(rng.IntN(len(lister.Nodes)), func(n *v1.Node) { n.Labels[LabelZone] = fmt.Sprintf("z%d", rng.IntN(3)) })
		}},
		{"capacity", func() {
			replace(rng.IntN(len(lister.Nodes)), func(n *v1.Node) {
				n.Status.Allocatable[v1.ResourceCPU] = *resource.NewMilliQuantity(int64(8000+rng.IntN(120000)), resource.DecimalSI)
			})
		}},
		{"unmodellable", func() {
			replace(rng.IntN(len(lister.Nodes)), func(n *v1.Node) { delete(n.Status.Allocatable, v1.ResourceCPU) })
		}},
		{"node added", func() {
			added++
			spec := sim.NodeSpec{Name: fmt.Sprintf("add%03d", added), CPU: int64(4000 + rng.IntN(60000)), Memory: 65536, Arch: sim.ArchAMD64}
			lister.Nodes = append(slices.Clone(lister.Nodes), nodeInfo(k8sNode(spec)))
		}},
		{"node removed", func() {
			if len(lister.Nodes) > 10 {
				i := rng.IntN(len(lister.Nodes))
				lister.Nodes = slices.Delete(slices.Clone(lister.Nodes), i, min(len(lister.Nodes), i+1+rng.IntN(3)))
				if len(lister.Nodes) < 10 {
					lister.Nodes = append(lister.Nodes, nodeInfo(k8sNode(sim.NodeSpec{Name: fmt.Sprintf("re%03d", rng.IntN(1000)), CPU: 8000, Memory: 8192, Arch: sim.ArchAMD64})))
				}
			}
		}},
		{"reordered", func() {
			l := slices.Clone(lister.Nodes)
			rng.Shuffle(len(l), func(i, j int) { l[i], l[j] = l[j], l[i] })
			lister.Nodes = l
		}},
		{"time", func() {
			now = now.Add(time.Duration(rng.IntN(int(2 * DefaultTelemetryMaxAge))))
		}},
	}
	done := make([]int, len(changes))
	for step := range 300 {
		c := rng.IntN(len(changes))
		for range 1 + rng.IntN(3) {
			changes[c].apply()
		}
		done[c]++
		ps := sim.PodSpec{Name: fmt.Sprintf("s%d", step), CPU: int64(250 * (1 + rng.IntN(4))), Memory: 512}
		if rng.IntN(3) == 0 {
			ps.GPUs, ps.GPUMilli = 1, int64(250*(1+rng.IntN(3)))
		}
		pod := k8sPod(ps)
		f0 := telemetryFallbacks(t)
		got, cs := runCycle(t, p, pod, lister.Nodes)
		f1 := telemetryFallbacks(t)
		q := newTestPlugin(t, &fakeHandle{Lister: lister}, tgt)
		q.core.SetClock(clock)
		want, qcs := runCycle(t, q, pod, lister.Nodes)
		f2 := telemetryFallbacks(t)
		what := fmt.Sprintf("step %d after %q", step, changes[c].name)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: normalised scores %v, fresh %v", what, got, want)
		}
		if len(got) > 0 {
			gotNames, gotRaw, _ := scoredCandidates(t, p, cs)
			wantNames, wantRaw, _ := scoredCandidates(t, q, qcs)
			if fmt.Sprint(gotNames) != fmt.Sprint(wantNames) || fmt.Sprint(gotRaw) != fmt.Sprint(wantRaw) {
				t.Fatalf("%s: raw scores\n%v %v\nfresh\n%v %v", what, gotNames, gotRaw, wantNames, wantRaw)
			}
		}
		// CPUUsed is a running sum (a pod gone is subtracted), so it may
		// differ from a fresh sum in the last bits, never more
		g, w := cpuUsedByName(p), cpuUsedByName(q)
		if len(g) != len(w) {
			t.Fatalf("%s: %d nodes in the view, fresh %d", what, len(g), len(w))
		}
		for name, u := range w {
			if d := math.Abs(g[name] - u); d > 1e-9*max(1, math.Abs(u)) {
				t.Fatalf("%s: node %s CPUUsed %v, fresh %v", what, name, g[name], u)
			}
		}
		for r := range f0 {
			if g, w := f1[r]-f0[r], f2[r]-f1[r]; g != w {
				t.Fatalf("%s: %v telemetry fallbacks %q counted, fresh %v", what, g, telReasons[r], w)
			}
		}
	}
	for i, n := range done {
		if n == 0 {
			t.Errorf("change %q never happened", changes[i].name)
		}
	}
	t.Logf("changes applied: %v", done)
}

// telemetryFallbacks reads the fallback counter by telReasons index.
func telemetryFallbacks(t *testing.T) []float64 {
	t.Helper()
	out := make([]float64, len(telReasons))
	for i, r := range telReasons {
		v, err := plugintest.CounterValue("edgesched_plugin_telemetry_fallbacks_total", map[string]string{"reason": r})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = v
	}
	return out
}

// cpuUsedByName is the kept view's CPUUsed per node name (the usage
// model's or the measured value; NaN as -1).
func cpuUsedByName(p *EdgePolicy) map[string]float64 {
	out := map[string]float64{}
	p.core.WithLatest(func(v *serving.View) error {
		for i := range v.State().Nodes {
			u := v.State().Nodes[i].CPUUsed
			if math.IsNaN(u) {
				u = -1
			}
			out[v.Env().Nodes[i].Name] = u
		}
		return nil
	})
	return out
}

// telReasons are the telemetry fallback reasons by state (missing, fresh,
// stale, malformed: telemetry_fallbacks_total's label values; fresh is
// never counted).
var telReasons = []string{"missing", "", "stale", "malformed"}

var _ fwk.NodeInfo = (*framework.NodeInfo)(nil)

// TestScanPeriod checks the view's node checks with a scan period
// (nodeScanEvery in the scheduler): a cycle reads the generation of its
// candidates and of marked nodes only; a change elsewhere reaches the view
// once the period has passed, or at once when a quarter of the nodes or
// more are candidates; Reserve marks its node. At the end the view equals
// a fresh one.
func TestScanPeriod(t *testing.T) {
	tgt, err := LoadTarget(DefaultTargetWorkload, DefaultTargetThreshold)
	if err != nil {
		t.Fatal(err)
	}
	now := telT0
	lister := &fakeLister{Nodes: randomSnapshot(rand.New(rand.NewPCG(31, 2)), 60)}
	p := newTestPlugin(t, &fakeHandle{Lister: lister}, tgt)
	p.core.SetClock(func() time.Time { return now })
	p.core.SetScanEvery(100 * time.Millisecond)
	all := lister.Nodes
	cands := all[:10] // a sixth of the nodes
	name := func(i int) string { return all[i].Node().Name }
	bind := func(i int) {
		all[i].(*framework.NodeInfo).AddPod(k8sPod(sim.PodSpec{Name: fmt.Sprintf("bound-%d-%d", i, now.UnixNano()), CPU: 300, Memory: 64}))
	}
	cycle := func(cands []fwk.NodeInfo) map[string]float64 {
		t.Helper()
		if err := p.core.WithView(all, cands, func(*serving.View) error { return nil }); err != nil {
			t.Fatal(err)
		}
		return cpuUsedByName(p)
	}
	before := cycle(nil)
	steps := []struct {
		name   string
		change func()
		node   int
		seen   bool
		cands  []fwk.NodeInfo // nil: cands
	}{
		// 20 is not a candidate and nothing marked it: not read yet
		{"non-candidate", func() { bind(20) }, 20, false, nil},
		{"candidate", func() { bind(3) }, 3, true, nil},
		// marked (as Reserve and Unreserve do): read at the next cycle,
		// with the change of the first step
		{"marked", func() { p.core.Mark(name(20)) }, 20, true, nil},
		{"period passed", func() { bind(25); now = now.Add(100 * time.Millisecond) }, 25, true, nil},
		{"within the new period", func() { bind(26); now = now.Add(99 * time.Millisecond) }, 26, false, nil},
		// a quarter of the nodes as candidates: the pass over every node
		// (the change of the step before, not yet read, included)
		{"a quarter as candidates", func() { bind(40) }, 40, true, all[:15]},
	}
	for _, s := range steps {
		s.change()
		c := cands
		if s.cands != nil {
			c = s.cands
		}
		after := cycle(c)
		if seen := after[name(s.node)] != before[name(s.node)]; seen != s.seen {
			t.Errorf("%s: node %s's change seen %v, want %v (CPU used %v then %v)", s.name, name(s.node), seen, s.seen, before[name(s.node)], after[name(s.node)])
		}
		before = after
	}

	// Reserve marks the node it reserved on: the scheduler assumes the pod
	// there, and the node need not be a candidate of the next cycle.
	pod := k8sPod(sim.PodSpec{Name: "reserved", CPU: 250, Memory: 64})
	best, _, _ := explainedCycle(t, p, pod, all)
	i := slices.IndexFunc(all, func(ni fwk.NodeInfo) bool { return ni.Node().Name == best })
	before = cpuUsedByName(p)
	all[i].(*framework.NodeInfo).AddPod(pod)
	others := slices.DeleteFunc(slices.Clone(all), func(ni fwk.NodeInfo) bool { return ni.Node().Name == best })[:5]
	if after := cycle(others); after[best] == before[best] {
		t.Errorf("the reserved node %s's new pod is not in the view (CPU used %v)", best, after[best])
	}

	// marks without a cycle that scores stay bounded: past one per node
	// the next cycle reads every node instead
	for range 3 * len(all) {
		p.core.Mark(name(0))
	}
	if n, limit := p.core.Diagnostics().Marked, len(all); n > limit {
		t.Errorf("%d marks kept for %d nodes", n, limit)
	}
	if !p.core.Diagnostics().LastScan.IsZero() {
		t.Error("too many marks did not make the next cycle read every node")
	}

	// once every node has been read again, the view is a fresh one's
	now = now.Add(time.Second)
	got := cycle(cands)
	q := newTestPlugin(t, &fakeHandle{Lister: lister}, tgt)
	q.core.SetClock(p.core.Now)
	if err := q.core.WithView(all, nil, func(*serving.View) error { return nil }); err != nil {
		t.Fatal(err)
	}
	want := cpuUsedByName(q)
	for n, u := range want {
		if math.Abs(got[n]-u) > 1e-9*max(1, math.Abs(u)) {
			t.Errorf("node %s: CPU used %v, fresh %v", n, got[n], u)
		}
	}
}
