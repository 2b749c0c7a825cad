package sim

import "math/rand/v2"

// Policy scores the feasible nodes of a pod. The run engine (sim/engine)
// filters first (see State.Feasible), calls Score once per pod with every
// feasible node, and binds the pod to the highest score; ties are broken
// uniformly at random with the run's seeded tie-break stream. Scores may be
// any finite numbers; only their order matters. A policy value belongs to
// one run.
type Policy interface {
	Name() string
	// Score writes scores[i] for nodes[i]. len(scores) == len(nodes) > 0.
	Score(st *State, pod *Pod, nodes []int32, scores []float64)
}

// Starter is implemented by policies that need per-run setup. Start is
// called once before the first pod with the run's policy random stream.
type Starter interface {
	Start(st *State, rng *rand.Rand) error
}

// GPUPicker is implemented by policies that choose devices themselves;
// others get State.BestFitGPUs. PickGPUs appends p.GPUs device indices of
// node n to dst and returns it.
type GPUPicker interface {
	PickGPUs(st *State, pod *Pod, n int, dst []int) []int
}

// NodeFilter is implemented by policies that add hard constraints of their
// own (an operator's policy document, sim/constraint): Admit is asked for
// every node that already passed the engine's feasibility check, and a node
// it refuses is not scored.
type NodeFilter interface {
	Admit(st *State, pod *Pod, n int) bool
}

// Factory makes a fresh policy for one run on env.
type Factory struct {
	Name string
	New  func(env *Env) (Policy, error)
}
