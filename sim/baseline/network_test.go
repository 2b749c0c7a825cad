package baseline

import (
	"testing"

	"github.com/edgesched/edgesched/sim"
)

// depFixture: zones a, b, c (RTT 0.5 ms inside a zone, 30 ms between b
// and c, 10 ms between a and the others); nodes n0 (a), n1 (b), n2 (c),
// n3 (b, half the size). Service web calls api at 10/s and api calls db
// at 4/s. Two api replicas run on n0 (zone a), one on n1 (zone b); db
// runs once on n2 (zone c).
func depFixture(t *testing.T) (*sim.State, map[string]int) {
	t.Helper()
	c := &sim.Cluster{
		Name:  "deps",
		Zones: []sim.Zone{{Name: "a"}, {Name: "b"}, {Name: "c"}},
		Network: &sim.Network{IntraZoneMs: 0.5, InterZoneMs: 30,
			Pairs: []sim.ZonePair{{A: "a", B: "b", Ms: 10}, {A: "a", B: "c", Ms: 10}}},
		Nodes: []sim.NodeSpec{
			{Name: "n0", CPU: 16000, Memory: 32768, Arch: sim.ArchAMD64, Zone: "a"},
			{Name: "n1", CPU: 16000, Memory: 32768, Arch: sim.ArchAMD64, Zone: "b"},
			{Name: "n2", CPU: 16000, Memory: 32768, Arch: sim.ArchAMD64, Zone: "c"},
			{Name: "n3", CPU: 8000, Memory: 16384, Arch: sim.ArchAMD64, Zone: "b"},
		},
	}
	w := &sim.Workload{
		Services:     []string{"web", "api", "db"},
		Dependencies: []sim.Dependency{{From: "web", To: "api", CallsPerSecond: 10}, {From: "api", To: "db", CallsPerSecond: 4}},
		Pods:         []sim.PodSpec{{Name: "w", CPU: 1000, Memory: 1024, Delete: sim.NoDeletion, Service: "web"}},
	}
	env, err := sim.NewEnv(c, w, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := sim.NewState(env)
	svc := map[string]int{}
	for _, s := range w.Services {
		i, _ := env.ServiceIndex(s)
		svc[s] = i
	}
	for _, b := range []struct {
		service string
		node    int
	}{{"api", 0}, {"api", 0}, {"api", 1}, {"db", 2}} {
		id, err := st.AddPod(sim.Pod{CPU: 2000, Mem: 2048, Service: int32(svc[b.service])})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Bind(id, b.node, nil); err != nil {
			t.Fatal(err)
		}
	}
	return st, svc
}

func TestNetworkOverhead(t *testing.T) {
	st, svc := depFixture(t)
	pol, err := Lookup(NetworkOverhead)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := pol.New(st.Env)
	nodes := []int32{0, 1, 2, 3}
	got := make([]float64, len(nodes))

	// A web pod depends on api (2 replicas in a, 1 in b). Accumulated cost:
	// n0 (a): 2x1 + 1x10 = 12; n1, n3 (b): 2x10 + 1 = 21; n2 (c): 2x10 +
	// 1x30 = 50. Normalised (lowest 100, highest 0): n0 100, the b nodes
	// 100x(50-21)/38 = 76.3 -> floor 76, n2 0; times 5. Plus
	// BalancedAllocation, int((1 - |f_cpu - f_mem|/2) x 100) with the pod
	// (1000m, 1024 MiB) added: n0 holds 4000m/4096 MiB of 16000m/32768 MiB
	// (|0.3125-0.15625|/2 -> 92), n1 and n2 2000m/2048 MiB (|0.1875-
	// 0.09375|/2 -> 95), n3 nothing of 8000m/16384 MiB (|0.125-0.0625|/2
	// -> 96).
	p.Score(st, &sim.Pod{CPU: 1000, Mem: 1024, Service: int32(svc["web"])}, nodes, got)
	expectScores(t, got, []float64{5*100 + 92, 5*76 + 95, 0 + 95, 5*76 + 96})

	// A db pod has no dependencies: NetworkOverhead scores every node 0
	// and BalancedAllocation alone decides.
	p.Score(st, &sim.Pod{CPU: 1000, Mem: 1024, Service: int32(svc["db"])}, nodes, got)
	expectScores(t, got, []float64{92, 95, 95, 96})
}

func TestDepLoad(t *testing.T) {
	st, svc := depFixture(t)
	p := NewDepLoad(st.Env, 0)
	nodes := []int32{0, 1, 2, 3}
	got := make([]float64, len(nodes))
	tlp := make([]float64, len(nodes))
	pod := sim.Pod{CPU: 1000, Mem: 1024, Service: int32(svc["api"])}
	targetLoadPacking{args: DefaultTLPArgs()}.Score(st, &pod, nodes, tlp)

	// An api pod is called by web (no replica runs: no gain) and calls db
	// (4/s, its one replica in zone c): the call rate kept in the zone is
	// 4 on n2 and 0 elsewhere, normalised to 100 on n2 and 0 elsewhere,
	// times DepLoadWeight, on top of TargetLoadPacking's score.
	p.Score(st, &pod, nodes, got)
	want := []float64{tlp[0], tlp[1], tlp[2] + DepLoadWeight*100, tlp[3]}
	expectScores(t, got, want)

	// A web pod calls api at 10/s: 2 of its 3 replicas are in a (6.67/s
	// local), 1 in b (3.33/s). Normalised: a 100, b 50, c 0.
	pod.Service = int32(svc["web"])
	targetLoadPacking{args: DefaultTLPArgs()}.Score(st, &pod, nodes, tlp)
	p.Score(st, &pod, nodes, got)
	expectScores(t, got, []float64{tlp[0] + DepLoadWeight*100, tlp[1] + DepLoadWeight*50, tlp[2], tlp[3] + DepLoadWeight*50})
}
