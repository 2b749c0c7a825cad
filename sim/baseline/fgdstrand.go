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

// NewFGDStrand returns the policy for env with strand weight w (0 means
// DefaultStrandWeight) and fgd-pressure's default pressure weight.
func NewFGDStrand(env *sim.Env, w float64) *FGDStrandPolicy {
	if w == 0 {
		w = DefaultStrandWeight
	}
	return &FGDStrandPolicy{FGDPressurePolicy: NewFGDPressure(env, 0), Weight: w, strand: sim.NewStrand(env.Target)}
}

// Name implements sim.Policy.
func (f *FGDStrandPolicy) Name() string {
	if f.Weight == DefaultStrandWeight {
		return FGDStrand
	}
	return fmt.Sprintf("%s(%g)", FGDStrand, f.Weight)
}

// Score implements sim.Policy.
func (f *FGDStrandPolicy) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	f.FGDPressurePolicy.Score(st, p, nodes, scores)
	for i, n := range nodes {
		scores[i] -= f.Weight * f.strand.Delta(&st.Nodes[n], p) / sim.MilliGPU
	}
}
