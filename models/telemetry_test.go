package models

import (
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/sim"
)

// busyBoards is the shipped model whose network alone scores the busy
// board higher in TestEdgeModelsPreferCoolNode: edge-loaded prefers the
// idle node in the plugin's fixture of two loaded amd64 servers
// (edge-plugin, TestTelemetryPrefersCoolNode) and in the agent end-to-end
// test, not between these two empty arm64 boards, once the LS flag it had
// never seen vary no longer moves its scores (docs/training.md, "Inputs
// constant in training"): it reads the run queue but rewards a busy CPU
// more, and the retrained seeds that prefer the idle board did worse on
// held-out workloads (docs/training.md, "Seed selection"). Its decision
// rule's busy cap (policy.Decision.BusyCap) ranks the board measured at
// 95% below the idle one, so the model as shipped prefers the idle board.
const busyBoards = "edge-loaded"

// ruledBlind is the shipped model whose network reads no telemetry and
// whose decision rule has a busy cap, so that it too prefers the idle
// board (docs/training.md, "A busy cap for edge"); edge-carbon's failed
// its gate (it emitted more).
const ruledBlind = "edge"

// TestEdgeModelsPreferCoolNode is issue 18's telemetry check in the
// simulator: two nodes with equal capacity and equal requests, one
// reporting what an idle node measures and the other a busy CPU with a
// long run queue (the agent's cpu and runqP99Us, through
// State.SetMeasured as the scheduler plugin sets them). The shipped models
// that read telemetry must score the cool node higher with their decision
// rule, and the network alone too (edge-sage; edge-loaded's network does
// not: busyBoards);
// the models that leave the telemetry features out (network.exclude in
// their configs: default, edge, edge-carbon) must not tell the nodes
// apart by their networks, since they read only the requests, equal
// here; edge's rule, with its busy cap, must (ruledBlind).
func TestEdgeModelsPreferCoolNode(t *testing.T) {
	spec := func(name string) sim.NodeSpec {
		return sim.NodeSpec{Name: name, CPU: 8000, Memory: 16 << 10, Arch: sim.ArchARM64, Zone: "store-1"}
	}
	cluster := &sim.Cluster{Name: "two-boards", Zones: []sim.Zone{{Name: "store-1"}}, Nodes: []sim.NodeSpec{spec("cool"), spec("hot")}}
	// a pod like the training families' (Burstable: none of them is LS).
	// Until 5 December 2026 this pod was LS, an input the edge models had
	// never seen vary, and its random weights, not the telemetry, made
	// edge-loaded prefer the cool node (docs/training.md, "Inputs constant
	// in training").
	pod := sim.PodSpec{Name: "web-0", CPU: 500, Memory: 512}
	env, err := sim.NewEnv(cluster, &sim.Workload{Name: "one-pod", Pods: []sim.PodSpec{pod}}, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lm := sim.NewState(env).LoadModel
	cases := []struct {
		name string
		cool sim.NodeTelemetry
		hot  sim.NodeTelemetry
	}{
		// 15% busy, 40 µs run queue against 95% busy, 20 ms (what the
		// eBPF probe sees on an oversubscribed board)
		{"measured run queue", lm.FromMeasured(0.15, 0.4, 0.5, 40, 0), lm.FromMeasured(0.95, 0.4, 7.5, 20_000, 0)},
		// the /proc fallback: no run queue measured, the plugin's
		// estimate from the CPU share (nodeload.Model.RunQueueP99Us)
		{"estimated run queue", lm.FromMeasured(0.15, 0.4, 0.5, lm.RunQueueP99Us(0.15, 8000), 0), lm.FromMeasured(0.95, 0.4, 7.5, lm.RunQueueP99Us(0.95, 8000), 0)},
	}
	for _, name := range Names() {
		m, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			st := sim.NewState(env)
			st.SetMeasured(0, &c.cool)
			st.SetMeasured(1, &c.hot)
			l, err := nn.NewLearned(name, m, env)
			if err != nil {
				t.Fatal(err)
			}
			id, err := st.AddPod(env.Pods[0])
			if err != nil {
				t.Fatal(err)
			}
			p := &st.Pods[id]
			nodes := []int32{0, 1}
			net, ruled := make([]float64, 2), make([]float64, 2)
			l.NetworkScores(st, p, nodes, net)
			l.Score(st, p, nodes, ruled)
			t.Logf("%s, %s: network cool %.4f hot %.4f; with the rule %.4f %.4f", name, c.name, net[0], net[1], ruled[0], ruled[1])
			reads := false
			for i := policy.FirstTelemetryFeature; i < policy.FirstTelemetryFeature+policy.NumTelemetryFeatures; i++ {
				reads = reads || m.Net.ReadsInput(i)
			}
			if reads != (name == "edge-loaded" || name == "edge-sage") {
				t.Fatalf("%s reads telemetry: %v; only edge-loaded and edge-sage are trained with it", name, reads)
			}
			if !reads {
				if net[0] != net[1] {
					t.Errorf("%s, %s: a model trained without telemetry tells the nodes apart: cool %v, hot %v", name, c.name, net[0], net[1])
				}
				// edge's rule reads the telemetry its network does not
				if hasCap := m.Decision.BusyCap > 0; hasCap != (name == ruledBlind) || (hasCap && !(ruled[0] > ruled[1])) {
					t.Errorf("%s, %s: busy cap %v, with the rule cool %.4f hot %.4f: want %s alone to have one, and with it the cool node higher",
						name, c.name, m.Decision.BusyCap, ruled[0], ruled[1], ruledBlind)
				}
				continue
			}
			if name == busyBoards {
				// the network's known gap, pinned so that a retrained model
				// that closes it updates the docs and this test; the rule
				// must close it
				if !(net[0] < net[1]) {
					t.Errorf("%s, %s: the network alone no longer prefers the busy board (cool %.4f, hot %.4f): update docs/training.md and this test", name, c.name, net[0], net[1])
				}
				if m.Decision.BusyCap == 0 || !(ruled[0] > ruled[1]) {
					t.Errorf("%s, %s: with its rule %+v the hot node scores %.4f, the cool one %.4f: want the cool one higher", name, c.name, m.Decision, ruled[1], ruled[0])
				}
				continue
			}
			if !(net[0] > net[1]) || !(ruled[0] > ruled[1]) {
				t.Errorf("%s, %s: the hot node scores %.4f (network) and %.4f (with the rule), the cool one %.4f and %.4f: want the cool one higher",
					name, c.name, net[1], ruled[1], net[0], ruled[0])
			}
		}
	}
}
