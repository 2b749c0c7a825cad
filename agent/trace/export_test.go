package trace

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgesched/edgesched/agent/trace/tracefmt"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/scenario"
)

// exportFixture records a small site: two identical CPU nodes in zone-a
// and a GPU node (model L4, which the simulator does not know) in zone-b;
// a web pod that ran 90 s on n1, two db pods, a web pod with its own
// usage annotation, a GPU pod; n1's telemetry; call rates web -> db.
func exportFixture(t *testing.T) *Store {
	t.Helper()
	s := openTest(t, filepath.Join(t.TempDir(), "trace.db"), 24*time.Hour, 1000, func() time.Time { return t0.Add(10 * time.Minute) })
	t.Cleanup(func() { s.Close() })
	node := func(name, zone string, gpus int32, model string) tracefmt.Event {
		return tracefmt.Event{Kind: tracefmt.NodeInfo, Time: t0, Node: &tracefmt.Node{Name: name, CPUMilli: 4000, MemoryMiB: 8192, GPUs: gpus, GPUModel: model, Zone: zone, Arch: sim.ArchAMD64}}
	}
	pod := func(uid, name, svc string, at time.Duration, mod func(*tracefmt.Pod)) tracefmt.Event {
		p := &tracefmt.Pod{UID: uid, Namespace: "shop", Name: name, Service: svc, CPUMilli: 1000, MemoryMiB: 512, QoS: sim.QoSBurstable}
		if mod != nil {
			mod(p)
		}
		return tracefmt.Event{Kind: tracefmt.PodArrival, Time: t0.Add(at), Pod: p}
	}
	ref := func(name string) tracefmt.PodRef { return tracefmt.PodRef{Namespace: "shop", Name: name} }
	evs := []tracefmt.Event{
		node("n1", "zone-a", 0, ""), node("n2", "zone-a", 0, ""), node("g1", "zone-b", 2, "L4"),
		pod("u-web1", "web-1", "web", 0, nil),
		{Kind: tracefmt.PodBinding, Time: t0.Add(time.Second), Pod: &tracefmt.Pod{UID: "u-web1", Namespace: "shop", Name: "web-1", Node: "n1"}},
		pod("u-db0", "db-0", "db", 30*time.Second, func(p *tracefmt.Pod) { p.QoS = sim.QoSLS; p.Priority = 100 }),
		pod("u-db1", "db-1", "db", 40*time.Second, nil),
		pod("u-web2", "web-2", "web", 50*time.Second, func(p *tracefmt.Pod) { p.CPUUsage = 0.4 }),
		pod("u-gpu", "infer-0", "", 55*time.Second, func(p *tracefmt.Pod) { p.GPUs, p.GPUMilli, p.GPUModels = 1, 500, []string{"L4"} }),
		{Kind: tracefmt.NodeUsage, Time: t0.Add(10 * time.Second), Usage: &tracefmt.Usage{Node: "n1", CPU: 0.25, Mem: 0.3, CPUMilli: 4000, RequestedCPUMilli: 2000}},
		{Kind: tracefmt.NodeUsage, Time: t0.Add(60 * time.Second), Usage: &tracefmt.Usage{Node: "n1", CPU: 0.5, Mem: 0.3, CPUMilli: 4000, RequestedCPUMilli: 2000}},
		{Kind: tracefmt.EdgeRate, Time: t0.Add(20 * time.Second), Edge: &tracefmt.Edge{Src: ref("web-1"), Dst: ref("db-0"), CallsPerSecond: 10, Reporter: "n1"}},
		{Kind: tracefmt.EdgeRate, Time: t0.Add(80 * time.Second), Edge: &tracefmt.Edge{Src: ref("web-1"), Dst: ref("db-0"), CallsPerSecond: 20, Reporter: "n1"}},
		{Kind: tracefmt.EdgeRate, Time: t0.Add(80 * time.Second), Edge: &tracefmt.Edge{Src: ref("web-2"), Dst: ref("db-1"), CallsPerSecond: 5, Reporter: "n2"}},
		{Kind: tracefmt.PodDeletion, Time: t0.Add(90 * time.Second), Pod: &tracefmt.Pod{UID: "u-web1", Namespace: "shop", Name: "web-1"}},
	}
	if _, err := s.Append(evs...); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestExportRoundTrip exports the fixture, loads the file with
// sim/scenario and finds the recorded pods, nodes and dependencies.
func TestExportRoundTrip(t *testing.T) {
	s := exportFixture(t)
	out, st, err := s.Export(ExportOptions{Name: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := scenario.Parse(out, "shop.yaml", "")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if st.Pods != 5 || st.Nodes != 3 || st.Services != 2 || st.Dependencies != 1 || st.Measured != 2 {
		t.Fatalf("stats %+v, want 5 pods, 3 nodes, 2 services, 1 dependency, 2 measured", st)
	}
	if len(l.Cluster.Nodes) != 3 || len(l.Cluster.Zones) != 2 {
		t.Fatalf("cluster: %d nodes in %d zones, want 3 in 2", len(l.Cluster.Nodes), len(l.Cluster.Zones))
	}
	gpuNodes := 0
	for _, n := range l.Cluster.Nodes {
		if n.GPUs == 2 && n.GPUModel == "L4" && n.Zone == "zone-b" {
			gpuNodes++
		}
	}
	if gpuNodes != 1 {
		t.Fatalf("the L4 node is missing: %+v", l.Cluster.Nodes)
	}
	want := map[string]sim.PodSpec{
		// web-1 ran from 0 s to 90 s on n1; usage: n1's samples at 10 s
		// (0.25 x 4000 / 2000 = 0.5) and 60 s (0.5 x 4000 / 2000 = 1.0)
		// average 0.75
		"shop/web-1": {CPU: 1000, Memory: 512, Create: 0, Delete: 90, Service: "web", CPUUsage: 0.75},
		"shop/db-0":  {CPU: 1000, Memory: 512, Create: 30, Delete: sim.NoDeletion, Service: "db", QoS: sim.QoSLS, Priority: 100},
		"shop/db-1":  {CPU: 1000, Memory: 512, Create: 40, Delete: sim.NoDeletion, Service: "db"},
		// its own annotation; never bound, so no node samples either way
		"shop/web-2":   {CPU: 1000, Memory: 512, Create: 50, Delete: sim.NoDeletion, Service: "web", CPUUsage: 0.4},
		"shop/infer-0": {CPU: 1000, Memory: 512, Create: 55, Delete: sim.NoDeletion, GPUs: 1, GPUMilli: 500, GPUSpec: []string{"L4"}},
	}
	if len(l.Workload.Pods) != len(want) {
		t.Fatalf("%d pods, want %d", len(l.Workload.Pods), len(want))
	}
	for _, p := range l.Workload.Pods {
		w, ok := want[p.Name]
		if !ok {
			t.Fatalf("unexpected pod %s", p.Name)
		}
		if p.CPU != w.CPU || p.Memory != w.Memory || p.Create != w.Create || p.Delete != w.Delete || p.Service != w.Service ||
			p.CPUUsage != w.CPUUsage || p.QoS != w.QoS || p.Priority != w.Priority || p.GPUs != w.GPUs || p.GPUMilli != w.GPUMilli || len(p.GPUSpec) != len(w.GPUSpec) {
			t.Errorf("pod %s:\n got %+v\nwant %+v", p.Name, p, w)
		}
	}
	// web -> db: web-1 -> db-0 averages (10 + 20) / 2 = 15/s, web-2 ->
	// db-1 5/s: 20/s in all
	if d := l.Workload.Dependencies; len(d) != 1 || d[0].From != "web" || d[0].To != "db" || d[0].CallsPerSecond != 20 {
		t.Fatalf("dependencies %+v, want web->db 20/s", d)
	}
	if _, err := sim.NewEnv(l.Cluster, l.Workload, sim.EnvOptions{}); err != nil {
		t.Fatalf("the simulator refuses the export: %v", err)
	}
}

// TestExportWindow: with Since at 60 s, web-1 (deleted at 90 s) starts at
// 0 and leaves at 30; the pods created before 60 s start at 0; the rate
// sample at 20 s is outside the window (web->db: 20 + 5 = 25/s).
func TestExportWindow(t *testing.T) {
	s := exportFixture(t)
	out, st, err := s.Export(ExportOptions{Since: t0.Add(60 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := scenario.Parse(out, "w.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]sim.PodSpec{}
	for _, p := range l.Workload.Pods {
		got[p.Name] = p
	}
	if w := got["shop/web-1"]; w.Create != 0 || w.Delete != 30 || len(got) != 5 || !st.Start.Equal(t0.Add(60*time.Second)) {
		t.Fatalf("window: web-1 %+v, %d pods, start %v", w, len(got), st.Start)
	}
	if d := l.Workload.Dependencies; len(d) != 1 || d[0].CallsPerSecond != 25 {
		t.Fatalf("dependencies %+v, want web->db 25/s", d)
	}
	// a window that ends before the first pod arrived: nothing to export
	if _, _, err := s.Export(ExportOptions{Until: t0.Add(-time.Hour)}); !errors.Is(err, ErrEmpty) {
		t.Fatalf("a window before any pod: %v, want ErrEmpty", err)
	}
}

func TestExportEmpty(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "trace.db"), time.Hour, 10, nil)
	defer s.Close()
	if _, _, err := s.Export(ExportOptions{}); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty store: %v, want ErrEmpty", err)
	}
}
