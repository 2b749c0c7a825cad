package sim

import (
	"math"
	"testing"
)

func TestNewStrand(t *testing.T) {
	// Two GPU classes and a CPU-only one (ignored): a share pod (4 CPUs,
	// 8 GiB, half a GPU) with P .5 and a two-GPU pod (16 CPUs, 64 GiB)
	// with P .25. GPU demand .5*500 + .25*2000 = 750 milli-GPU; CPU
	// .5*4000 + .25*16000 = 6000 milli-CPU; memory .5*8192 + .25*65536 =
	// 20480 MiB. Ratios 8 milli-CPU and 27.31 MiB per milli-GPU.
	tw := &TargetWorkload{Classes: []TargetClass{
		{CPU: 4000, Mem: 8192, GPUs: 1, GPUMilli: 500, P: 0.5},
		{CPU: 16000, Mem: 65536, GPUs: 2, GPUMilli: 1000, P: 0.25},
		{CPU: 64000, Mem: 1, P: 0.25},
	}}
	s := NewStrand(tw)
	if math.Abs(s.CPUPerGPU-8) > 1e-12 || math.Abs(s.MemPerGPU-20480.0/750) > 1e-9 {
		t.Fatalf("NewStrand = %+v, want 8 milli-CPU and %.4f MiB per milli-GPU", s, 20480.0/750)
	}
	for _, tc := range []struct {
		name string
		tw   *TargetWorkload
	}{{"nil", nil}, {"no classes", &TargetWorkload{}}, {"CPU only", &TargetWorkload{Classes: []TargetClass{{CPU: 1000, P: 1}}}}} {
		if got := NewStrand(tc.tw); got != (Strand{}) {
			t.Errorf("%s: %+v, want the zero Strand", tc.name, got)
		}
	}
}

func TestStranded(t *testing.T) {
	// 8 milli-CPU and 4 MiB per milli-GPU: a free GPU needs 8 CPUs and
	// 4 GiB beside it.
	s := Strand{CPUPerGPU: 8, MemPerGPU: 4}
	for _, tc := range []struct {
		name          string
		cpu, mem, gpu int64
		want          float64
	}{
		{"no free GPU", 0, 0, 0, 0},
		{"CPU and memory enough", 64000, 32000, 8000, 0},
		// 16 CPUs serve 2,000 milli-GPU of the 8,000 free
		{"CPU short", 16000, 32000, 8000, 6000},
		// 8 GiB serve 2,000
		{"memory short", 64000, 8000, 8000, 6000},
		// the scarcer: CPU serves 4,000, memory 1,000
		{"both short", 32000, 4000, 8000, 7000},
		// an overcommitted node (negative free) serves nothing
		{"negative CPU", -1000, 32000, 3000, 3000},
		{"negative memory", 64000, -1, 3000, 3000},
	} {
		if got := s.Stranded(tc.cpu, tc.mem, tc.gpu); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: Stranded(%d, %d, %d) = %v, want %v", tc.name, tc.cpu, tc.mem, tc.gpu, got, tc.want)
		}
	}
	if got := (Strand{}).Stranded(0, 0, 8000); got != 0 {
		t.Errorf("zero Strand: %v, want 0 (nothing measured)", got)
	}
}

func TestStrandDelta(t *testing.T) {
	s := Strand{CPUPerGPU: 8, MemPerGPU: 4}
	// a node with 4 free GPUs, 40 CPUs and 1 TiB free: 32 CPUs would do
	node := func() *Node {
		return &Node{NodeInfo: NodeInfo{GPUs: 8}, CPUFree: 40000, MemFree: 1 << 20, GPUFreeTotal: 4000}
	}
	for _, tc := range []struct {
		name string
		pod  Pod
		want float64
	}{
		// 16 CPUs taken leave 24, which serve 3,000 of the 4,000: +1,000
		{"CPU-only pod strands", Pod{CPU: 16000}, 1000},
		// 4 CPUs leave 36: still enough
		{"small CPU-only pod", Pod{CPU: 4000}, 0},
		// one GPU with its 8 CPUs: 32 CPUs for 3,000, nothing stranded
		{"GPU pod at the ratio", Pod{CPU: 8000, GPUs: 1, GPUMilli: 1000}, 0},
		// one GPU with 24 CPUs: 16 left serve 2,000 of 3,000
		{"GPU pod above the ratio", Pod{CPU: 24000, GPUs: 1, GPUMilli: 1000}, 1000},
	} {
		if got := s.Delta(node(), &tc.pod); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: Delta = %v, want %v", tc.name, got, tc.want)
		}
	}
	// a GPU pod that takes stranded devices frees them: 4 CPUs for 4
	// GPUs strand 3,500; two GPUs with no CPU leave 2,000 of which 1,500
	// are stranded: -2,000
	n := &Node{NodeInfo: NodeInfo{GPUs: 8}, CPUFree: 4000, MemFree: 1 << 20, GPUFreeTotal: 4000}
	if got := s.Delta(n, &Pod{GPUs: 2, GPUMilli: 1000}); math.Abs(got+2000) > 1e-9 {
		t.Errorf("GPU pod on a stranded node: Delta = %v, want -2000", got)
	}
	// a node without GPUs strands nothing, whatever the pod takes
	if got := s.Delta(&Node{CPUFree: 1000}, &Pod{CPU: 64000}); got != 0 {
		t.Errorf("CPU node: %v, want 0", got)
	}
}
