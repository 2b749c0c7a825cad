package ppo

import (
	"math"
	"testing"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/engine"
)

// TestLatencyProxyReward: reward.latencyProxy charges the placed pod's
// latency proxy as the simulator's measures compute it, from the node's
// telemetry, so a placement on a node measured busy costs more than one
// on an idle twin with the same requests — which reward.latency, reading
// the requested CPU, cannot tell apart.
func TestLatencyProxyReward(t *testing.T) {
	spec := func(name string) sim.NodeSpec {
		return sim.NodeSpec{Name: name, CPU: 8000, Memory: 16 << 10, Arch: sim.ArchARM64, Zone: "z"}
	}
	cluster := &sim.Cluster{Name: "twins", Zones: []sim.Zone{{Name: "z"}}, Nodes: []sim.NodeSpec{spec("cool"), spec("hot")}}
	env, err := sim.NewEnv(cluster, &sim.Workload{Name: "one", Pods: []sim.PodSpec{{Name: "p", CPU: 500, Memory: 512, Delete: sim.NoDeletion}}}, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rcfg := engine.DefaultRunConfig(engine.Replay)
	reward := func(w Reward, node int) float64 {
		st := sim.NewState(env)
		lm := st.LoadModel
		cool, hot := lm.FromMeasured(0.15, 0.2, 0.5, 40, 0), lm.FromMeasured(0.95, 0.2, 7.5, 20_000, 0)
		st.SetMeasured(0, &cool)
		st.SetMeasured(1, &hot)
		id := runPod(t, st, env.Pods[0], node)
		ep := &episode{steps: []step{{}}}
		r := newRewarder(w, env, ep, rcfg)
		r.outcome(st, &st.Pods[id], node)
		// Independent reference: the proxy the latency measures use.
		want := -w.LatencyProxy * st.LatencyProxy(-1, node, rcfg.BaseLatencyMs) / 100
		if w.LatencyProxy != 0 && math.Abs(ep.ret-want) > 1e-9 {
			t.Errorf("node %d: reward %v, want %v", node, ep.ret, want)
		}
		return ep.ret
	}
	proxy := Reward{LatencyProxy: 1}
	if c, h := reward(proxy, 0), reward(proxy, 1); !(c > h) {
		t.Errorf("latencyProxy: cool node rewarded %v, hot %v: want the hot one to cost more", c, h)
	}
	req := Reward{Latency: 1}
	if c, h := reward(req, 0), reward(req, 1); c != h {
		t.Errorf("latency (requests): cool %v, hot %v: want equal (equal requests)", c, h)
	}
}

// TestCrossZonePodReward: reward.crossZonePod charges each placed service
// pod the share of its own call rate that crosses zones, so the replica
// placed beside its running partners is paid more than one placed a zone
// away, and a pod with no running partner is charged nothing.
func TestCrossZonePodReward(t *testing.T) {
	node := func(name, zone string) sim.NodeSpec {
		return sim.NodeSpec{Name: name, CPU: 8000, Memory: 16 << 10, Arch: sim.ArchAMD64, Zone: zone}
	}
	cluster := &sim.Cluster{Name: "two-zones", Zones: []sim.Zone{{Name: "a"}, {Name: "b"}},
		Nodes: []sim.NodeSpec{node("a0", "a"), node("b0", "b")}}
	svc := func(name, service string) sim.PodSpec {
		return sim.PodSpec{Name: name, CPU: 100, Memory: 64, Service: service, Delete: sim.NoDeletion}
	}
	wl := &sim.Workload{Name: "pair", Pods: []sim.PodSpec{svc("web-0", "web"), svc("api-0", "api")},
		Dependencies: []sim.Dependency{{From: "web", To: "api", CallsPerSecond: 20}}}
	env, err := sim.NewEnv(cluster, wl, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rcfg := engine.DefaultRunConfig(engine.Replay)
	w := Reward{CrossZonePod: 3}
	// place binds web-0 in zone a when withWeb, then api-0 on node n, and
	// returns the reward of api-0's placement.
	place := func(withWeb bool, n int) float64 {
		st := sim.NewState(env)
		if withWeb {
			runPod(t, st, env.Pods[0], 0)
		}
		id := runPod(t, st, env.Pods[1], n)
		ep := &episode{steps: []step{{}}}
		newRewarder(w, env, ep, rcfg).outcome(st, &st.Pods[id], n)
		return ep.ret
	}
	tests := []struct {
		name    string
		withWeb bool
		node    int
		want    float64
	}{
		{"beside its caller", true, 0, 0},
		// all 20 calls/s cross: share 1, weight 3.
		{"a zone from its caller", true, 1, -3},
		{"no partner running", false, 1, 0},
	}
	for _, tt := range tests {
		if got := place(tt.withWeb, tt.node); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%s: reward %v, want %v", tt.name, got, tt.want)
		}
	}
}

// runPod adds pod p to st and binds it to node n, failing the test on
// any error; it returns the pod's ID.
func runPod(t *testing.T, st *sim.State, p sim.Pod, n int) int32 {
	t.Helper()
	id, err := st.AddPod(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Bind(id, n, nil); err != nil {
		t.Fatal(err)
	}
	return id
}
