package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/nodeload"
)

// randomEnv builds a random heterogeneous cluster and workload from a seed:
// mixed architectures, GPU models, taints, labels, services and times.
func randomEnv(t testing.TB, seed uint64) *sim.Env {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	zones := []sim.Zone{{Name: "z0"}, {Name: "z1"}, {Name: "z2"}}[:1+rng.IntN(3)]
	models := []string{"T4", "P100", "A10"}
	c := &sim.Cluster{Name: "random", Zones: zones}
	for i := range 5 + rng.IntN(35) {
		n := sim.NodeSpec{
			Name: fmt.Sprintf("n%d", i), CPU: int64(4+rng.IntN(60)) * 1000, Memory: int64(8+rng.IntN(120)) * 1024,
			Arch: sim.ArchAMD64, Zone: zones[rng.IntN(len(zones))].Name, FailureRate: rng.Float64() * 0.1,
		}
		if rng.IntN(4) == 0 {
			n.Arch = sim.ArchARM64
		}
		if g := []int{0, 0, 1, 2, 4, 8}[rng.IntN(6)]; g > 0 {
			n.GPUs, n.GPUModel = g, models[rng.IntN(len(models))]
		}
		if rng.IntN(6) == 0 {
			n.Taints = []sim.Taint{{Key: "dedicated", Value: "batch", Effect: sim.EffectNoSchedule}}
		}
		if rng.IntN(3) == 0 {
			n.Labels = map[string]string{"disk": "ssd"}
		}
		c.Nodes = append(c.Nodes, n)
	}
	w := &sim.Workload{Name: "random"}
	services := []string{"web", "api", "db", "cache"}
	for i := range 50 + rng.IntN(250) {
		p := sim.PodSpec{
			Name: fmt.Sprintf("p%d", i), CPU: int64(rng.IntN(16000)), Memory: int64(rng.IntN(32768)),
			Create: int64(rng.IntN(10000)), Delete: sim.NoDeletion, Priority: int32(rng.IntN(3)),
		}
		switch rng.IntN(5) {
		case 0:
			p.GPUs, p.GPUMilli = 1, int64(1+rng.IntN(1000))
		case 1:
			p.GPUs, p.GPUMilli = 1+rng.IntN(4), 1000
		}
		if p.GPUs > 0 && rng.IntN(4) == 0 {
			p.GPUSpec = []string{models[rng.IntN(len(models))]}
		}
		if rng.IntN(5) == 0 {
			p.Arch = sim.ArchAMD64
		}
		if rng.IntN(8) == 0 {
			p.Tolerations = []sim.Toleration{{Key: "dedicated", Exists: true, AnyEffect: true}}
		}
		if rng.IntN(10) == 0 {
			p.NodeSelector = map[string]string{"disk": "ssd"}
		}
		if rng.IntN(3) == 0 {
			p.Delete = p.Create + int64(1+rng.IntN(5000))
		}
		if rng.IntN(2) == 0 {
			p.Service = services[rng.IntN(len(services))]
		}
		w.Pods = append(w.Pods, p)
	}
	w.Services = services
	w.Dependencies = []sim.Dependency{{From: "web", To: "api", CallsPerSecond: 10}, {From: "api", To: "db", CallsPerSecond: 5}, {From: "api", To: "cache", CallsPerSecond: 20}}
	env, err := sim.NewEnv(c, w, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// shadow is an independent model of node capacity, checked on every bind.
type shadow struct {
	cpu, mem []int64
	gpu      [][]int64
	pods     map[int32]shadowPod
}

type shadowPod struct {
	node int
	gpus []int
}

func newShadow(env *sim.Env) *shadow {
	s := &shadow{pods: map[int32]shadowPod{}}
	for _, n := range env.Cluster.Nodes {
		s.cpu = append(s.cpu, n.CPU)
		s.mem = append(s.mem, n.Memory)
		g := make([]int64, n.GPUs)
		for i := range g {
			g[i] = sim.MilliGPU
		}
		s.gpu = append(s.gpu, g)
	}
	return s
}

// check verifies, from the specs alone, that pod p may land on node n with
// the given devices, then records the binding.
func (s *shadow) check(env *sim.Env, p *sim.Pod, n int, gpus []int) error {
	spec := env.Spec(p)
	node := env.Cluster.Nodes[n]
	switch {
	case s.cpu[n] < spec.CPU:
		return fmt.Errorf("cpu: %d free < %d", s.cpu[n], spec.CPU)
	case s.mem[n] < spec.Memory:
		return fmt.Errorf("memory: %d free < %d", s.mem[n], spec.Memory)
	case spec.Arch != sim.ArchAny && spec.Arch != node.Arch:
		return fmt.Errorf("arch %v on %v node", spec.Arch, node.Arch)
	case len(gpus) != spec.GPUs:
		return fmt.Errorf("%d devices for %d gpus", len(gpus), spec.GPUs)
	}
	if spec.GPUs > 0 && len(spec.GPUSpec) > 0 {
		ok := false
		for _, m := range spec.GPUSpec {
			ok = ok || m == node.GPUModel
		}
		if !ok {
			return fmt.Errorf("model %s not in %v", node.GPUModel, spec.GPUSpec)
		}
	}
	for k, v := range spec.NodeSelector {
		if node.Labels[k] != v {
			return fmt.Errorf("selector %s=%s", k, v)
		}
	}
	for _, taint := range node.Taints {
		ok := false
		for _, tol := range spec.Tolerations {
			ok = ok || tol.Tolerates(taint)
		}
		if !ok {
			return fmt.Errorf("untolerated taint %s", taint.Key)
		}
	}
	seen := map[int]bool{}
	for _, g := range gpus {
		if g < 0 || g >= len(s.gpu[n]) || seen[g] || s.gpu[n][g] < spec.GPUMilli {
			return fmt.Errorf("device %d cannot take %d", g, spec.GPUMilli)
		}
		seen[g] = true
	}
	s.cpu[n] -= spec.CPU
	s.mem[n] -= spec.Memory
	for _, g := range gpus {
		s.gpu[n][g] -= spec.GPUMilli
	}
	s.pods[p.ID] = shadowPod{node: n, gpus: append([]int(nil), gpus...)}
	return nil
}

// release removes pods that have left by time now (replay).
func (s *shadow) release(st *sim.State, now int64) {
	for id, sp := range s.pods {
		p := &st.Pods[id]
		if p.Delete != sim.NoDeletion && p.Delete <= now {
			spec := st.Env.Spec(p)
			s.cpu[sp.node] += spec.CPU
			s.mem[sp.node] += spec.Memory
			for _, g := range sp.gpus {
				s.gpu[sp.node][g] += spec.GPUMilli
			}
			delete(s.pods, id)
		}
	}
}

// Property: whatever the policy, no node is ever over-committed, every
// bound pod passed an independent filter, and replay conserves pods.
func TestPropertiesAllBaselines(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6}
	if testing.Short() {
		seeds = seeds[:2]
	}
	for _, seed := range seeds {
		env := randomEnv(t, seed)
		for _, f := range baseline.All() {
			for _, mode := range []engine.Mode{engine.Inflate, engine.Replay} {
				t.Run(fmt.Sprintf("seed%d/%s/%s", seed, f.Name, mode), func(t *testing.T) {
					sh := newShadow(env)
					cfg := engine.DefaultRunConfig(mode)
					cfg.Seed = seed
					cfg.Check = true
					cfg.InflateTarget = 1.5
					cfg.Samples = 20
					var bindErr error
					cfg.OnBind = func(st *sim.State, p *sim.Pod, n int, gpus []int) {
						if mode == engine.Replay {
							sh.release(st, st.Now)
						}
						if err := sh.check(env, p, n, gpus); err != nil && bindErr == nil {
							bindErr = fmt.Errorf("pod %s on node %s: %w", env.Spec(p).Name, env.Nodes[n].Name, err)
						}
					}
					res, err := engine.Run(context.Background(), env, f, cfg)
					if err != nil {
						t.Fatal(err)
					}
					if bindErr != nil {
						t.Fatal(bindErr)
					}
					m := res.Measures
					arrived, placed, failed := m["pods_arrived"], m["pods_placed"], m["pods_failed"]
					if arrived != placed+failed+m["pods_pending"] {
						t.Errorf("pods not conserved: arrived %v != placed %v + failed %v + pending %v", arrived, placed, failed, m["pods_pending"])
					}
					if mode == engine.Replay && int(arrived) != len(env.Pods) {
						t.Errorf("replay arrived %v pods, workload has %d", arrived, len(env.Pods))
					}
					for name, v := range m {
						if math.IsNaN(v) || math.IsInf(v, 0) {
							t.Errorf("measure %s = %v", name, v)
						}
					}
				})
			}
		}
	}
}

func TestInflateDeterministicAndSeeded(t *testing.T) {
	env := randomEnv(t, 11)
	f, _ := baseline.Lookup(baseline.BestFit)
	run := func(seed uint64) *engine.Result {
		cfg := engine.DefaultRunConfig(engine.Inflate)
		cfg.Seed = seed
		res, err := engine.Run(context.Background(), env, f, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b, c := run(3), run(3), run(4)
	if len(a.Curve) != len(b.Curve) || a.Measures["pods_arrived"] != b.Measures["pods_arrived"] {
		t.Fatal("same seed gave different runs")
	}
	for i := range a.Curve {
		if a.Curve[i] != b.Curve[i] {
			t.Fatalf("curve point %d differs: %+v vs %+v", i, a.Curve[i], b.Curve[i])
		}
	}
	same := a.Measures["pods_arrived"] == c.Measures["pods_arrived"]
	for i := range min(len(a.Curve), len(c.Curve)) {
		same = same && a.Curve[i] == c.Curve[i]
	}
	if same {
		t.Error("seeds 3 and 4 sampled identical workloads")
	}
	// The curve has one point per step, 0 to 130%, with arrived shares
	// increasing by the step and unallocated share in [0, 1].
	if len(a.Curve) != 131 {
		t.Fatalf("curve has %d points, want 131", len(a.Curve))
	}
	for i, p := range a.Curve {
		if math.Abs(p.ArrivedShare-float64(i)*0.01) > 1e-9 || p.UnallocatedGPUShare < 0 || p.UnallocatedGPUShare > 1 {
			t.Fatalf("curve point %d = %+v", i, p)
		}
		if i > 0 && p.FailedPods < a.Curve[i-1].FailedPods {
			t.Fatalf("failed pods decreased at point %d", i)
		}
	}
}

// constPolicy scores every node the same, or with a function.
type constPolicy struct {
	score func(n int32) float64
}

func (constPolicy) Name() string { return "const" }
func (c constPolicy) Score(_ *sim.State, _ *sim.Pod, nodes []int32, scores []float64) {
	for i, n := range nodes {
		scores[i] = c.score(n)
	}
}

// replayFlat replays w on c with a policy that scores every node 0 (ties
// broken by the run's seeded random source), counting failed classes
// when classes is set.
func replayFlat(t *testing.T, c *sim.Cluster, w *sim.Workload, classes bool) (*sim.Env, *engine.Result) {
	t.Helper()
	env, err := sim.NewEnv(c, w, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.DefaultRunConfig(engine.Replay)
	cfg.FailedClasses = classes
	res, err := engine.Run(context.Background(), env, factoryOf(constPolicy{score: func(int32) float64 { return 0 }}), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return env, res
}

func factoryOf(p sim.Policy) sim.Factory {
	return sim.Factory{Name: p.Name(), New: func(*sim.Env) (sim.Policy, error) { return p, nil }}
}

// firstPlacements runs replay and returns where each pod went.
func placements(t *testing.T, env *sim.Env, f sim.Factory, cfg engine.RunConfig) map[string]int {
	t.Helper()
	out := map[string]int{}
	cfg.OnBind = func(st *sim.State, p *sim.Pod, n int, _ []int) { out[env.Spec(p).Name] = n }
	if _, err := engine.Run(context.Background(), env, f, cfg); err != nil {
		t.Fatal(err)
	}
	return out
}

func uniformEnv(t *testing.T, nodes, pods int) *sim.Env {
	t.Helper()
	c := &sim.Cluster{Name: "u"}
	for i := range nodes {
		c.Nodes = append(c.Nodes, sim.NodeSpec{Name: fmt.Sprintf("n%d", i), CPU: 1_000_000, Memory: 1 << 20, Arch: sim.ArchAMD64})
	}
	w := &sim.Workload{}
	for i := range pods {
		w.Pods = append(w.Pods, sim.PodSpec{Name: fmt.Sprintf("p%d", i), CPU: 1, Memory: 1, Create: int64(i), Delete: sim.NoDeletion})
	}
	env, err := sim.NewEnv(c, w, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// Ties are broken uniformly: 4000 pods over 4 equal nodes land about 1000
// on each. With p = 1/4, the count per node has sd sqrt(4000*.25*.75) ≈
// 27.4, so 6 sd = 164 bounds a fair split with overwhelming probability.
func TestTieBreakUniformAndSeeded(t *testing.T) {
	env := uniformEnv(t, 4, 4000)
	cfg := engine.DefaultRunConfig(engine.Replay)
	cfg.Samples = 2
	f := factoryOf(constPolicy{score: func(int32) float64 { return 1 }})
	got := placements(t, env, f, cfg)
	counts := make([]int, 4)
	for _, n := range got {
		counts[n]++
	}
	for n, c := range counts {
		if math.Abs(float64(c)-1000) > 164 {
			t.Errorf("node %d got %d of 4000 pods, want about 1000 (counts %v)", n, c, counts)
		}
	}
	again := placements(t, env, f, cfg)
	for k, v := range got {
		if again[k] != v {
			t.Fatal("same seed placed pods differently")
		}
	}
	cfg.TieBreak = engine.TieFirst
	for name, n := range placements(t, env, f, cfg) {
		if n != 0 {
			t.Fatalf("tie-break first put %s on node %d, want 0", name, n)
		}
	}
}

// The highest score wins; NaN ranks lowest; ties within 1e-9 relative are
// ties.
func TestPickHighest(t *testing.T) {
	env := uniformEnv(t, 5, 50)
	cfg := engine.DefaultRunConfig(engine.Replay)
	cfg.Samples = 2
	scores := []float64{math.NaN(), 3, 7, 7 - 1e-12, 2}
	got := placements(t, env, factoryOf(constPolicy{score: func(n int32) float64 { return scores[n] }}), cfg)
	seen := map[int]bool{}
	for _, n := range got {
		seen[n] = true
	}
	if len(seen) != 2 || !seen[2] || !seen[3] {
		t.Errorf("pods went to nodes %v, want exactly nodes 2 and 3 (scores 7 and 7-1e-12)", seen)
	}
	nan := placements(t, env, factoryOf(constPolicy{score: func(int32) float64 { return math.NaN() }}), cfg)
	if len(nan) != 50 {
		t.Errorf("all-NaN scores placed %d of 50 pods, want 50", len(nan))
	}
}

type badPicker struct{ constPolicy }

func (badPicker) PickGPUs(_ *sim.State, _ *sim.Pod, _ int, dst []int) []int {
	return append(dst[:0], 99)
}

func TestPolicyMisbehaviourIsAnError(t *testing.T) {
	env := randomEnv(t, 5)
	_, err := engine.Run(context.Background(), env, factoryOf(badPicker{constPolicy{score: func(int32) float64 { return 0 }}}), engine.DefaultRunConfig(engine.Inflate))
	if !errors.Is(err, engine.ErrPolicy) {
		t.Fatalf("Run error = %v, want ErrPolicy", err)
	}
}

func TestRunHonoursContext(t *testing.T) {
	env := randomEnv(t, 5)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f, _ := baseline.Lookup(baseline.FGD)
	if _, err := engine.Run(ctx, env, f, engine.DefaultRunConfig(engine.Inflate)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run error = %v, want context.Canceled", err)
	}
}

func TestRunConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*engine.RunConfig)
	}{
		{"bad mode", func(c *engine.RunConfig) { c.Mode = "fast" }},
		{"zero target", func(c *engine.RunConfig) { c.InflateTarget = 0 }},
		{"NaN target", func(c *engine.RunConfig) { c.InflateTarget = math.NaN() }},
		{"step above target", func(c *engine.RunConfig) { c.InflateStep = 2 }},
		// The curve records target/step marks: 1e-300 never ended and
		// 1e-8 built 130 million; at most engine.MaxCurveMarks (100,000).
		{"step 1e-300", func(c *engine.RunConfig) { c.InflateStep = 1e-300 }},
		{"step 1e-8", func(c *engine.RunConfig) { c.InflateStep = 1e-8 }},
		{"130,001 marks", func(c *engine.RunConfig) { c.InflateStep = 1.3 / 130001 }},
		{"bad resource", func(c *engine.RunConfig) { c.InflateResource = "disk" }},
		{"bad tie break", func(c *engine.RunConfig) { c.TieBreak = "last" }},
		{"one sample", func(c *engine.RunConfig) { c.Samples = 1 }},
		{"no base latency", func(c *engine.RunConfig) { c.BaseLatencyMs = 0 }},
		{"util cap 1", func(c *engine.RunConfig) { c.MaxUtil = 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := engine.DefaultRunConfig(engine.Inflate)
			tt.mutate(&c)
			if err := c.Validate(); !errors.Is(err, sim.ErrInvalid) {
				t.Fatalf("Validate = %v, want ErrInvalid", err)
			}
		})
	}
	c := engine.DefaultRunConfig(engine.Replay)
	if err := c.Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	// A step refused for the marks it makes says the smallest step the
	// target allows.
	c = engine.DefaultRunConfig(engine.Inflate)
	c.InflateStep = 1e-300
	if err := c.Validate(); !errors.Is(err, sim.ErrInvalid) || !strings.Contains(err.Error(), "inflate step 1e-300 makes more than 100000 curve marks up to the target 1.3: want a step of at least 1.3e-05") {
		t.Fatalf("Validate = %v, want ErrInvalid naming the smallest step", err)
	}
	// At the default target 1.3: a step of 1e-5 makes 130,000 marks (too
	// many), 1.4e-5 makes 92,858, 1e-4 13,001.
	for _, tc := range []struct {
		step float64
		ok   bool
	}{{1e-5, false}, {1.4e-5, true}, {1e-4, true}, {0.01, true}} {
		c.InflateStep = tc.step
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("step %v: Validate = %v, want ok %v", tc.step, err, tc.ok)
		}
	}
}

func TestReplayNeedsTimes(t *testing.T) {
	c := &sim.Cluster{Nodes: []sim.NodeSpec{{Name: "n", CPU: 1000, Memory: 1000, Arch: sim.ArchAMD64}}}
	env, err := sim.NewEnv(c, &sim.Workload{Pods: []sim.PodSpec{{Name: "p", CPU: 1}}, Untimed: true}, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := baseline.Lookup(baseline.BestFit)
	if _, err := engine.Run(context.Background(), env, f, engine.DefaultRunConfig(engine.Replay)); !errors.Is(err, sim.ErrInvalid) {
		t.Fatalf("replay of an untimed workload: %v, want ErrInvalid", err)
	}
}

// Replay over the longest allowed trace (317 years) with a pod that never
// fits finishes fast: time advances in closed form, not hour by hour.
func TestReplayLongTraceIsFast(t *testing.T) {
	c := &sim.Cluster{Nodes: []sim.NodeSpec{{Name: "n", CPU: 1000, Memory: 1000, Arch: sim.ArchAMD64}}}
	w := &sim.Workload{Pods: []sim.PodSpec{
		{Name: "long", CPU: 500, Memory: 1, Create: 0, Delete: sim.MaxTime},
		{Name: "late", CPU: 600, Memory: 1, Create: sim.MaxTime - 1, Delete: sim.MaxTime},
		{Name: "never", CPU: 600, Memory: 1, Create: 10, Delete: sim.NoDeletion},
	}}
	env, err := sim.NewEnv(c, w, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := baseline.Lookup(baseline.BestFit)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := engine.Run(ctx, env, f, engine.DefaultRunConfig(engine.Replay))
	if err != nil {
		t.Fatal(err)
	}
	// IDs follow arrival: long (t=0), never (t=10), late (t=MaxTime-1).
	// long takes 500 of 1000; never (600) and late (600) wait. At MaxTime
	// long leaves: the retry places never (first in line), late still does
	// not fit (400 free) and its deadline, MaxTime, makes it fail.
	m := res.Measures
	if m["pods_placed"] != 2 || m["pods_pending"] != 0 || m["pods_failed"] != 1 {
		t.Errorf("placed %v pending %v failed %v, want 2, 0, 1", m["pods_placed"], m["pods_pending"], m["pods_failed"])
	}
	// Only long runs for a while: 0.5 core x usage x 8 W/core for MaxTime
	// seconds at the default 475 g/kWh.
	want := 500 * env.Pods[0].Usage / 1000 * 8 * float64(sim.MaxTime) / 3600 / 1000 * sim.DefaultCarbonIntensity
	if got := m["carbon_g"]; math.Abs(got-want) > 1e-6*want {
		t.Errorf("carbon_g = %v, want %v", got, want)
	}
	// one curve, one intensity, whatever ran
	if got := m["carbon_g_per_kwh"]; math.Abs(got-sim.DefaultCarbonIntensity) > 1e-9*sim.DefaultCarbonIntensity {
		t.Errorf("carbon_g_per_kwh = %v, want the flat curve's %v", got, sim.DefaultCarbonIntensity)
	}
}

// carbon_g_per_kwh is the energy-weighted intensity of where and when
// placed work ran: it does not grow with the amount of work placed.
func TestCarbonIntensityOfPlacedWork(t *testing.T) {
	const h = 3600
	cluster := func(nodes ...string) *sim.Cluster {
		c := &sim.Cluster{
			Zones:       []sim.Zone{{Name: "clean"}, {Name: "dirty"}},
			CarbonZones: []sim.CarbonZone{{Name: "clean", Curve: []float64{100, 300}}, {Name: "dirty", Curve: []float64{700}}},
		}
		for _, z := range nodes {
			c.Nodes = append(c.Nodes, sim.NodeSpec{Name: "n-" + z, CPU: 1000, Memory: 1000, Arch: sim.ArchAMD64, Zone: z})
		}
		return c
	}
	pod := func(name string, create, del int64) sim.PodSpec {
		// one usage for all: equal power (DefaultUsage differs by name)
		return sim.PodSpec{Name: name, CPU: 600, Memory: 1, Create: create, Delete: del, CPUUsage: 0.5}
	}
	cases := []struct {
		name  string
		nodes []string
		pods  []sim.PodSpec
		want  float64
	}{
		// the clean grid's two hours, equally long: (100 + 300) / 2
		{"two hours of one curve", []string{"clean"}, []sim.PodSpec{pod("a", 0, 2*h)}, 200},
		// its first hour only
		{"the clean hour", []string{"clean"}, []sim.PodSpec{pod("a", 0, h)}, 100},
		// three equal pods half an hour each, two in hour 0 (100), one in
		// hour 1 (300): (100 + 100 + 300) / 3
		{"energy-weighted hours", []string{"clean"}, []sim.PodSpec{pod("a", 0, h/2), pod("b", h/2, h), pod("c", h, h+h/2)}, 500.0 / 3},
		// two equal pods, one per node (600 of 1000 each), two hours: the
		// clean zone's 200 and the dirty one's 700, equally weighted
		{"two zones", []string{"clean", "dirty"}, []sim.PodSpec{pod("a", 0, 2*h), pod("b", 0, 2*h)}, 450},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, err := sim.NewEnv(cluster(c.nodes...), &sim.Workload{Pods: c.pods}, sim.EnvOptions{})
			if err != nil {
				t.Fatal(err)
			}
			f, _ := baseline.Lookup(baseline.BestFit)
			res, err := engine.Run(context.Background(), env, f, engine.DefaultRunConfig(engine.Replay))
			if err != nil {
				t.Fatal(err)
			}
			if res.Measures["pods_placed"] != float64(len(c.pods)) {
				t.Fatalf("placed %v of %d pods", res.Measures["pods_placed"], len(c.pods))
			}
			if got := res.Measures["carbon_g_per_kwh"]; math.Abs(got-c.want) > 1e-9*c.want {
				t.Errorf("carbon_g_per_kwh = %v, want %v (carbon_g %v)", got, c.want, res.Measures["carbon_g"])
			}
		})
	}
}

func TestInflateRefusesUnboundedRuns(t *testing.T) {
	c := &sim.Cluster{Nodes: []sim.NodeSpec{{Name: "n", CPU: sim.MaxQuantity, Memory: 1000, Arch: sim.ArchAMD64}}}
	env, err := sim.NewEnv(c, &sim.Workload{Pods: []sim.PodSpec{{Name: "tiny", CPU: 1, Memory: 0}}}, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := baseline.Lookup(baseline.BestFit)
	_, err = engine.Run(context.Background(), env, f, engine.DefaultRunConfig(engine.Inflate))
	if !errors.Is(err, sim.ErrInvalid) {
		t.Fatalf("inflating 1e12 milli-CPU with 1-milli pods: %v, want ErrInvalid", err)
	}
}

func TestCompareOrderErrorsAndProgress(t *testing.T) {
	env := randomEnv(t, 21)
	var fs []sim.Factory
	for _, n := range []string{baseline.FGD, baseline.BestFit, baseline.RandomFit} {
		f, _ := baseline.Lookup(n)
		fs = append(fs, f)
	}
	var last, total int64
	res, err := engine.Compare(context.Background(), env, fs, engine.CompareConfig{
		Run: engine.DefaultRunConfig(engine.Inflate), Seeds: []uint64{4, 5}, Parallel: 3,
		Progress: func(done, tot int64) {
			if done < last || done > tot {
				t.Errorf("progress %d/%d after %d", done, tot, last)
			}
			last, total = done, tot
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Policy != fs[i/2].Name || r.Seed != []uint64{4, 5}[i%2] {
			t.Errorf("result %d is %s seed %d", i, r.Policy, r.Seed)
		}
	}
	if last != total || total != 6000 {
		t.Errorf("progress ended at %d/%d, want 6000/6000", last, total)
	}
	bad := sim.Factory{Name: "broken", New: func(*sim.Env) (sim.Policy, error) { return nil, errors.New("no weights") }}
	if _, err := engine.Compare(context.Background(), env, append(fs, bad), engine.CompareConfig{Run: engine.DefaultRunConfig(engine.Inflate), Seeds: []uint64{1}}); err == nil || !strings.Contains(err.Error(), "broken seed 1: new policy broken: no weights") {
		t.Errorf("a failing policy: %v", err)
	}
	if _, err := engine.Compare(context.Background(), env, nil, engine.CompareConfig{Run: engine.DefaultRunConfig(engine.Inflate), Seeds: []uint64{1}}); !errors.Is(err, sim.ErrInvalid) {
		t.Errorf("no policies: %v", err)
	}
}

func TestReplayHonoursContext(t *testing.T) {
	env := randomEnv(t, 8)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f, _ := baseline.Lookup(baseline.BestFit)
	if _, err := engine.Run(ctx, env, f, engine.DefaultRunConfig(engine.Replay)); !errors.Is(err, context.Canceled) {
		t.Fatalf("replay error = %v, want context.Canceled", err)
	}
}

// Two failures, one of fragmentation and one of full nodes, and one node
// in three at the latency proxy's cap. Three nodes of 4 cores; at t=0 a
// fills n0 (4 cores) and b and e take 3 cores of n1 and n2 (first-fit by
// a constant score keeps the order). At t=10 c (2 cores) finds 1 + 1 free:
// room in aggregate, no node; d (2.5 cores) finds 2 free: no room. Both
// wait until t=20 and fail. Every pod uses what it requests, so n0 runs at
// rho 1 (capped at 0.95) and n1, n2 at 0.75: a third of the pod samples.
func TestFailuresWithRoomAndCappedLatency(t *testing.T) {
	c := &sim.Cluster{}
	for i := range 3 {
		c.Nodes = append(c.Nodes, sim.NodeSpec{Name: fmt.Sprintf("n%d", i), CPU: 4000, Memory: 1000, Arch: sim.ArchAMD64})
	}
	pod := func(name string, cpu, create, del int64) sim.PodSpec {
		return sim.PodSpec{Name: name, CPU: cpu, Memory: 1, CPUUsage: 1, Create: create, Delete: del}
	}
	w := &sim.Workload{Pods: []sim.PodSpec{
		pod("a", 4000, 0, 30), pod("b", 3000, 0, 30), pod("e", 3000, 0, 30),
		pod("c", 2000, 10, 20), pod("d", 2500, 10, 20),
	}}
	env, err := sim.NewEnv(c, w, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := factoryOf(constPolicy{score: func(n int32) float64 { return -float64(n) }})
	res, err := engine.Run(context.Background(), env, first, engine.DefaultRunConfig(engine.Replay))
	if err != nil {
		t.Fatal(err)
	}
	m := res.Measures
	if m["pods_failed"] != 2 || m["failures_with_room"] != 0.5 {
		t.Errorf("failed %v, with room %v; want 2 and 0.5", m["pods_failed"], m["failures_with_room"])
	}
	if got := m["latency_capped_share"]; math.Abs(got-1.0/3) > 1e-12 {
		t.Errorf("latency_capped_share = %v, want 1/3", got)
	}
}

// Which pods fail: one node of 4 cores, filled by a from 0 to 30. At
// t=10 three 1-core multi-arch pods (x1-x3, one class), two 0.5-core pods
// with the node selector site=s1 (w1, w2: one class, as constrained pods
// group by the selector's values, not one shape each), a 2-core amd64
// pod (y) and a 1-core pod of service api and load profile web (v: x's
// requests, its own class)
// find it full and fail at t=20 (no room anywhere); x4, of x's
// class, arrives at 40 on the empty node and is placed. Then
// MaxFailedClasses+2 pods of distinct classes (150, 250, ... milli-CPU)
// fail behind a second filler (a's class): the list keeps the
// MaxFailedClasses with the most failures, most first, ties by class
// (the order of first appearance).
func TestFailuresByClass(t *testing.T) {
	c := &sim.Cluster{
		Nodes:        []sim.NodeSpec{{Name: "n0", CPU: 4000, Memory: 1000, Arch: sim.ArchAMD64, Labels: map[string]string{"site": "s1"}}},
		LoadProfiles: []nodeload.Profile{{Name: "web"}},
	}
	pod := func(name string, cpu, create, del int64) sim.PodSpec {
		return sim.PodSpec{Name: name, CPU: cpu, Memory: 1, CPUUsage: 1, Create: create, Delete: del}
	}
	y := pod("y", 2000, 10, 20)
	y.Arch = sim.ArchAMD64
	w1, w2 := pod("w1", 500, 10, 20), pod("w2", 500, 10, 20)
	w1.NodeSelector, w2.NodeSelector = map[string]string{"site": "s1"}, map[string]string{"site": "s1"}
	v := pod("v", 1000, 10, 20)
	v.Service, v.Profile = "api", "web"
	w := &sim.Workload{Pods: []sim.PodSpec{
		pod("a", 4000, 0, 30), pod("x1", 1000, 10, 20), pod("x2", 1000, 10, 20), pod("x3", 1000, 10, 20), w1, w2, y, v,
		pod("x4", 1000, 40, 50), pod("filler", 4000, 60, 100),
	}}
	nz := engine.MaxFailedClasses + 2
	for i := range nz {
		w.Pods = append(w.Pods, pod(fmt.Sprintf("z%d", i), int64(100*(i+1)+50), 70, 80))
	}
	if _, off := replayFlat(t, c, w, false); off.Failures != nil {
		t.Errorf("failed classes counted without RunConfig.FailedClasses: %+v", off.Failures)
	}
	_, res := replayFlat(t, c, w, true)
	if got := res.Measures["pods_failed"]; got != float64(7+nz) {
		t.Fatalf("pods_failed = %v, want %d", got, 7+nz)
	}
	f := res.Failures
	if len(f) != engine.MaxFailedClasses {
		t.Fatalf("%d classes listed, want %d: %+v", len(f), engine.MaxFailedClasses, f)
	}
	// classes: a 0, x 1, w 2, y 3, v 4 (filler is a's), z0.. 5..
	want := []engine.FailedClass{
		{Class: 1, Example: "x1", CPU: 1000, Memory: 1, Arch: "any", Arrived: 4, Failed: 3},
		{Class: 2, Example: "w1", CPU: 500, Memory: 1, Arch: "any", NodeSelector: "site=s1", Arrived: 2, Failed: 2},
		{Class: 3, Example: "y", CPU: 2000, Memory: 1, Arch: "amd64", Arrived: 1, Failed: 1},
		{Class: 4, Example: "v", Service: "api", Profile: "web", CPU: 1000, Memory: 1, Arch: "any", Arrived: 1, Failed: 1},
	}
	for i, wc := range want {
		if !reflect.DeepEqual(f[i], wc) {
			t.Errorf("entry %d = %+v, want %+v", i, f[i], wc)
		}
	}
	// the rest fail once each: the first z's; the last six are left out
	for i, s := range f[len(want):] {
		if want := fmt.Sprintf("z%d", i); s.Example != want || s.Class != int32(5+i) || s.Failed != 1 || s.Arrived != 1 {
			t.Errorf("entry %d = %+v, want %s failed once", i+4, s, want)
		}
	}
}
