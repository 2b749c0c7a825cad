package sage

import (
	"math"
	"testing"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
)

// TestAffinityLoad: web calls api, api calls db; only db runs (zone c).
// dep-load sees nothing for a web pod (its one neighbour, api, has no
// replica); sage-load adds its weight times 100 on zone c's node, where
// web's two-hop neighbour runs, and 0 elsewhere (the affinity normalised
// over the candidates). For a db pod, whose neighbour api is not placed
// and whose two-hop neighbour web neither, it adds nothing.
func TestAffinityLoad(t *testing.T) {
	c := &sim.Cluster{
		Name:  "deps",
		Zones: []sim.Zone{{Name: "a"}, {Name: "b"}, {Name: "c"}},
		Nodes: []sim.NodeSpec{
			{Name: "n0", CPU: 16000, Memory: 32768, Arch: sim.ArchAMD64, Zone: "a"},
			{Name: "n1", CPU: 16000, Memory: 32768, Arch: sim.ArchAMD64, Zone: "b"},
			{Name: "n2", CPU: 16000, Memory: 32768, Arch: sim.ArchAMD64, Zone: "c"},
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
	svc := func(n string) int32 { i, _ := env.ServiceIndex(n); return int32(i) }
	id, err := st.AddPod(sim.Pod{CPU: 2000, Mem: 2048, Service: svc("db")})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Bind(id, 2, nil); err != nil {
		t.Fatal(err)
	}
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	const weight = 0.5
	pol, err := AffinityFactory("sage-load:0.5", p, weight).New(env)
	if err != nil {
		t.Fatal(err)
	}
	if pol.Name() != "sage-load:0.5" {
		t.Fatalf("name %q", pol.Name())
	}
	dep := baseline.NewDepLoad(env, 0)
	nodes := []int32{0, 1, 2}
	for _, c := range []struct {
		service string
		extra   []float64
	}{
		{"web", []float64{0, 0, weight * baseline.MaxNodeScore}},
		{"db", []float64{0, 0, 0}},
	} {
		pod := sim.Pod{CPU: 1000, Mem: 1024, Service: svc(c.service)}
		got, base := make([]float64, 3), make([]float64, 3)
		pol.Score(st, &pod, nodes, got)
		dep.Score(st, &pod, nodes, base)
		for i := range nodes {
			if d := got[i] - base[i]; math.Abs(d-c.extra[i]) > 1e-9 {
				t.Errorf("%s pod, node n%d: sage-load - dep-load = %v, want %v", c.service, i, d, c.extra[i])
			}
		}
	}
}

// TestFromEnv checks the simulator's graph: replicas counted from the
// workload's pods, their mean request, the calls.
func TestFromEnv(t *testing.T) {
	w := &sim.Workload{
		Services:     []string{"web", "db"},
		Dependencies: []sim.Dependency{{From: "web", To: "db", CallsPerSecond: 3}},
		Pods: []sim.PodSpec{
			{Name: "w0", CPU: 1000, Memory: 64, Delete: sim.NoDeletion, Service: "web"},
			{Name: "w1", CPU: 500, Memory: 64, Delete: sim.NoDeletion, Service: "web"},
			{Name: "x", CPU: 100, Memory: 64, Delete: sim.NoDeletion},
		},
	}
	c := &sim.Cluster{Name: "c", Zones: []sim.Zone{{Name: "a"}}, Nodes: []sim.NodeSpec{{Name: "n", CPU: 4000, Memory: 4096, Arch: sim.ArchAMD64, Zone: "a"}}}
	env, err := sim.NewEnv(c, w, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g := FromEnv(env)
	web := g.Services[0]
	if g.Services[1].Name == "web" {
		web = g.Services[1]
	}
	if len(g.Services) != 2 || web.Replicas != 2 || web.CPUMilli != 750 || len(g.Calls) != 1 || g.Calls[0].Rate != 3 || g.Zones != 1 {
		t.Fatalf("graph %+v", g)
	}
}
