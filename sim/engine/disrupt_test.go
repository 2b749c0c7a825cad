package engine_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/disrupt"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/nodeload"
)

// zonedNodes is a cluster of n identical 4-core nodes alternating between
// zones a and b (n0 in a, n1 in b, ...), with zone b's uplink as given and
// a "web" load profile.
func zonedNodes(n int, uplinkB disrupt.Uplink) *sim.Cluster {
	c := &sim.Cluster{
		Name:         "zoned",
		Zones:        []sim.Zone{{Name: "a"}, {Name: "b", Uplink: uplinkB}},
		LoadProfiles: []nodeload.Profile{{Name: "web", Amplitude: 0.5, PeakHour: 12}},
	}
	for i := range n {
		c.Nodes = append(c.Nodes, sim.NodeSpec{Name: fmt.Sprintf("n%d", i), CPU: 4000, Memory: 8192, Arch: sim.ArchAMD64, Zone: []string{"a", "b"}[i%2]})
	}
	return c
}

// TestReplayNodeFailures: nodes that fail often evict their pods; evicted
// pods run again elsewhere (or are lost), no pod is ever bound to a failed
// node, the state's books balance after every binding, and a seed gives
// the same run twice.
func TestReplayNodeFailures(t *testing.T) {
	c := zonedNodes(3, disrupt.Uplink{})
	for i := range c.Nodes {
		c.Nodes[i].FailureRate = 6
	}
	c.Disruptions = disrupt.Config{NodeFailures: true, MeanRepairSeconds: 1800}
	w := &sim.Workload{}
	for i := range 60 {
		w.Pods = append(w.Pods, sim.PodSpec{Name: "p" + string(rune('A'+i%26)) + string(rune('a'+i/26)), CPU: 1500, Memory: 512,
			Create: int64(i) * 1800, Delete: int64(i)*1800 + 6*3600})
	}
	env, err := sim.NewEnv(c, w, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.DefaultRunConfig(engine.Replay)
	cfg.Check = true
	cfg.Seed = 5
	cfg.OnBind = func(st *sim.State, _ *sim.Pod, node int, _ []int) {
		if st.Down(node) {
			t.Errorf("bound to failed node %d at %d", node, st.Now)
		}
	}
	run := func() map[string]float64 {
		res, err := engine.Run(context.Background(), env, factoryOf(constPolicy{score: func(int32) float64 { return 0 }}), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res.Measures
	}
	m := run()
	t.Logf("failures %v, evicted %v, lost %v, failed %v, placed %v", m["node_failures"], m["pods_evicted"], m["pods_lost"], m["pods_failed"], m["pods_placed"])
	if !(m["node_failures"] > 5) || !(m["pods_evicted"] > 0) {
		t.Errorf("3 nodes failing 6 times a day for 36 h: %v failures, %v evictions", m["node_failures"], m["pods_evicted"])
	}
	if m["pods_placed"]+m["pods_failed"]+m["pods_pending"] != m["pods_arrived"] || m["pods_lost"] > m["pods_evicted"] {
		t.Errorf("books: %v", m)
	}
	again := run()
	for k, v := range m {
		if k[:min(len(k), 8)] != "decision" && again[k] != v {
			t.Errorf("%s: %v then %v", k, v, again[k])
		}
	}
}

// TestReplayUplinkFlaps: an uplink that flaps once a day flaps about 20
// times in a 20-day replay.
func TestReplayUplinkFlaps(t *testing.T) {
	c := zonedNodes(2, disrupt.Uplink{LossRate: 0.01, FlapsPerDay: 1, FlapSeconds: 600, FlapRTTMs: 900, FlapLoss: 0.2})
	w := &sim.Workload{Pods: []sim.PodSpec{{Name: "x", CPU: 1, Create: 0, Delete: 20 * 86400}}}
	_, res := replayFlat(t, c, w, false)
	if res.Measures["uplink_flaps"] < 5 {
		t.Errorf("20 days at 1 flap a day: %v flaps", res.Measures["uplink_flaps"])
	}
}

// TestBackgroundLoadMeasures: background load on one node (work outside
// Kubernetes) slows the pods placed there, and the utilisation measures
// still count the pods' use only: the same placements (a policy that
// ignores telemetry) give the same utilisation with and without it (the
// node never saturates, where its pods would get less than they ask),
// and a higher latency proxy with it.
func TestBackgroundLoadMeasures(t *testing.T) {
	w := &sim.Workload{}
	for i := range 40 {
		// about 8 at a time on the node the policy prefers: 1.3 of its 4
		// cores at the web profile's peak, below 2 with the background
		w.Pods = append(w.Pods, sim.PodSpec{Name: fmt.Sprintf("p%d", i), CPU: 200, Memory: 256, CPUUsage: 0.8, Profile: "web",
			Create: int64(i) * 900, Delete: int64(i)*900 + 2*3600})
	}
	run := func(background float64, failures bool) map[string]float64 {
		c := zonedNodes(2, disrupt.Uplink{})
		c.Nodes[1].Background = background
		if failures { // a failed node measures nothing, background included
			c.Nodes[1].FailureRate = 8
			c.Disruptions = disrupt.Config{NodeFailures: true, MeanRepairSeconds: 1800}
		}
		env, err := sim.NewEnv(c, w, sim.EnvOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := engine.DefaultRunConfig(engine.Replay)
		cfg.Seed = 3
		res, err := engine.Run(context.Background(), env, factoryOf(constPolicy{score: func(n int32) float64 { return float64(n) }}), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res.Measures
	}
	none, busy := run(0, false), run(0.5, false)
	t.Logf("util_used_cpu_mean %v / %v, latency_p95_ms %v / %v", none["util_used_cpu_mean"], busy["util_used_cpu_mean"], none["latency_p95_ms"], busy["latency_p95_ms"])
	failing, failingBusy := run(0, true), run(0.5, true)
	if failing["node_failures"] == 0 {
		t.Fatal("no node failed")
	}
	for _, k := range []string{"util_used_cpu_mean", "util_used_cpu_p95", "util_active_cpu_mean", "pods_placed"} {
		if math.Abs(none[k]-busy[k]) > 1e-9 || none[k] == 0 {
			t.Errorf("%s: %v without background load, %v with it: want the same, nonzero", k, none[k], busy[k])
		}
		if math.Abs(failing[k]-failingBusy[k]) > 1e-9 {
			t.Errorf("%s with node failures: %v without background load, %v with it: want the same", k, failing[k], failingBusy[k])
		}
	}
	if !(busy["latency_p95_ms"] > 1.5*none["latency_p95_ms"]) {
		t.Errorf("latency p95 %v ms with the node half busy outside Kubernetes, %v without", busy["latency_p95_ms"], none["latency_p95_ms"])
	}
}
