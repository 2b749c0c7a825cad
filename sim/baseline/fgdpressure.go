package baseline

import (
	"fmt"

	"github.com/edgesched/edgesched/sim"
)

// FGDPressure is the name of FGD with a GPU-model pressure penalty.
const FGDPressure = "fgd-pressure"

// DefaultPressureWeight is FGDPressurePolicy's weight when none is given,
// chosen on generated mixtures with selection seeds (docs/training.md,
// "Policy v2").
const DefaultPressureWeight = 10

// FGDPressurePolicy is FGD that keeps GPU pods off the GPU models that
// pods naming models will need: each GPU pod's score on a node is FGD's
// minus Weight times the pressure of the node's model
// (sim.ModelDemand.Pressure: the target demand naming models directed at
// it over its share of the free GPU). On workloads where no pod names a
// model it is FGD exactly.
//
// It is not a published baseline: it is edgesched's own, the teacher the
// default learned policy is cloned from (docs/training.md). It is not in
// All (tables of baselines stay the published ones); Lookup and Extras
// name it.
type FGDPressurePolicy struct {
	*FGDPolicy
	Weight float64
	md     sim.ModelDemand
	p      []float64
}

// NewFGDPressure returns the policy for env with weight w (0 means
// DefaultPressureWeight).
func NewFGDPressure(env *sim.Env, w float64) *FGDPressurePolicy {
	if w == 0 {
		w = DefaultPressureWeight
	}
	return &FGDPressurePolicy{FGDPolicy: NewFGD(env), Weight: w, md: sim.NewModelDemand(env.Target, env.Nodes, len(env.Models)), p: make([]float64, len(env.Models))}
}

// Name implements sim.Policy.
func (f *FGDPressurePolicy) Name() string {
	if f.Weight == DefaultPressureWeight {
		return FGDPressure
	}
	return fmt.Sprintf("%s(%g)", FGDPressure, f.Weight)
}

// Score implements sim.Policy.
func (f *FGDPressurePolicy) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	f.FGDPolicy.Score(st, p, nodes, scores)
	if p.GPUs == 0 {
		return
	}
	f.md.Pressures(st, f.p)
	for i, n := range nodes {
		if g := st.Nodes[n].Model; g >= 0 {
			scores[i] -= f.Weight * f.p[g]
		}
	}
}

// Extras returns the policies Lookup knows beyond All: edgesched's own
// heuristics, which comparisons of published baselines leave out.
func Extras() []sim.Factory {
	return []sim.Factory{
		{Name: FGDPressure, New: func(env *sim.Env) (sim.Policy, error) { return NewFGDPressure(env, 0), nil }},
		{Name: FGDStrand, New: func(env *sim.Env) (sim.Policy, error) { return NewFGDStrand(env, 0, 0), nil }},
		{Name: NetworkOverhead, New: func(*sim.Env) (sim.Policy, error) { return &networkOverhead{}, nil }},
		{Name: DepLoad, New: func(env *sim.Env) (sim.Policy, error) { return NewDepLoad(env, 0), nil }},
		{Name: CarbonLoad, New: func(env *sim.Env) (sim.Policy, error) { return NewCarbonLoad(env, 0), nil }},
	}
}
