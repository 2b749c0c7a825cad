package serving

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/edge-plugin/sources"
	"github.com/edgesched/edgesched/internal/testutil/kubefixture"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
)

// TestConvertReadsAsRecorder: the plugin converts the shared fixture's
// node and pods with kubefmt.SimNode and SimPod, the conversion the
// agent's trace recorder records with (agent/trace's
// TestRecordReadsAsPlugin checks the recorder's side on the same
// fixture), failure rate included; the malformed pod is skipped.
func TestConvertReadsAsRecorder(t *testing.T) {
	n, pods := kubefixture.Node(), kubefixture.Pods()
	e := convertNode(nodeInfo(n, pods...), &reservations{}, nil)
	want, ok := kubefmt.SimNode(n)
	if !ok || !e.ok || e.spec.Name != want.Name || e.spec.CPU != want.CPU || e.spec.Memory != want.Memory || e.spec.GPUs != want.GPUs ||
		e.spec.GPUModel != want.GPUModel || e.spec.Zone != want.Zone || e.spec.Arch != want.Arch || e.spec.FailureRate != want.FailureRate {
		t.Fatalf("node %+v, kubefmt reads %+v", e.spec, want)
	}
	if e.spec.FailureRate != 0.25 {
		t.Fatalf("failure rate %v, want the annotation's 0.25", e.spec.FailureRate)
	}
	left := slices.Clone(e.pods)
	for _, p := range pods {
		sp, _, err := kubefmt.SimPod(p)
		if p.Name == kubefixture.Malformed {
			if err == nil {
				t.Fatalf("pod %s converts without an error", p.Name)
			}
			continue
		}
		i := slices.IndexFunc(left, func(c convPod) bool { return c.pod == sp && c.service == kubefmt.ServiceOf(p) })
		if i < 0 {
			t.Fatalf("pod %s: kubefmt reads %+v, not among the plugin's %+v", p.Name, sp, left)
		}
		left = slices.Delete(left, i, i+1)
	}
	if len(left) != 0 || e.skipped != 1 {
		t.Fatalf("%d pods left over, %d skipped (want 0 and the malformed one)", len(left), e.skipped)
	}
	// podModels, which masks GPU models for the pod being scheduled,
	// reads the accepted models as the recorder does
	for _, p := range pods {
		if _, models, err := kubefmt.SimPod(p); err == nil && !slices.Equal(podModels(p), models) {
			t.Fatalf("pod %s: models %q, kubefmt reads %q", p.Name, podModels(p), models)
		}
	}
}

// TestReservationsSweep checks that expired reservations are dropped by a
// sweep at most once per reservationSweep, and that a clock gone back
// does not stop the sweeps.
func TestReservationsSweep(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	r := &reservations{}
	kept := func(uid string) bool { _, ok := r.get(types.UID(uid), "n"); return ok }
	r.put("a", "n", []int{0}, t0) // the first put sweeps (nothing to drop)
	r.put("b", "n", []int{1}, t0.Add(30*time.Second))
	// a is past its TTL at t0+10m+1s, but the last sweep was at t0+10m
	r.put("c", "n", []int{2}, t0.Add(reservationTTL))
	r.put("d", "n", []int{3}, t0.Add(reservationTTL+time.Second))
	if !kept("a") {
		t.Fatal("a dropped before the next sweep is due")
	}
	// a minute after the last sweep: a and b (10m30s old) are dropped
	r.put("e", "n", []int{4}, t0.Add(reservationTTL+reservationSweep+time.Second))
	for uid, want := range map[string]bool{"a": false, "b": false, "c": true, "d": true, "e": true} {
		if kept(uid) != want {
			t.Errorf("reservation %s kept %v, want %v", uid, kept(uid), want)
		}
	}
	// the clock goes back an hour: the next put sweeps, dropping nothing
	// that is not expired by the new clock
	r.put("f", "n", []int{5}, t0.Add(-time.Hour))
	if got := r.nextSweep.Load(); got != t0.Add(-time.Hour+reservationSweep).UnixNano() {
		t.Errorf("after the clock went back the next sweep is at %v, want %v", time.Unix(0, got).UTC(), t0.Add(-time.Hour+reservationSweep))
	}
}

// TestConvertKeepsNodeReads: a conversion after a bind (the generation
// moves, the Node object does not) keeps the last conversion's node spec
// and decoded telemetry; a new Node object is read anew.
func TestConvertKeepsNodeReads(t *testing.T) {
	n := kubefixture.Node()
	tel := func(cpu float64) string {
		s, err := kubefmt.EncodeTelemetry(kubefmt.TelemetrySummary{Time: telT0, Window: 10 * time.Second, CPU: cpu, Mem: 0.5, Load1: 1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	n.Annotations[kubefmt.AnnotationTelemetry] = tel(0.4)
	ni := nodeInfo(n)
	c := newConverter(nil)
	e1 := c.node(ni)
	if e1.tel == nil || e1.tel.CPU != 0.4 {
		t.Fatalf("telemetry %+v, want CPU 0.4", e1.tel)
	}
	ni.AddPod(k8sPod(sim.PodSpec{Name: "bound", CPU: 100, Memory: 64}))
	e2 := c.node(ni)
	if e2 == e1 || len(e2.pods) != len(e1.pods)+1 {
		t.Fatalf("after a bind: %d pods (was %d), entry reused %v", len(e2.pods), len(e1.pods), e2 == e1)
	}
	if e2.tel != e1.tel || e2.spec.Name != e1.spec.Name || e2.sig != e1.sig {
		t.Fatal("after a bind the same Node object's telemetry was decoded again")
	}
	n2 := n.DeepCopy()
	n2.Annotations[kubefmt.AnnotationTelemetry] = tel(0.9)
	ni.SetNode(n2)
	e3 := c.node(ni)
	if e3.tel == nil || e3.tel.CPU != 0.9 || len(e3.pods) != len(e2.pods) {
		t.Fatalf("a new Node object: telemetry %+v, %d pods; want CPU 0.9 and %d pods", e3.tel, len(e3.pods), len(e2.pods))
	}
}

// TestConvertPinnedArch: a pod's kubernetes.io/arch node selector makes it
// need that architecture (the arch features read it); one bound against
// its selector by hand (spec.nodeName) counts as running anywhere, so the
// view can still bind it to the node it runs on.
func TestConvertPinnedArch(t *testing.T) {
	n := kubefixture.Node() // arm64
	web := kubefixture.Pods()[3]
	pinned, against := web.DeepCopy(), web.DeepCopy()
	pinned.Name, pinned.UID = "web-arm", "uid-web-arm"
	pinned.Spec.NodeSelector = map[string]string{kubefmt.LabelArch: "arm64"}
	against.Name, against.UID = "web-amd", "uid-web-amd"
	against.Spec.NodeSelector = map[string]string{kubefmt.LabelArch: "amd64"}
	e := convertNode(nodeInfo(n, web, pinned, against), &reservations{}, nil)
	if len(e.pods) != 3 || e.skipped != 0 {
		t.Fatalf("%d pods converted, %d skipped; want 3, 0", len(e.pods), e.skipped)
	}
	want := []sim.Arch{sim.ArchAny, sim.ArchARM64, sim.ArchAny}
	env, err := sim.NewEnv(&sim.Cluster{Name: "c", Zones: []sim.Zone{{Name: e.spec.Zone}}, Nodes: []sim.NodeSpec{e.spec}}, &sim.Workload{Name: "w"}, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := sim.NewState(env)
	for i, cp := range e.pods {
		if cp.pod.Arch != want[i] {
			t.Errorf("pod %d: arch %v, want %v", i, cp.pod.Arch, want[i])
		}
		id, err := st.AddPod(cp.pod)
		if err == nil {
			err = st.Bind(id, 0, nil)
		}
		if err != nil {
			t.Errorf("pod %d: %v", i, err)
		}
	}
	if got := st.ArchPinned[sim.ArchARM64]; got != 250 {
		t.Errorf("CPU pinned to arm64 %d, want the one pinned pod's 250", got)
	}
}

// TestConverterForgetsDeletedNodes: the converter's per-name cache of
// conversions (each holding the Node object and its pods) keeps the nodes
// of the snapshot, not every node the process ever saw: a fleet whose
// nodes come and go under new names must not grow it without bound.
func TestConverterForgetsDeletedNodes(t *testing.T) {
	c := newConverter(sim.NewTargetWorkload(nil, 0.95))
	c.deps, c.topo = &sources.Dependencies{}, &sources.Topology{}
	const perRound, rounds = 10, 40
	for r := range rounds {
		var all []fwk.NodeInfo
		for i := range perRound {
			all = append(all, nodeInfo(plugintest.K8sNode(sim.NodeSpec{Name: fmt.Sprintf("edge-%03d-%d", r, i), CPU: 4000, Memory: 4096, Arch: sim.ArchAMD64})))
		}
		for _, ni := range all { // Filter's lookups
			c.node(ni)
		}
		if err := c.withView(all, all, func(*view) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	kept := 0
	c.nodes.Range(func(_, _ any) bool { kept++; return true })
	if limit := 2*perRound + 64; kept > limit {
		t.Fatalf("%d conversions kept for a snapshot of %d nodes (%d seen in all), want at most %d", kept, perRound, perRound*rounds, limit)
	}
	// the current snapshot's nodes are still cached
	for i := range perRound {
		if _, ok := c.nodes.Load(fmt.Sprintf("edge-%03d-%d", rounds-1, i)); !ok {
			t.Fatalf("node %d of the current snapshot forgotten", i)
		}
	}
}

// TestConvertNodePower: a node's power annotations reach the compiled
// environment the features read (the emission feature, sim.RequestWatts)
// and the policy language's view (nodeWatts), and a changed annotation
// recompiles it. The arm64 board: 1.5 W per core and an Orin at 25 W
// (its board power without the annotation would be sim.DefaultGPUWatts,
// 250 W, an unknown model); the amd64 server keeps the defaults.
func TestConvertNodePower(t *testing.T) {
	board := sim.NodeSpec{Name: "board", CPU: 4000, Memory: 4096, Arch: sim.ArchARM64, GPUs: 1, GPUModel: "Orin",
		Power: &sim.PowerModel{WattsPerCore: 1.5, WattsPerGPU: 25}}
	server := sim.NodeSpec{Name: "server", CPU: 8000, Memory: 8192, Arch: sim.ArchAMD64}
	c := newConverter(sim.NewTargetWorkload(nil, 0.95))
	c.deps, c.topo = &sources.Dependencies{}, &sources.Topology{}
	watts := func(all []fwk.NodeInfo) (got [2][2]float64) {
		t.Helper()
		for _, ni := range all {
			c.node(ni)
		}
		if err := c.withView(all, all, func(v *view) error {
			for i, name := range []string{"board", "server"} {
				nd := v.env.Nodes[v.index[name]]
				got[i] = [2]float64{nd.WattsPerCore, nd.WattsPerGPU}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	all := []fwk.NodeInfo{nodeInfo(plugintest.K8sNode(board)), nodeInfo(plugintest.K8sNode(server))}
	if got, want := watts(all), [2][2]float64{{1.5, 25}, {8, 0}}; got != want {
		t.Fatalf("compiled watts per core and per GPU %v, want %v", got, want)
	}
	for i, want := range [][2]float64{{1.5, 25}, {8, 0}} {
		if pc, pg := nodeWatts(func() sim.NodeSpec { s, _ := kubefmt.SimNode(all[i].Node()); return s }()); pc != want[0] || pg != want[1] {
			t.Errorf("node %d: the policy view's watts %v, %v, want %v", i, pc, pg, want)
		}
	}
	n := all[0].Node().DeepCopy()
	n.Annotations[kubefmt.AnnotationWattsPerCore] = "2.5"
	all[0].SetNode(n)
	if got, want := watts(all), [2][2]float64{{2.5, 25}, {8, 0}}; got != want {
		t.Fatalf("after the annotation changed: %v, want %v", got, want)
	}
	// without annotations: the architecture's cores and the GPU model's
	// typical board power (sim.GPUWatts: an Orin's 25 W, which the
	// simulator's edge families declare too; it was DefaultGPUWatts, 250,
	// a model outside the openb list compiled without a figure)
	n = all[0].Node().DeepCopy()
	n.Annotations = nil
	all[0].SetNode(n)
	if got, want := watts(all), [2][2]float64{{2, 25}, {8, 0}}; got != want {
		t.Fatalf("without power annotations: %v, want %v", got, want)
	}
	if pc, pg := nodeWatts(func() sim.NodeSpec { s, _ := kubefmt.SimNode(n); return s }()); pc != 2 || pg != 25 {
		t.Errorf("without power annotations, the policy view's watts %v, %v, want 2, 25", pc, pg)
	}
}
