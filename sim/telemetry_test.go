package sim_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/disrupt"
	"github.com/edgesched/edgesched/sim/nodeload"
)

// twoNodes is a cluster of two identical 4-core nodes in two zones.
func twoNodes() *sim.Cluster {
	return &sim.Cluster{
		Name:  "two",
		Zones: []sim.Zone{{Name: "a"}, {Name: "b", Uplink: disrupt.Uplink{LossRate: 0.01, FlapsPerDay: 1, FlapSeconds: 600, FlapRTTMs: 900, FlapLoss: 0.2}}},
		Nodes: []sim.NodeSpec{
			{Name: "n0", CPU: 4000, Memory: 8192, Arch: sim.ArchAMD64, Zone: "a"},
			{Name: "n1", CPU: 4000, Memory: 8192, Arch: sim.ArchAMD64, Zone: "b"},
		},
		LoadProfiles: []nodeload.Profile{{Name: "web", Amplitude: 0.5, PeakHour: 12}},
	}
}

// TestTelemetrySeesWhatRequestsHide: two nodes hold pods with equal
// requests; on one they use more than they ask and a noisy neighbour
// interferes. Requests (what kube-scheduler scores) are equal; telemetry
// shows the CPU, run-queue and latency difference.
func TestTelemetrySeesWhatRequestsHide(t *testing.T) {
	w := &sim.Workload{Pods: []sim.PodSpec{
		{Name: "quiet", CPU: 1000, Memory: 1024, CPUUsage: 0.5, Delete: sim.NoDeletion},
		{Name: "hot", CPU: 1000, Memory: 1024, CPUUsage: 2.4, Interference: 0.5, NetMbps: 50, Delete: sim.NoDeletion},
	}}
	env, err := sim.NewEnv(twoNodes(), w, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !env.Dynamic {
		t.Fatal("interference and network should make the env dynamic")
	}
	st := sim.NewState(env)
	for i := range 2 {
		id, _ := st.AddPod(env.Pods[i])
		if err := st.Bind(id, i, nil); err != nil {
			t.Fatal(err)
		}
	}
	q, h := st.Telemetry(0), st.Telemetry(1)
	if st.Nodes[0].NZCPU != st.Nodes[1].NZCPU {
		t.Fatal("requests differ")
	}
	// quiet: 500 of 4000 milli; hot: 2400, plus 1200 of interference
	if q.CPU != 0.125 || h.CPU != 0.6 || math.Abs(h.RhoEff-0.9) > 1e-12 || q.RhoEff != 0.125 {
		t.Errorf("cpu %v/%v rho_eff %v/%v, want 0.125/0.6 and 0.125/0.9", q.CPU, h.CPU, q.RhoEff, h.RhoEff)
	}
	if !(h.RunQueueP99Us > 10*q.RunQueueP99Us) || !(h.Load1 > q.Load1) {
		t.Errorf("run-queue p99 %v vs %v, load1 %v vs %v", h.RunQueueP99Us, q.RunQueueP99Us, h.Load1, q.Load1)
	}
	// node 1's zone loses 1%: 50 Mbit/s of 1448-byte segments
	if want := 50e6 / 8 / 1448 * 0.01; math.Abs(h.RetransPerS-want) > 1e-9 || q.RetransPerS != 0 {
		t.Errorf("retransmits %v (quiet %v), want %v", h.RetransPerS, q.RetransPerS, want)
	}
	if lq, lh := st.LatencyProxy(-1, 0, 10), st.LatencyProxy(-1, 1, 10); !(lh > 5*lq) {
		t.Errorf("latency proxy %v vs %v", lh, lq)
	}
	// the plugin's path: a measured summary replaces the model
	m := sim.NodeTelemetry{CPU: 0.99, RhoEff: 0.5, MemFactor: 1}
	st.SetMeasured(0, &m)
	if got := st.Telemetry(0); got != m {
		t.Errorf("measured %+v, got %+v", m, got)
	}
	st.SetMeasured(0, nil)
	if got := st.Telemetry(0); got != q {
		t.Errorf("after clearing: %+v", got)
	}
}

// TestTelemetryFollowsProfile: a pod on the "web" profile (amplitude 0.5,
// peak at noon) uses 1.5x at noon and 0.5x at midnight.
func TestTelemetryFollowsProfile(t *testing.T) {
	w := &sim.Workload{Pods: []sim.PodSpec{{Name: "web", CPU: 2000, Memory: 512, CPUUsage: 1, Profile: "web", Delete: sim.NoDeletion}}}
	env, err := sim.NewEnv(twoNodes(), w, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := sim.NewState(env)
	id, _ := st.AddPod(env.Pods[0])
	if err := st.Bind(id, 0, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		hour int64
		cpu  float64
	}{{12, 0.75}, {0, 0.25}, {36, 0.75}} {
		st.Now = c.hour * 3600
		if got := st.Telemetry(0).CPU; math.Abs(got-c.cpu) > 1e-12 {
			t.Errorf("hour %d: cpu %v, want %v", c.hour, got, c.cpu)
		}
	}
	if st.Nodes[0].CPUUsed != 2000 {
		t.Errorf("steady use %v, want 2000 (the profile only moves telemetry)", st.Nodes[0].CPUUsed)
	}
	bad := &sim.Workload{Pods: []sim.PodSpec{{Name: "x", CPU: 1, Profile: "nosuch"}}}
	if _, err := sim.NewEnv(twoNodes(), bad, sim.EnvOptions{}); err == nil {
		t.Error("unknown profile accepted")
	}
}

// TestFlapRaisesRTT: during a flap, zone b's RTT to a is its FlapRTTMs
// plus loss x RTO; the static network is untouched. (Runs that flap
// uplinks are tested in sim/engine.)
func TestFlapRaisesRTT(t *testing.T) {
	env, err := sim.NewEnv(twoNodes(), &sim.Workload{Pods: []sim.PodSpec{{Name: "x", CPU: 1, Delete: sim.NoDeletion}}}, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := sim.NewState(env)
	if got, want := st.RTT(0, 1), 30+0.01*sim.RTOMs; got != want {
		t.Errorf("normal RTT %v, want %v", got, want)
	}
	if st.RTT(0, 0) != 0.5 {
		t.Errorf("intra-zone RTT %v", st.RTT(0, 0))
	}
	st.SetFlap(1, true)
	if got, want := st.RTT(1, 0), 900+0.2*sim.RTOMs; got != want || st.ZoneLoss(1) != 0.2 || env.RTT[0][1] != 30 {
		t.Errorf("flapping RTT %v (loss %v), want %v", got, st.ZoneLoss(1), want)
	}
	st.SetFlap(1, false)
	if got, want := st.RTT(1, 0), 30+0.01*sim.RTOMs; got != want || st.Flapping(1) {
		t.Errorf("after the flap: RTT %v, want %v", got, want)
	}
}

// TestBackgroundLoad: a node busy with work outside Kubernetes
// (NodeSpec.Background) measures, queues and slows its pods as its twin
// does when its pods use that much more, while its requests stay zero;
// a node without background load is unchanged. Out-of-range shares are
// refused.
func TestBackgroundLoad(t *testing.T) {
	c := twoNodes()
	c.LoadProfiles = nil
	c.Zones[1].Uplink = disrupt.Uplink{}
	c.Nodes[1].Background = 0.6
	one := &sim.Workload{Pods: []sim.PodSpec{{Name: "p", CPU: 1000, Memory: 1024, CPUUsage: 1, Delete: sim.NoDeletion}}}
	env, err := sim.NewEnv(c, one, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !env.Dynamic {
		t.Fatal("background load should make the env dynamic")
	}
	// the twin: no background, and a pod using 2400 milli-CPU more on n1
	twin := twoNodes()
	twin.LoadProfiles = nil
	twin.Zones[1].Uplink = disrupt.Uplink{}
	w := &sim.Workload{Pods: []sim.PodSpec{one.Pods[0], {Name: "extra", CPU: 2400, CPUUsage: 1, Delete: sim.NoDeletion}}}
	tenv, err := sim.NewEnv(twin, w, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, ts := sim.NewState(env), sim.NewState(tenv)
	id, _ := st.AddPod(env.Pods[0])
	if err := st.Bind(id, 1, nil); err != nil {
		t.Fatal(err)
	}
	for i, n := range []int{1, 1} {
		id, _ := ts.AddPod(tenv.Pods[i])
		if err := ts.Bind(id, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	got, want := st.Telemetry(1), ts.Telemetry(1)
	// 1000 + 2400 of 4000 milli-CPU busy either way
	if got != want || got.CPU != 0.85 {
		t.Errorf("with background: %+v\nthe twin: %+v", got, want)
	}
	if st.Nodes[1].NZCPU != 1000 {
		t.Errorf("requests %d milli-CPU, want the pod's 1000 only", st.Nodes[1].NZCPU)
	}
	if idle := st.Telemetry(0); idle.CPU != 0 || !(st.LatencyProxy(-1, 1, 1) > 2*st.LatencyProxy(-1, 0, 1)) {
		t.Errorf("n0 cpu %v; latency proxy on n1 %v, on n0 %v", idle.CPU, st.LatencyProxy(-1, 1, 1), st.LatencyProxy(-1, 0, 1))
	}
	for _, bad := range []float64{-0.1, 0.96, math.NaN(), math.Inf(1)} {
		c := twoNodes()
		c.Nodes[0].Background = bad
		if _, err := sim.NewEnv(c, one, sim.EnvOptions{}); !errors.Is(err, sim.ErrInvalid) || !strings.Contains(err.Error(), "background CPU share") {
			t.Errorf("background %v: %v, want ErrInvalid naming it", bad, err)
		}
	}
}

// TestBackgroundLoadApply: BackgroundLoad marks about Share of the nodes,
// each within [Min, Max], the same for a seed and per node whatever the
// nodes after it; a node with a background of its own keeps it.
func TestBackgroundLoadApply(t *testing.T) {
	nodes := func(n int) []sim.NodeSpec {
		out := make([]sim.NodeSpec, n)
		out[3].Background = 0.9
		return out
	}
	bl := sim.BackgroundLoad{Share: 0.3, Min: 0.2, Max: 0.6}
	if err := bl.Validate(); err != nil {
		t.Fatal(err)
	}
	a, b, short := nodes(2000), nodes(2000), nodes(10)
	bl.Apply(a, 7)
	bl.Apply(b, 7)
	bl.Apply(short, 7)
	busy := 0
	for i, n := range a {
		switch {
		case n.Background != b[i].Background || (i < len(short) && short[i].Background != n.Background):
			t.Fatalf("node %d: %v, %v again, %v in a shorter list", i, n.Background, b[i].Background, short[min(i, len(short)-1)].Background)
		case i == 3:
			if n.Background != 0.9 {
				t.Errorf("node 3's own background became %v", n.Background)
			}
		case n.Background != 0:
			busy++
			if n.Background < 0.2 || n.Background > 0.6 {
				t.Errorf("node %d: %v outside [0.2, 0.6]", i, n.Background)
			}
		}
	}
	// 1999 nodes at 0.3: mean 600, sd 20.5
	if busy < 520 || busy > 680 {
		t.Errorf("%d of 1999 nodes busy, want about 600", busy)
	}
	for _, bad := range []sim.BackgroundLoad{{Share: 1.1}, {Share: 0.5, Min: 0.5, Max: 0.4}, {Share: 0.5, Max: 0.99}, {Share: math.NaN()}} {
		if err := bad.Validate(); !errors.Is(err, sim.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
}
