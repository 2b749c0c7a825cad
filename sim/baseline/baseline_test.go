package baseline

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/edgesched/edgesched/sim"
)

// fixture is a small cluster whose largest node (n0: 128 cores, 8 GPUs) sets
// the normalisation maxima of the FGD paper's artifact (128000 milli-CPU,
// 8000 milli-GPU).
type fixture struct {
	st *sim.State
}

func newFixture(t *testing.T, workload ...sim.PodSpec) *fixture {
	t.Helper()
	c := &sim.Cluster{
		Name: "fixture",
		Nodes: []sim.NodeSpec{
			{Name: "n0", CPU: 128000, Memory: 524288, GPUs: 8, GPUModel: "G2", Arch: sim.ArchAMD64},
			{Name: "n1", CPU: 32000, Memory: 65536, GPUs: 2, GPUModel: "T4", Arch: sim.ArchAMD64},
			{Name: "n2", CPU: 16000, Memory: 32768, Arch: sim.ArchAMD64},
			{Name: "n3", CPU: 32000, Memory: 65536, GPUs: 2, GPUModel: "T4", Arch: sim.ArchAMD64},
			{Name: "n4", CPU: 32000, Memory: 65536, GPUs: 2, GPUModel: "T4", Arch: sim.ArchAMD64},
		},
	}
	if len(workload) == 0 {
		workload = []sim.PodSpec{{Name: "w", CPU: 1000, Memory: 1024, Delete: sim.NoDeletion}}
	}
	env, err := sim.NewEnv(c, &sim.Workload{Pods: workload}, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{st: sim.NewState(env)}
}

// occupy binds a helper pod (not part of the workload, so the target
// workload is unchanged) to node n on the given devices.
func (f *fixture) occupy(t *testing.T, n int, p sim.Pod, gpus ...int) {
	t.Helper()
	p.Service = -1
	id, err := f.st.AddPod(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.Bind(id, n, gpus); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) scores(t *testing.T, pol sim.Policy, p sim.Pod, nodes ...int32) []float64 {
	t.Helper()
	out := make([]float64, len(nodes))
	pol.Score(f.st, &p, nodes, out)
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func expectScores(t *testing.T, got, want []float64) {
	t.Helper()
	for i := range want {
		if !near(got[i], want[i]) {
			t.Fatalf("scores = %v, want %v", got, want)
		}
	}
}

func TestBestFit(t *testing.T) {
	f := newFixture(t)
	// n1: 12000 cpu and 1400 milli-GPU used: free 20000 cpu, GPUs [1000, 600].
	f.occupy(t, 1, sim.Pod{CPU: 12000, GPUs: 1, GPUMilli: 400}, 1)
	f.occupy(t, 1, sim.Pod{GPUs: 1, GPUMilli: 1000}, 0)
	f.st.Unbind(1) // back to [1000, 600]
	p := sim.Pod{CPU: 4000, GPUs: 1, GPUMilli: 500}
	// remaining = .5 (cpuFree - 4000)/128000 + .5 (gpuFree - 500)/8000
	// n0: .5*124000/128000 + .5*7500/8000 = .484375 + .46875 = .953125 -> .046875
	// n1: .5* 16000/128000 + .5*1100/8000 = .0625   + .06875 = .13125  -> .86875
	expectScores(t, f.scores(t, bestFit{}, p, 0, 1), []float64{0.046875, 0.86875})
}

func TestDotProduct(t *testing.T) {
	f := newFixture(t)
	f.occupy(t, 1, sim.Pod{CPU: 12000, GPUs: 1, GPUMilli: 400}, 1)
	p := sim.Pod{CPU: 4000, GPUs: 1, GPUMilli: 500}
	// dot = (cpuFree/128000 * 4000/128000 + gpuFree/8000 * 500/8000) / 2
	// n0: (1*.03125 + 1*.0625)/2                   = .046875       -> .953125
	// n1: (20000/128000*.03125 + 1600/8000*.0625)/2 = .00869140625 -> .99130859375
	expectScores(t, f.scores(t, dotProduct{}, p, 0, 1), []float64{0.953125, 0.99130859375})
}

func TestGPUPacking(t *testing.T) {
	f := newFixture(t)
	f.occupy(t, 1, sim.Pod{GPUs: 1, GPUMilli: 400}, 1)  // n1: [1000, 600]
	f.occupy(t, 3, sim.Pod{GPUs: 1, GPUMilli: 1000}, 1) // n3: [1000, 0]
	tests := []struct {
		name string
		pod  sim.Pod
		node int32
		want float64
	}{
		// idle node (case 3): max(100/3 - 8, 8) = max(33 - 8, 8) = 25
		{"share on idle 8-GPU node", sim.Pod{GPUs: 1, GPUMilli: 500}, 0, 25},
		// shared device (case 1): best fit is device 1 (600 free = 60%):
		// 100 - 60/10 = 94 (>= 50)
		{"share on shared device", sim.Pod{GPUs: 1, GPUMilli: 500}, 1, 94},
		// only a full device fits on a used node (case 2): 50 - 1 = 49
		{"share on used node's free device", sim.Pod{GPUs: 1, GPUMilli: 500}, 3, 49},
		// idle 2-GPU node (case 3): max(33 - 2, 2) = 31
		{"share on idle 2-GPU node", sim.Pod{GPUs: 1, GPUMilli: 500}, 4, 31},
		// CPU-only pods score 0 everywhere
		{"cpu pod", sim.Pod{CPU: 1000}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectScores(t, f.scores(t, gpuPacking{}, tt.pod, tt.node), []float64{tt.want})
		})
	}
	// Whole GPUs on n0 with one device shared: case 2, 50 - 2 = 48.
	f.occupy(t, 0, sim.Pod{GPUs: 1, GPUMilli: 600}, 0)
	expectScores(t, f.scores(t, gpuPacking{}, sim.Pod{GPUs: 2, GPUMilli: 1000}, 0), []float64{48})
}

func TestGPUClustering(t *testing.T) {
	f := newFixture(t)
	f.occupy(t, 1, sim.Pod{GPUs: 1, GPUMilli: 300}, 0)  // n1: share pods only, free [700, 1000] = 1700
	f.occupy(t, 3, sim.Pod{GPUs: 1, GPUMilli: 300}, 0)  // n3: share and 1-GPU pods,
	f.occupy(t, 3, sim.Pod{GPUs: 1, GPUMilli: 1000}, 1) //     free [700, 0] = 700
	f.occupy(t, 4, sim.Pod{GPUs: 2, GPUMilli: 1000}, 0, 1)
	share := sim.Pod{GPUs: 1, GPUMilli: 500}
	// fill = 100/4 * (8000 - free) / 8000 in integers
	// n0 idle:                fill 25*0/8000 = 0,    + 25 (idle band)        = 25
	// n1 only share pods:     fill 25*6300/8000 = 19 + 75 (same type only)    = 94
	// n3 share + 1-gpu pods:  fill 25*7300/8000 = 22 + 50 (same among others) = 72
	// n4 only 2-gpu pods:     fill 25*8000/8000 = 25 + 0 (other types)        = 25
	expectScores(t, f.scores(t, gpuClustering{}, share, 0, 1, 3, 4), []float64{25, 94, 72, 25})
	// A 2-GPU pod: n4 has only its type; fill 25 + 75 = 100. n1 has other
	// types only: 19.
	expectScores(t, f.scores(t, gpuClustering{}, sim.Pod{GPUs: 2, GPUMilli: 1000}, 4, 1), []float64{100, 19})
	expectScores(t, f.scores(t, gpuClustering{}, sim.Pod{CPU: 100}, 1), []float64{0})
}

func TestK8sDefault(t *testing.T) {
	f := newFixture(t)
	f.occupy(t, 2, sim.Pod{CPU: 4000, Mem: 8192}) // n2: 16 cores, 32 GiB
	tests := []struct {
		name string
		pod  sim.Pod
		node int32
		want float64
	}{
		// n2 with the pod: cpu 8000/16000, mem 16384/32768.
		// least: cpu (16000-8000)*100/16000 = 50, mem 50 -> 50
		// balanced: fractions .5 and .5, std 0 -> 100.   total 150
		{"balanced node", sim.Pod{CPU: 4000, Mem: 8192}, 2, 150},
		// n1 empty, pod 4000 cpu / 1024 MiB on 32000 / 65536:
		// least: cpu 28000*100/32000 = 87 (87.5), mem 64512*100/65536 = 98 (98.4) -> (87+98)/2 = 92
		// balanced: .125 vs .015625, std .0546875 -> int(94.53) = 94.   total 186
		{"unbalanced pod", sim.Pod{CPU: 4000, Mem: 1024}, 1, 186},
		// A pod without requests counts 100m / 200 MiB in least; balanced
		// skips it (0): cpu 31900*100/32000 = 99 (99.69), mem 65336*100/65536 = 99 -> 99
		{"best effort", sim.Pod{}, 1, 99},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectScores(t, f.scores(t, k8sDefault{}, tt.pod, tt.node), []float64{tt.want})
		})
	}
}

func TestLeastRequestedAndBalanced(t *testing.T) {
	if got := LeastRequestedScore(5, 0); got != 0 {
		t.Errorf("zero capacity: %d", got)
	}
	if got := LeastRequestedScore(11, 10); got != 0 {
		t.Errorf("over capacity: %d", got)
	}
	// fractions capped at 1: cpu 2.0 -> 1, mem .5 -> std .25 -> 75
	if got := BalancedScore(200, 100, 50, 100); got != 75 {
		t.Errorf("BalancedScore capped = %d, want 75", got)
	}
}

func TestTargetLoadPacking(t *testing.T) {
	tests := []struct {
		name               string
		used, pred, capCPU float64
		want               int64
	}{
		// U = 100*(4000+3000)/16000 = 43.75 > 40: round(40*(100-43.75)/60) = round(37.5) = 38
		{"above target", 4000, 3000, 16000, 38},
		// U = 25 <= 40: round(60*25/40 + 40) = round(77.5) = 78
		{"below target", 1000, 3000, 16000, 78},
		// U = 106.25 > 100: 0
		{"overloaded", 14000, 3000, 16000, 0},
		// U = 40 exactly: round(60*40/40 + 40) = 100
		{"at target", 3400, 3000, 16000, 100},
		{"no capacity", 0, 1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TLPScore(tt.used, tt.pred, tt.capCPU, 40); got != tt.want {
				t.Errorf("TLPScore = %d, want %d", got, tt.want)
			}
		})
	}
	// Predicted use: a 2000m request -> 3000 (x1.5); a 1000m limit -> 1000;
	// no request -> the 1000m default. On n2 (16000, nothing used):
	// 3000 -> U 18.75 -> round(60*18.75/40+40) = round(68.125) = 68
	// 1000 -> U 6.25  -> round(49.375) = 49
	pol, err := NewTargetLoadPacking(DefaultTLPArgs())
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	expectScores(t, f.scores(t, pol, sim.Pod{CPU: 2000}, 2), []float64{68})
	expectScores(t, f.scores(t, pol, sim.Pod{CPU: 2000, CPULimit: 1000}, 2), []float64{49})
	expectScores(t, f.scores(t, pol, sim.Pod{}, 2), []float64{49})
	for _, bad := range []TLPArgs{{TargetUtilization: 0, DefaultRequestsMilli: 1, RequestsMultiplier: 1}, {TargetUtilization: 40, DefaultRequestsMilli: 0, RequestsMultiplier: 1}, {TargetUtilization: 40, DefaultRequestsMilli: 1, RequestsMultiplier: math.NaN()}} {
		if _, err := NewTargetLoadPacking(bad); err == nil {
			t.Errorf("args %+v accepted", bad)
		}
	}
}

func TestFGD(t *testing.T) {
	// Target workload: a 500 milli-GPU share pod and a whole-GPU pod, one
	// each: p = .5 each.
	f := newFixture(t,
		sim.PodSpec{Name: "share", CPU: 1000, Memory: 1, GPUs: 1, GPUMilli: 500, Delete: sim.NoDeletion},
		sim.PodSpec{Name: "whole", CPU: 1000, Memory: 1, GPUs: 1, GPUMilli: 1000, Delete: sim.NoDeletion},
	)
	f.occupy(t, 3, sim.Pod{GPUs: 1, GPUMilli: 500}, 0)  // n3 (Y): [500, 0]
	f.occupy(t, 3, sim.Pod{GPUs: 1, GPUMilli: 1000}, 1) //
	f.occupy(t, 4, sim.Pod{GPUs: 1, GPUMilli: 300}, 0)  // n4 (Z): [700, 1000]
	fgd := NewFGD(f.st.Env)
	p := f.st.Env.Pods[0] // the 500 share pod
	// n1 (X) [1000, 1000]: frag 0. After 500 on device 0 -> [500, 1000]:
	//   share class fits, no device < 500 -> 0; whole class fits, device 0
	//   (500) < 1000 -> .5*500 = 250.  delta = +250.
	// n3 (Y) [500, 0]: share fits, no fragment; whole does not fit: .5*500
	//   = 250. After -> [0, 0] = 0.  delta = -250.
	// n4 (Z) [700, 1000]: share fits, 0; whole fits, 700 < 1000 -> 350.
	//   Device 0 -> [200, 1000]: share .5*200 + whole .5*200 = 200: -150.
	//   Device 1 -> [700, 500]: share 0; whole cannot fit: .5*1200 = 600: +250.
	//   Best: device 0, delta -150.
	for _, tt := range []struct {
		node  int
		delta float64
		gpu   int
		score int64
	}{
		// score = int(100 / (1 + e^(delta/1000)))
		{1, 250, 0, 43},  // int(43.78)
		{3, -250, 0, 56}, // int(56.22)
		{4, -150, 0, 53}, // int(53.74)
	} {
		d, g := fgd.Delta(f.st, &p, tt.node)
		if !near(d, tt.delta) || g != tt.gpu {
			t.Errorf("node %d: delta %v on device %d, want %v on %d", tt.node, d, g, tt.delta, tt.gpu)
		}
		if s := FGDScore(d); s != tt.score {
			t.Errorf("node %d: FGDScore(%v) = %d, want %d", tt.node, d, s, tt.score)
		}
		if dd, s, gg := fgd.DeltaScore(f.st, &p, tt.node); dd != d || s != tt.score || gg != g {
			t.Errorf("node %d: DeltaScore = %v, %d, %d, want %v, %d, %d", tt.node, dd, s, gg, d, tt.score, g)
		}
	}
	s := f.scores(t, fgd, p, 1, 3, 4)
	if !(s[1] > s[2] && s[2] > s[0]) {
		t.Errorf("FGD order: scores %v, want n3 > n4 > n1", s)
	}
	if got := fgd.PickGPUs(f.st, &p, 4, nil); len(got) != 1 || got[0] != 0 {
		t.Errorf("PickGPUs on n4 = %v, want [0]", got)
	}
	// Equal primary scores: the fuller node wins, GPU first. A CPU pod on
	// n0 (8 idle GPUs, half its CPU used) and on n2 (no GPUs): both leave
	// GPU fragmentation unchanged (primary 50), and n2, with no free GPU,
	// counts as fuller: CPU work stays off GPU nodes.
	f.occupy(t, 0, sim.Pod{CPU: 64000})
	two := f.scores(t, fgd, sim.Pod{CPU: 1000}, 0, 2)
	if FGDScore(0) != 50 || int64(two[0]) != 50 || int64(two[1]) != 50 || two[1] <= two[0] {
		t.Errorf("cpu pod scores %v: want both primary 50 and n2 first", two)
	}
}

// The cached deltas must equal fresh computations after random changes.
func TestFGDCacheMatchesFresh(t *testing.T) {
	var wl []sim.PodSpec
	for i, milli := range []int64{200, 350, 500, 1000, 1000, 0} {
		gpus := 1
		if milli == 0 {
			gpus = 0
		}
		wl = append(wl, sim.PodSpec{Name: fmt.Sprintf("w%d", i), CPU: int64(1000 * (i + 1)), Memory: 1, GPUs: gpus, GPUMilli: milli, Delete: sim.NoDeletion})
	}
	f := newFixture(t, wl...)
	cached := NewFGD(f.st.Env)
	rng := rand.New(rand.NewPCG(7, 7))
	for step := range 300 {
		p := f.st.Env.Pods[rng.IntN(len(f.st.Env.Pods))]
		for n := range f.st.Nodes {
			if !f.st.Feasible(n, &p) {
				continue
			}
			d1, g1 := cached.Delta(f.st, &p, n)
			d2, g2 := NewFGD(f.st.Env).Delta(f.st, &p, n)
			if !near(d1, d2) || g1 != g2 {
				t.Fatalf("step %d node %d: cached (%v, %d) != fresh (%v, %d)", step, n, d1, g1, d2, g2)
			}
		}
		// place it somewhere feasible, or free a running pod
		n := rng.IntN(len(f.st.Nodes))
		if f.st.Feasible(n, &p) {
			f.occupy(t, n, p, cached.PickGPUs(f.st, &p, n, nil)...)
		} else if r := f.st.Running(); len(r) > 0 {
			if err := f.st.Unbind(r[rng.IntN(len(r))]); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestLookup(t *testing.T) {
	for _, name := range []string{"fgd", "FGD", "random", "bestfit", "k8s", "tlp", "dotprod", "gpu-clustering"} {
		if _, err := Lookup(name); err != nil {
			t.Errorf("Lookup(%q): %v", name, err)
		}
	}
	if _, err := Lookup("magic"); !errors.Is(err, ErrUnknownPolicy) {
		t.Errorf("Lookup(magic) = %v, want ErrUnknownPolicy", err)
	}
	if len(Names()) != 8 {
		t.Errorf("Names() = %v, want 8 baselines", Names())
	}
}

func TestFGDStrand(t *testing.T) {
	// Target workload: one share pod asking for 8 CPUs and half a GPU, so
	// a free GPU needs 16 CPUs beside it (16 milli-CPU per milli-GPU;
	// memory 1 MiB per 500 milli-GPU, never short here).
	f := newFixture(t, sim.PodSpec{Name: "share", CPU: 8000, Memory: 1, GPUs: 1, GPUMilli: 500, Delete: sim.NoDeletion})
	pressure := NewFGDPressure(f.st.Env, 0)
	strand := NewFGDStrand(f.st.Env, 0, 0)
	if strand.Name() != FGDStrand || NewFGDStrand(f.st.Env, 0, 3).Name() != "fgd-strand(3)" {
		t.Fatalf("names %q, %q", strand.Name(), NewFGDStrand(f.st.Env, 0, 3).Name())
	}
	for _, tc := range []struct {
		name string
		pod  sim.Pod
		// stranded milli-GPU the placement adds on n1 (32 CPUs, 2 free
		// T4s: exactly enough CPU) and n2 (no GPUs)
		n1, n2 float64
	}{
		// 8 CPUs taken leave 24, which serve 1,500 of the 2,000
		{"CPU-only pod", sim.Pod{CPU: 8000, Mem: 1}, 500, 0},
		// a share pod at the ratio: 24 CPUs serve the 1,500 left
		{"share pod", sim.Pod{CPU: 8000, Mem: 1, GPUs: 1, GPUMilli: 500}, 0, 0},
		// a whole GPU with 24 CPUs: 8 left serve 500 of the 1,000 left
		{"CPU-heavy GPU pod", sim.Pod{CPU: 24000, Mem: 1, GPUs: 1, GPUMilli: 1000}, 500, 0},
	} {
		want := f.scores(t, pressure, tc.pod, 1, 2)
		want[0] -= DefaultStrandWeight * tc.n1 / sim.MilliGPU
		want[1] -= DefaultStrandWeight * tc.n2 / sim.MilliGPU
		expectScores(t, f.scores(t, strand, tc.pod, 1, 2), want)
	}
	// FGD's fragmentation does not see it: the share class still fits on
	// n1 after the CPU-only pod (24 CPUs left), so both primaries are 50
	// and only the packing key (below 1) sets n2 first; the penalty, 20 x
	// 0.5 devices, puts n2 ahead by 10 more
	s := f.scores(t, strand, sim.Pod{CPU: 8000, Mem: 1}, 1, 2)
	if !(s[1] > s[0]+9) {
		t.Errorf("CPU-only pod: scores %v, want n2 ahead by the penalty", s)
	}
	if _, err := Lookup(FGDStrand); err != nil {
		t.Errorf("Lookup(%q): %v", FGDStrand, err)
	}
}
