package policy

import (
	"errors"
	"math"
	"testing"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
)

// testEnv: two zones 20 ms apart; g2 (2 T4, zone a), g8 (8 G2, zone a),
// arm (arm64, zone b, carbon 300). Services web -> api (10/s), api -> db
// (30/s).
func testEnv(t testing.TB) *sim.Env {
	t.Helper()
	c := &sim.Cluster{
		Name:        "t",
		Zones:       []sim.Zone{{Name: "a"}, {Name: "b", CarbonZone: "dirty"}},
		CarbonZones: []sim.CarbonZone{{Name: "dirty", Curve: []float64{300}}},
		Network:     &sim.Network{IntraZoneMs: 0, InterZoneMs: 20},
		Nodes: []sim.NodeSpec{
			{Name: "g2", CPU: 32000, Memory: 65536, GPUs: 2, GPUModel: "T4", Arch: sim.ArchAMD64, Zone: "a", FailureRate: math.E - 1},
			{Name: "g8", CPU: 128000, Memory: 524288, GPUs: 8, GPUModel: "G2", Arch: sim.ArchAMD64, Zone: "a"},
			{Name: "arm", CPU: 8000, Memory: 16384, Arch: sim.ArchARM64, Zone: "b"},
		},
	}
	w := &sim.Workload{
		Pods: []sim.PodSpec{
			{Name: "share", CPU: 4000, Memory: 8192, GPUs: 1, GPUMilli: 500, QoS: sim.QoSLS, Priority: 1000, Delete: sim.NoDeletion, CPUUsage: 0.5},
			{Name: "api-0", CPU: 2000, Memory: 1024, Service: "api", Delete: sim.NoDeletion, CPUUsage: 0.5},
			{Name: "web-0", CPU: 1000, Memory: 1024, Service: "web", Delete: sim.NoDeletion, CPUUsage: 0.5},
			{Name: "db-0", CPU: 1000, Memory: 1024, Service: "db", Delete: sim.NoDeletion, CPUUsage: 0.5},
			{Name: "db-1", CPU: 1000, Memory: 1024, Service: "db", Delete: sim.NoDeletion, CPUUsage: 0.5},
		},
		Dependencies: []sim.Dependency{{From: "web", To: "api", CallsPerSecond: 10}, {From: "api", To: "db", CallsPerSecond: 30}},
	}
	env, err := sim.NewEnv(c, w, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func newTestState(t testing.TB, env *sim.Env) *sim.State {
	t.Helper()
	st := sim.NewState(env)
	for i := range env.Pods {
		if _, err := st.AddPod(env.Pods[i]); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// boundTestState is newTestState with web-0 on g2 (zone a), db-0 on g8
// (zone a) and db-1 on arm (zone b).
func boundTestState(t testing.TB, env *sim.Env) *sim.State {
	t.Helper()
	st := newTestState(t, env)
	for _, b := range []struct {
		id   int32
		node int
	}{{2, 0}, {3, 1}, {4, 2}} {
		if err := st.Bind(b.id, b.node, nil); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func TestExtract(t *testing.T) {
	env := testEnv(t)
	st := boundTestState(t, env)
	x := NewExtractor(env)
	f := make([]float32, NumFeatures)
	get := func(name string) float32 {
		for i, ft := range featureList {
			if ft.Name == name {
				return f[i]
			}
		}
		t.Fatalf("no feature %s", name)
		return 0
	}
	near := func(name string, want float64) {
		t.Helper()
		if got := float64(get(name)); math.Abs(got-want) > 1e-5 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}

	// The shared-GPU pod on g2: largest node 128000 CPU, 524288 MiB, 8000
	// milli-GPU.
	share := &st.Pods[0]
	x.BeginPod(st, share)
	x.Extract(st, share, 0, f)
	near("pod_cpu", 4000.0/128000)
	near("pod_mem", 8192.0/524288)
	near("pod_gpu", 500.0/8000)
	near("pod_share", 1)
	near("pod_qos_ls", 1)
	near("pod_priority", math.Tanh(1))
	// g2 runs web-0 (1000 cpu, 1024 MiB): after the pod 27000/32000 cpu,
	// 56320/65536 memory, 1500/2000 GPU.
	near("cpu_free_after", 27000.0/32000)
	near("mem_free_after", 56320.0/65536)
	near("gpu_free_after", 0.75)
	near("cpu_free_after_abs", 27000.0/128000)
	near("gpu_free_after_abs", 1500.0/8000)
	near("full_gpus_after", 1.0/8) // one device keeps 1000 free
	near("device_leftover", 0.5)   // 1000 - 500 on the chosen device
	d, _ := baseline.NewFGD(env).Delta(st, share, 0)
	near("fgd_delta", d/1000)
	near("fgd_score", float64(baseline.FGDScore(d))/100)
	near("balance_after", 27000.0/32000-0.75)
	near("load", 500.0/32000) // web-0 uses half of its 1000 milli
	near("pod_cpu_rel", 4000.0/32000)
	near("failure_rate", 1) // log(1 + e - 1)
	near("carbon", float64(sim.DefaultCarbonIntensity)/1000)
	near("dep_zone_colocation", 0) // no service
	near("gpu_node_cpu_pod", 0)
	near("arch_arm64", 0)
	// 4 cores at amd64's 8 W and half a T4 (70 W): 67 W at 475 gCO2/kWh
	// is 31.825 gCO2/h; log(32.825) = 3.491, 27 steps of 1/8.
	near("emission", 27.0/8)
	x.UseEmission(false) // a scorer that does not read it
	x.Extract(st, share, 0, f)
	near("emission", 0)
	x.UseEmission(true)

	// api-0 talks to web (10/s, 1 replica in zone a) and db (30/s, one
	// replica in each zone). On arm (zone b): co-location
	// (10*0 + 30*0.5) / 40 = 0.375; RTT (10*20 + 30*(0+20)/2) / 40 =
	// 12.5 ms -> 0.125.
	api := &st.Pods[1]
	x.BeginPod(st, api)
	x.Extract(st, api, 2, f)
	near("dep_zone_colocation", 0.375)
	near("dep_rtt", 0.125)
	near("arch_arm64", 1)
	near("carbon", 0.3)
	near("gpu_node_cpu_pod", 0)
	// 2 arm64 cores at 2 W: 4 W at 300 gCO2/kWh is 1.2 gCO2/h; log(2.2)
	// = 0.788, 6 steps of 1/8.
	near("emission", 6.0/8)
	// On g8 (zone a): (10*1 + 30*0.5) / 40 = 0.625, RTT (0 + 30*10)/40 = 7.5 ms.
	x.Extract(st, api, 1, f)
	near("dep_zone_colocation", 0.625)
	near("dep_rtt", 0.075)
	near("gpu_node_cpu_pod", 1)
	near("gpu_free_after", 1)
	// Nothing running needs one architecture; amd64 has 158000 of the
	// 165000 free: 0.958, in steps of 1/20 0.95.
	near("pod_arch_pinned", 0)
	near("arch_pinned_share", 0)
	near("arch_free_share", 0.95)

	// An amd64-only pod of 4000 on g8: 4000 of the 7000 running is pinned
	// to amd64 (0.571: 0.55 in steps of 1/20); amd64 has 154000 of the
	// 161000 free (0.957: 0.95). arm64: nothing pinned, 7000 of 161000
	// free (0.043: 0.05).
	id, err := st.AddPod(sim.Pod{CPU: 4000, Mem: 1024, Arch: sim.ArchAMD64, Service: -1, Delete: sim.NoDeletion})
	if err != nil {
		t.Fatal(err)
	}
	x.UseArch(true)
	before := x.Context(st, 1)
	x.UseArch(false)
	beforeOff := x.Context(st, 1)
	if err := st.Bind(id, 1, nil); err != nil {
		t.Fatal(err)
	}
	pinned := &st.Pods[id]
	x.BeginPod(st, pinned)
	x.Extract(st, pinned, 1, f)
	near("pod_arch_pinned", 1)
	near("arch_pinned_share", 0.55)
	near("arch_free_share", 0.95)
	// A scorer that does not read the shares keeps its cached scores when
	// they move (UseArch off); one that reads them does not.
	if !x.Context(st, 1).Same(beforeOff) {
		t.Error("without UseArch, g8's context changed with its architecture's pinned share")
	}
	x.UseArch(true)
	if x.Context(st, 1).Same(before) {
		t.Error("with UseArch, g8's context did not change with its architecture's pinned share")
	}
	x.Extract(st, api, 2, f)
	near("pod_arch_pinned", 0)
	near("arch_pinned_share", 0)
	near("arch_free_share", 0.05)
}

func TestSchema(t *testing.T) {
	s := NewSchema()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	h := s.Hash()
	// Fit: feature 0 sampled as 1, 3 -> mean 2, std 1; a constant feature
	// gets the 1e-3 floor.
	rows := [][]float32{make([]float32, NumFeatures), make([]float32, NumFeatures)}
	rows[0][0], rows[1][0] = 1, 3
	s.Fit(rows)
	if s.Mean[0] != 2 || s.Std[0] != 1 || s.Std[1] != 1e-3 {
		t.Errorf("Fit: mean %v std %v, std[1] %v", s.Mean[0], s.Std[0], s.Std[1])
	}
	if s.Hash() == h {
		t.Error("hash did not change with the statistics")
	}
	v := []float32{5}
	v = append(v, make([]float32, NumFeatures-1)...)
	s.Normalize(v)
	if v[0] != 3 {
		t.Errorf("Normalize(5) = %v, want (5-2)/1 = 3", v[0])
	}
	for _, tt := range []struct {
		name   string
		mutate func(*Schema)
	}{
		{"other id", func(s *Schema) { s.ID = "edgesched.features/v0" }},
		{"renamed", func(s *Schema) { s.Names[3] = "pod_sharing" }},
		{"short", func(s *Schema) { s.Mean = s.Mean[:3] }},
		{"zero std", func(s *Schema) { s.Std[2] = 0 }},
		{"NaN mean", func(s *Schema) { s.Mean[2] = float32(math.NaN()) }},
		{"bounds of one feature", func(s *Schema) { s.Lo, s.Hi = []float32{0}, []float32{1} }},
		{"lower bound only", func(s *Schema) { s.Lo = make([]float32, NumFeatures) }},
		{"bounds crossed", func(s *Schema) {
			s.Lo, s.Hi = make([]float32, NumFeatures), make([]float32, NumFeatures)
			s.Lo[4] = 1
		}},
		{"NaN bound", func(s *Schema) {
			s.Lo, s.Hi = make([]float32, NumFeatures), make([]float32, NumFeatures)
			s.Hi[4] = float32(math.NaN())
		}},
	} {
		c := NewSchema()
		tt.mutate(&c)
		if err := c.Validate(); !errors.Is(err, ErrSchema) {
			t.Errorf("%s: Validate = %v, want ErrSchema", tt.name, err)
		}
	}
}

// TestRangeBoundsClamp: a Range covers the rows it observed (NaNs
// skipped), becomes schema bounds that Validate accepts and the hash
// ignores, and Clamp holds a row within them; a feature never observed
// finite is unbounded.
func TestRangeBoundsClamp(t *testing.T) {
	row := func(v0, v1, v2 float32) []float32 {
		r := make([]float32, NumFeatures)
		r[0], r[1], r[2] = v0, v1, v2
		return r
	}
	nan := float32(math.NaN())
	var a, b Range
	a.Observe(row(1, -2, nan))
	a.Observe(row(3, 5, nan))
	b.Observe(row(-1, 0, nan))
	a.Merge(b)
	a.Merge(Range{})  // observed nothing: no change
	var onlyNaN Range // a feature one episode saw only as NaN stays as the others saw it
	onlyNaN.Observe(row(nan, nan, nan))
	a.Merge(onlyNaN)
	lo, hi := a.Bounds()
	// feature 0 saw 1, 3, -1; feature 1 saw -2, 5, 0; feature 2 only NaN;
	// the others 0 on every row
	want := []struct{ lo, hi float32 }{{-1, 3}, {-2, 5}, {-math.MaxFloat32, math.MaxFloat32}, {0, 0}}
	for i, w := range want {
		if lo[i] != w.lo || hi[i] != w.hi {
			t.Errorf("feature %d: bounds [%v, %v], want [%v, %v]", i, lo[i], hi[i], w.lo, w.hi)
		}
	}
	s := NewSchema()
	h := s.Hash()
	s.Lo, s.Hi = lo, hi
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if s.Hash() != h {
		t.Error("the hash changed with the bounds")
	}
	x := row(10, -10, 7)
	x[3] = nan
	s.Clamp(x)
	if x[0] != 3 || x[1] != -2 || x[2] != 7 || !math.IsNaN(float64(x[3])) {
		t.Errorf("Clamp: %v, want 3, -2, 7 (unbounded), NaN", x[:4])
	}
	y := row(10, -10, 7)
	unbounded := NewSchema()
	unbounded.Clamp(y) // no bounds: unchanged
	if y[0] != 10 || y[1] != -10 {
		t.Errorf("Clamp without bounds changed the row: %v", y[:3])
	}
	if lo, hi := (Range{}).Bounds(); lo != nil || hi != nil {
		t.Errorf("an empty range's bounds: %v, %v", lo, hi)
	}
}

// TestTelemetryFeatures: the telemetry features are the node's measured
// summary in their steps (a value set with State.SetMeasured, as the
// plugin sets an agent's annotation), computed here independently from
// the documented formulas; a cached learned score follows a change of
// step when the network reads telemetry, and the cache ignores it when
// the network leaves telemetry out.
func TestTelemetryFeatures(t *testing.T) {
	env := testEnv(t)
	st := newTestState(t, env)
	lm := st.LoadModel
	// arm: 83% busy, 90% memory (pressure (0.9-knee)/(1-knee)), 12 ms run
	// queue, 30 retransmits/s
	tel := lm.FromMeasured(0.83, 0.95, 3, 12_000, 30)
	st.SetMeasured(2, &tel)
	x := NewExtractor(env)
	p := &st.Pods[2]
	x.BeginPod(st, p)
	out := make([]float32, NumFeatures)
	x.Extract(st, p, 2, out)
	want := []float64{
		math.Round(0.83*20) / 20,
		math.Round(math.Log1p(12)*4) / 4,
		math.Round((0.95-lm.MemKnee)/(1-lm.MemKnee)*8) / 8,
		math.Round(math.Log1p(30)*2) / 2,
	}
	for i, w := range want {
		if got := out[FirstTelemetryFeature+i]; math.Abs(float64(got)-w) > 1e-6 {
			t.Errorf("%s = %v, want %v", featureList[FirstTelemetryFeature+i].Name, got, w)
		}
	}
}

// TestEmissionStep: log(1 + gCO2/h) rounded down to steps of 1/8; no rate,
// a negative one or NaN read as 0.
func TestEmissionStep(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		want float32
	}{
		{0, 0},
		{-3, 0},
		{math.NaN(), 0},
		{math.E - 1, 1},                // log(e) = 1, exactly 8 steps
		{math.Exp(0.3) - 1, 2.0 / 8},   // 0.3 is 2.4 steps: 2
		{math.Exp(5.99) - 1, 47.0 / 8}, // 47.92 steps: 47
		{math.Inf(1), float32(math.Inf(1))},
	} {
		if got := EmissionStep(tc.rate); got != tc.want {
			t.Errorf("EmissionStep(%v) = %v, want %v", tc.rate, got, tc.want)
		}
	}
}
