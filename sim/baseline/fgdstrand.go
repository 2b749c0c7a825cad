package baseline

import (
	"fmt"

	"github.com/edgesched/edgesched/sim"
)

// FGDStrand is the name of fgd-pressure with a stranded-GPU penalty.
const FGDStrand = "fgd-strand"

// DefaultStrandWeight is FGDStrandPolicy's weight when none is given: the
// middle of the plateau (10 to 50) found on selection seeds 1001-1010 of
// the openb traces and two generated mixtures (docs/training.md,
// "Stranded GPUs").
const DefaultStrandWeight = 20

// FGDStrandPolicy is fgd-pressure (FGDPressurePolicy, with its default
// weight) that also keeps the GPUs it leaves usable: each pod's score on
// a GPU node is fgd-pressure's minus Weight times the GPU, in devices,
// that the placement strands for lack of CPU or memory (sim.Strand.Delta,
// negative when it takes stranded devices). A CPU-only pod pays for the
// devices its CPU takes from their GPU pods, a GPU pod for a CPU request
// above its share.
//
// It is edgesched's own, the teacher of the default learned policy
// (docs/training.md); not in All, named by Lookup and Extras.
type FGDStrandPolicy struct {
	*FGDPressurePolicy
	Weight float64
	strand sim.Strand
}

// NewFGDStrand returns the policy for env with pressure weight pressure
// (0 means DefaultPressureWeight) and strand weight w (0 means
// DefaultStrandWeight).
func NewFGDStrand(env *sim.Env, pressure, w float64) *FGDStrandPolicy {
	if w == 0 {
		w = DefaultStrandWeight
	}
	return &FGDStrandPolicy{FGDPressurePolicy: NewFGDPressure(env, pressure), Weight: w, strand: sim.NewStrand(env.Target)}
}

// Name implements sim.Policy: fgd-strand with the default weights,
// fgd-strand(W) with strand weight W, fgd-strand(W, pressure P) with a
// pressure weight of its own.
func (f *FGDStrandPolicy) Name() string {
	switch {
	case f.FGDPressurePolicy.Weight != DefaultPressureWeight:
		return fmt.Sprintf("%s(%g, pressure %g)", FGDStrand, f.Weight, f.FGDPressurePolicy.Weight)
	case f.Weight != DefaultStrandWeight:
		return fmt.Sprintf("%s(%g)", FGDStrand, f.Weight)
	}
	return FGDStrand
}

// Score implements sim.Policy.
func (f *FGDStrandPolicy) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	f.FGDPressurePolicy.Score(st, p, nodes, scores)
	for i, n := range nodes {
		scores[i] -= f.Weight * f.strand.Delta(&st.Nodes[n], p) / sim.MilliGPU
	}
}
