package sim

// Strand measures the GPUs a node can no longer offer for lack of CPU or
// memory: the target workload's GPU pods ask, on average, for CPU and
// memory in proportion to their GPU (CPUPerGPU and MemPerGPU milli-CPU and
// MiB per milli-GPU, popularity-weighted over the GPU classes), so a
// node's free GPU beyond what its free CPU (or memory) can accompany at
// that ratio is stranded. FGD's fragmentation counts such a GPU only for
// the classes that no longer fit, weighted by their popularity. Measured
// on openb at saturation (docs/training.md, "Stranded GPUs"): a quarter of
// the GPU FGD leaves unallocated (1.2 of 4.7 points) sits on nodes whose
// free CPU is below every GPU class's request; the one-GPU and
// GPU-sharing pods that fail once the demand has arrived fail while a
// free device exists on a node short of CPU or memory; no CPU-only pod
// fails. The measure is a smooth stand-in: it
// charges a placement for the stranded GPU it adds, whichever pods would
// have used it.
//
// The zero value measures nothing (a workload without GPU pods): Delta is
// 0.
type Strand struct {
	// CPUPerGPU and MemPerGPU are the target workload's GPU pods' mean
	// requests per unit of GPU demand (milli-CPU and MiB per milli-GPU).
	CPUPerGPU, MemPerGPU float64
}

// NewStrand returns the measure for target workload t (its GPU classes'
// requests, popularity-weighted). A workload without GPU classes gives the
// zero Strand.
func NewStrand(t *TargetWorkload) Strand {
	var cpu, mem, gpu float64
	if t != nil {
		for _, c := range t.Classes {
			if c.GPUs <= 0 || c.GPUMilli <= 0 {
				continue
			}
			cpu += c.P * float64(c.CPU)
			mem += c.P * float64(c.Mem)
			gpu += c.P * float64(int64(c.GPUs)*c.GPUMilli)
		}
	}
	if !(gpu > 0) {
		return Strand{}
	}
	return Strand{CPUPerGPU: cpu / gpu, MemPerGPU: mem / gpu}
}

// Stranded is the free GPU (milli-GPU) of a node with gpuFree milli-GPU,
// cpuFree milli-CPU and memFree MiB free that its CPU or its memory cannot
// accompany at the workload's ratios: gpuFree less the GPU the scarcer of
// the two can serve, at least 0.
func (s Strand) Stranded(cpuFree, memFree, gpuFree int64) float64 {
	if gpuFree <= 0 {
		return 0
	}
	g := float64(gpuFree)
	serve := g
	if s.CPUPerGPU > 0 {
		serve = min(serve, float64(max(cpuFree, 0))/s.CPUPerGPU)
	}
	if s.MemPerGPU > 0 {
		serve = min(serve, float64(max(memFree, 0))/s.MemPerGPU)
	}
	return g - serve
}

// Delta is the stranded GPU (milli-GPU) that placing p on nd adds (or, when
// negative, frees: a pod that takes stranded devices). A node without GPUs
// strands nothing.
func (s Strand) Delta(nd *Node, p *Pod) float64 {
	if nd.GPUs == 0 || (s.CPUPerGPU <= 0 && s.MemPerGPU <= 0) {
		return 0
	}
	before := s.Stranded(nd.CPUFree, nd.MemFree, nd.GPUFreeTotal)
	after := s.Stranded(nd.CPUFree-p.CPU, nd.MemFree-p.Mem, nd.GPUFreeTotal-p.GPUDemand())
	return after - before
}
