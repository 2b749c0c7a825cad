package sim

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// tinyCluster is two GPU nodes and one CPU node in two zones.
func tinyCluster() *Cluster {
	return &Cluster{
		Name:  "tiny",
		Zones: []Zone{{Name: "a"}, {Name: "b"}},
		Nodes: []NodeSpec{
			{Name: "g8", CPU: 96000, Memory: 393216, GPUs: 8, GPUModel: "G2", Arch: ArchAMD64, Zone: "a"},
			{Name: "g2", CPU: 64000, Memory: 262144, GPUs: 2, GPUModel: "T4", Arch: ArchAMD64, Zone: "b"},
			{Name: "c0", CPU: 32000, Memory: 131072, Arch: ArchARM64, Zone: "b"},
		},
	}
}

func pod(name string, cpu, mem int64, gpus int, milli int64) PodSpec {
	return PodSpec{Name: name, CPU: cpu, Memory: mem, GPUs: gpus, GPUMilli: milli, Delete: NoDeletion}
}

func TestNewEnvErrors(t *testing.T) {
	tests := []struct {
		name    string
		cluster func(*Cluster)
		wl      func(*Workload)
		want    error
		msg     string
	}{
		{"unknown zone", func(c *Cluster) { c.Nodes[0].Zone = "mars" }, nil, ErrUnknownRef, `zone "mars"`},
		{"unknown node model", func(c *Cluster) { c.Nodes[0].GPUModel = "H100" }, nil, ErrUnknownModel, `"H100"`},
		{"duplicate node", func(c *Cluster) { c.Nodes[1].Name = "g8" }, nil, ErrDuplicate, "node g8"},
		{"duplicate zone", func(c *Cluster) { c.Zones[1].Name = "a" }, nil, ErrDuplicate, "zone a"},
		{"unknown carbon zone", func(c *Cluster) { c.Zones[0].CarbonZone = "grid" }, nil, ErrUnknownRef, `carbon zone "grid"`},
		{"NaN carbon", func(c *Cluster) { c.CarbonZones = []CarbonZone{{Name: "a", Curve: []float64{math.NaN()}}} }, nil, ErrInvalid, "curve[0]"},
		{"pod unknown spec", nil, func(w *Workload) { w.Pods[0].GPUSpec = []string{"H100"} }, ErrUnknownModel, "gpu_spec"},
		{"duplicate pod", nil, func(w *Workload) { w.Pods[1].Name = w.Pods[0].Name }, ErrDuplicate, "pod p0"},
		{"dependency unknown service", nil, func(w *Workload) {
			w.Dependencies = []Dependency{{From: "web", To: "db", CallsPerSecond: 1}}
		}, ErrUnknownRef, `service "db"`},
		{"dependency negative rate", nil, func(w *Workload) {
			w.Pods[1].Service = "db"
			w.Dependencies = []Dependency{{From: "web", To: "db", CallsPerSecond: -1}}
		}, ErrInvalid, "calls per second"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tinyCluster()
			w := &Workload{Pods: []PodSpec{pod("p0", 1000, 1024, 1, 500), pod("p1", 1000, 1024, 0, 0)}}
			w.Pods[0].Service = "web"
			if tt.cluster != nil {
				tt.cluster(c)
			}
			if tt.wl != nil {
				tt.wl(w)
			}
			_, err := NewEnv(c, w, EnvOptions{})
			if !errors.Is(err, tt.want) {
				t.Fatalf("NewEnv error = %v, want %v", err, tt.want)
			}
			checkErr(t, err, tt.msg)
		})
	}
}

func TestNewEnvCompiles(t *testing.T) {
	w := &Workload{
		Pods: []PodSpec{
			pod("a", 1000, 1024, 1, 500),
			pod("b", 1000, 1024, 1, 500), // same shape as a
			{Name: "c", CPU: 2000, Memory: 2048, GPUs: 1, GPUMilli: 1000, GPUSpec: []string{"T4", "G2", "T4"}, Delete: NoDeletion},
		},
	}
	env, err := NewEnv(tinyCluster(), w, EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Capacity: 96+64+32 cores, 8+2 GPUs.
	if want := (Resources{CPU: 192000, Mem: 786432, GPU: 10000}); env.Capacity != want {
		t.Errorf("Capacity = %+v, want %+v", env.Capacity, want)
	}
	if want := (Resources{CPU: 96000, Mem: 393216, GPU: 8000}); env.MaxNode != want {
		t.Errorf("MaxNode = %+v, want %+v", env.MaxNode, want)
	}
	if env.Shapes != 2 || env.Pods[0].Shape != env.Pods[1].Shape || env.Pods[2].Shape == env.Pods[0].Shape {
		t.Errorf("shapes = %d (%d %d %d), want 2 with a and b sharing one", env.Shapes, env.Pods[0].Shape, env.Pods[1].Shape, env.Pods[2].Shape)
	}
	g2, _ := env.ModelIndex("G2")
	t4, _ := env.ModelIndex("T4")
	if want := uint64(1)<<g2 | uint64(1)<<t4; env.Pods[2].GPUMask != want {
		t.Errorf("mask = %b, want %b", env.Pods[2].GPUMask, want)
	}
	if env.Nodes[2].Model != -1 || env.Nodes[0].Model != int32(g2) {
		t.Errorf("node models = %d, %d", env.Nodes[0].Model, env.Nodes[2].Model)
	}
	// Zones without curves get the default flat one.
	if got := env.CarbonAt(env.Nodes[0].CarbonZone, 7200); got != DefaultCarbonIntensity {
		t.Errorf("CarbonAt = %v, want %v", got, float64(DefaultCarbonIntensity))
	}
	if !env.GPUPrimary {
		t.Error("GPUPrimary = false for a workload of GPU pods")
	}
}

func TestCarbonAtCycles(t *testing.T) {
	c := tinyCluster()
	c.CarbonZones = []CarbonZone{{Name: "a", Curve: []float64{100, 200, 300}}, {Name: "b", Curve: []float64{5}}}
	env, err := NewEnv(c, &Workload{Pods: []PodSpec{pod("p", 1, 1, 0, 0)}}, EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Hour h uses curve[h % 3]: 3599 s is hour 0, 3600 s hour 1, 10800 s hour 3 -> 0.
	for _, tt := range []struct {
		t    int64
		want float64
	}{{0, 100}, {3599, 100}, {3600, 200}, {7200, 300}, {10800, 100}} {
		if got := env.CarbonAt(0, tt.t); got != tt.want {
			t.Errorf("CarbonAt(%d) = %v, want %v", tt.t, got, tt.want)
		}
	}
	if got := env.CarbonMean(0); got != 200 {
		t.Errorf("CarbonMean = %v, want 200", got)
	}
}

func TestTargetWorkload(t *testing.T) {
	// 5 pods of A, 3 of B, 2 of C.
	var pods []Pod
	add := func(n int, p Pod) {
		for range n {
			pods = append(pods, p)
		}
	}
	add(5, Pod{CPU: 4000, GPUs: 1, GPUMilli: 500, Mem: 100})
	add(3, Pod{CPU: 8000, GPUs: 2, GPUMilli: 1000, Mem: 200})
	add(2, Pod{CPU: 2000, Mem: 300})

	all := NewTargetWorkload(pods, 1)
	if len(all.Classes) != 3 {
		t.Fatalf("classes = %d, want 3", len(all.Classes))
	}
	for i, want := range []float64{0.5, 0.3, 0.2} {
		if math.Abs(all.Classes[i].P-want) > 1e-12 {
			t.Errorf("P[%d] = %v, want %v", i, all.Classes[i].P, want)
		}
	}
	// Threshold 0.7: A brings the cumulative count to 5 (< 7), B to 8
	// (>= 7), so C is cut and A, B renormalise to 5/8 and 3/8.
	cut := NewTargetWorkload(pods, 0.7)
	if len(cut.Classes) != 2 || math.Abs(cut.Classes[0].P-5.0/8) > 1e-12 || math.Abs(cut.Classes[1].P-3.0/8) > 1e-12 {
		t.Errorf("cut classes = %+v, want A 5/8, B 3/8", cut.Classes)
	}

	tests := []struct {
		name    string
		cpuFree int64
		model   int32
		gpus    []int64
		want    float64
	}{
		// free = 1000+300+600+0 = 1900.
		// A (p .5) fits (two GPUs >= 500, cpu 10000 >= 4000): fragments are
		//   the GPUs below 500: 300 + 0 -> .5*300 = 150.
		// B (p .3) needs two whole GPUs, only one: all 1900 -> 570.
		// C (p .2) needs no GPU: all 1900 -> 380.   Total 1100.
		{"mixed", 10000, 0, []int64{1000, 300, 600, 0}, 1100},
		// Same GPUs, cpu 3000 < A's 4000: A lacks CPU -> .5*1900 = 950;
		// B 570, C 380. Total 1900 (everything is a fragment).
		{"short of cpu", 3000, 0, []int64{1000, 300, 600, 0}, 1900},
		// Two idle GPUs, plenty of CPU: A fits, no device below 500 -> 0;
		// B fits -> 0; C -> .2*2000 = 400.
		{"idle pair", 64000, 0, []int64{1000, 1000}, 400},
		{"no free gpu", 64000, 0, []int64{0, 0}, 0},
		{"no gpus", 64000, -1, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := all.GPUFrag(tt.cpuFree, tt.model, tt.gpus); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("GPUFrag = %v, want %v", got, tt.want)
			}
		})
	}

	// A model mismatch makes the node useless to A: with A accepting only
	// model 1, the "mixed" node of model 0 has A's share all fragmented:
	// .5*1900 + 570 + 380 = 1900.
	masked := NewTargetWorkload([]Pod{{CPU: 4000, GPUs: 1, GPUMilli: 500, GPUMask: 0b10}}, 1)
	if got := masked.GPUFrag(10000, 0, []int64{1000, 300, 600, 0}); got != 1900 {
		t.Errorf("masked GPUFrag = %v, want 1900", got)
	}

	// CPU fragmentation: free CPU 3000, memory 1000. A (4000) and B (8000)
	// do not fit -> (.5+.3)*3000 = 2400; C (2000 cpu, 300 mem) fits.
	if got := all.CPUFrag(3000, 1000); math.Abs(got-2400) > 1e-9 {
		t.Errorf("CPUFrag = %v, want 2400", got)
	}
	// With 250 MiB free, C does not fit either (300 MiB): all 3000.
	if got := all.CPUFrag(3000, 250); math.Abs(got-3000) > 1e-9 {
		t.Errorf("CPUFrag low memory = %v, want 3000", got)
	}
}

// The memoised fragmentation must equal the direct computation on every
// state, whatever the device order.
func TestGPUFragMemoMatchesDirect(t *testing.T) {
	var pods []Pod
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		p := Pod{CPU: int64(rng.IntN(8)+1) * 1000, GPUs: int32(rng.IntN(3))}
		if p.GPUs == 1 {
			p.GPUMilli = int64(rng.IntN(10)+1) * 100
		} else if p.GPUs > 1 {
			p.GPUMilli = 1000
		}
		if i%7 == 0 {
			p.GPUMask = 0b1
		}
		pods = append(pods, p)
	}
	env := &Env{Target: NewTargetWorkload(pods, 0.95)}
	st := &State{Env: env, memo: map[fragKey]float64{}}
	for range 5000 {
		n := rng.IntN(9)
		gpus := make([]int64, n)
		for g := range gpus {
			gpus[g] = int64(rng.IntN(11)) * 100
		}
		cpu := int64(rng.IntN(10000))
		model := int32(rng.IntN(2))
		want := env.Target.GPUFrag(cpu, model, gpus)
		if got := st.GPUFragOf(cpu, model, gpus); math.Abs(got-want) > 1e-9 {
			t.Fatalf("GPUFragOf(%d, %d, %v) = %v, want %v", cpu, model, gpus, got, want)
		}
	}
}

// PartnersOf picks the set computed with the asked weights: the current
// ones first, then the previous ones, else none.
func TestPartnersOf(t *testing.T) {
	cur := [][]Partner{{{Service: 1, P: 0.5}}}
	prev := [][]Partner{{{Service: 1, P: 0.25}}}
	e := &Env{Partners: cur, PartnersEncoder: "sage-b", PreviousPartners: prev, PreviousEncoder: "sage-a"}
	for _, c := range []struct {
		encoder string
		want    [][]Partner
	}{{"sage-b", cur}, {"sage-a", prev}, {"sage-c", nil}, {"", nil}} {
		if got := e.PartnersOf(c.encoder); (got == nil) != (c.want == nil) || got != nil && &got[0] != &c.want[0] {
			t.Errorf("PartnersOf(%q) = %v, want %v", c.encoder, got, c.want)
		}
	}
	if got := (&Env{}).PartnersOf(""); got != nil {
		t.Errorf("an environment without partners gives %v", got)
	}
}
