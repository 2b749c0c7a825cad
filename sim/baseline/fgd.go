package baseline

import (
	"math"

	"github.com/edgesched/edgesched/sim"
)

// FGDPolicy is Fragmentation Gradient Descent (Weng et al., "Beware of
// Fragmentation", USENIX ATC'23): place each pod where it increases the
// cluster's GPU fragmentation the least, measured against the target
// workload (sim.TargetWorkload.GPUFrag). A pod that shares a GPU tries every
// device that fits and keeps the best; whole-GPU pods take fully free
// devices.
//
// Score, as in the paper's artifact: with delta the increase in milli-GPU,
//
//	primary = int(100 * sigmoid(-delta / 1000))   in [0, 100]
//
// The integer matters: it merges near-equal increases. Among equal primary
// scores the artifact's scheduler (a kube-scheduler fork) takes the first
// node, which consolidates; a stock scheduler picks at random, and FGD then
// loses its edge (measured on openb default, 5 seeds: 8.9% of GPUs left
// unallocated at 100% demand with random ties, 4.8% with first-node ties).
// This policy keeps the engine's seeded random tie-break and states the
// consolidation explicitly as a secondary key inside the score:
//
//	score = primary + 0.999 * (1000 * (1 - gpuFree/maxGPU) + (1 - cpuFree/maxCPU)) / 1001
//
// with maxGPU and maxCPU the largest node's capacities: among equal
// primaries the node with the least free GPU wins (a node without GPUs has
// none free, so CPU-only pods stay off GPU nodes), then the least free CPU.
// Measured against alternatives on openb (5 seeds, unallocated GPU at 100%):
// keying on allocated rather than free GPU gives 6.4% on default (this key
// 4.9%), 5.6% on cpu050 (5.2%), 7.6% on gpushare40 (6.2%).
//
// Cost: the increase depends only on the node's state and the pod's shape,
// so it is cached per (node, shape) and recomputed only after the node
// changes; node states themselves are memoised by sim.State. The cache is
// laid out by shape, then node: a decision reads one shape's entries of
// its candidates in node order, one stretch of memory (by node, then
// shape, consecutive candidates were a cache line apart each).
type FGDPolicy struct {
	shapes int
	nodes  int
	cache  []fgdEntry
}

type fgdEntry struct {
	version uint64 // node version + 1; 0 means empty
	delta   float64
	score   int32 // FGDScore(delta), cached: the sigmoid is costly
	gpu     int32 // device for a shared-GPU pod, -1 otherwise
}

// NewFGD returns an FGD policy for env.
func NewFGD(env *sim.Env) *FGDPolicy {
	return &FGDPolicy{shapes: env.Shapes, nodes: len(env.Nodes), cache: make([]fgdEntry, len(env.Nodes)*max(1, env.Shapes))}
}

// Name implements sim.Policy.
func (*FGDPolicy) Name() string { return FGD }

// Score implements sim.Policy.
func (f *FGDPolicy) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	mx := st.Env.MaxNode
	for i, n := range nodes {
		e := f.entry(st, p, int(n))
		nd := &st.Nodes[n]
		var gpuUsed float64
		if mx.GPU > 0 {
			gpuUsed = 1 - float64(nd.GPUFreeTotal)/float64(mx.GPU)
		}
		cpuUsed := 1 - float64(nd.CPUFree)/float64(mx.CPU)
		scores[i] = float64(e.score) + 0.999*(1000*gpuUsed+cpuUsed)/1001
	}
}

// FGDScore is the artifact's integer score of a fragmentation increase
// delta (milli-GPU): int(100 * sigmoid(-delta/1000)).
func FGDScore(delta float64) int64 {
	return int64(MaxNodeScore / (1 + math.Exp(delta/1000)))
}

// PickGPUs implements sim.GPUPicker.
func (f *FGDPolicy) PickGPUs(st *sim.State, p *sim.Pod, n int, dst []int) []int {
	if p.GPUs == 1 && p.GPUMilli < sim.MilliGPU {
		_, g := f.eval(st, p, n)
		return append(dst[:0], g)
	}
	return st.BestFitGPUs(n, p, dst)
}

// Delta returns the fragmentation increase (milli-GPU) of placing p on node
// n and the device a shared-GPU pod would use there (-1 otherwise).
func (f *FGDPolicy) Delta(st *sim.State, p *sim.Pod, n int) (float64, int) { return f.eval(st, p, n) }

// DeltaScore is Delta with FGDScore of the delta, from the same cache
// entry (the sigmoid is not computed again).
func (f *FGDPolicy) DeltaScore(st *sim.State, p *sim.Pod, n int) (delta float64, score int64, gpu int) {
	e := f.entry(st, p, n)
	return e.delta, int64(e.score), int(e.gpu)
}

func (f *FGDPolicy) eval(st *sim.State, p *sim.Pod, n int) (float64, int) {
	e := f.entry(st, p, n)
	return e.delta, int(e.gpu)
}

// entry returns the (cached) evaluation of p on node n.
func (f *FGDPolicy) entry(st *sim.State, p *sim.Pod, n int) fgdEntry {
	nd := &st.Nodes[n]
	var e *fgdEntry
	if int(p.Shape) < f.shapes {
		e = &f.cache[int(p.Shape)*f.nodes+n]
		if e.version == nd.Version+1 {
			return *e
		}
	}
	before := nd.FragGPU
	after, gpu := 0.0, -1
	switch {
	case p.GPUs == 0:
		after = st.GPUFragOf(nd.CPUFree-p.CPU, nd.Model, nd.GPUFree)
	case p.GPUs == 1 && p.GPUMilli < sim.MilliGPU:
		var one [1]int
		for g, free := range nd.GPUFree {
			if free < p.GPUMilli || seenShare(nd.GPUFree[:g], free) {
				continue
			}
			one[0] = g
			a := st.GPUFragAfter(n, p, one[:])
			if gpu < 0 || a < after {
				after, gpu = a, g
			}
		}
	default:
		var buf [sim.MaxGPUsPerNode]int
		after = st.GPUFragAfter(n, p, st.BestFitGPUs(n, p, buf[:0]))
	}
	d := after - before
	fresh := fgdEntry{version: nd.Version + 1, delta: d, score: int32(FGDScore(d)), gpu: int32(gpu)}
	if e != nil {
		*e = fresh
	}
	return fresh
}

// seenShare reports whether an earlier device had the same free share (the
// resulting node state, and so its fragmentation, would be identical).
func seenShare(prev []int64, free int64) bool {
	for _, f := range prev {
		if f == free {
			return true
		}
	}
	return false
}
