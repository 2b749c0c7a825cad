// Package agreement measures how often a quantized policy decides as the
// float policy it was made from: the float policy runs a simulation and,
// at every decision with two or more candidates, the int8 network scores
// the same candidates alongside (Measure). It is evaluation, kept apart
// from quant's artifacts and kernels; edgectl model quantize reports it.
//
// Concurrency and lifetimes: Measure runs one simulation and returns; it
// only reads the model and the network.
package agreement

import (
	"context"
	"fmt"
	"slices"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/int8net"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/engine"
)

// Agreement is how often the int8 policy picks the node the float policy
// picks, on the float policy's own trajectory.
type Agreement struct {
	Decisions int
	// Same counts decisions where both pick the same node by the model's
	// decision rule (each taking the lowest-index node among its equal
	// best decision scores).
	Same int
	// SameArgmax counts decisions where the networks' own best scores are
	// on the same node (no decision rule): equal to Same for a model
	// without one.
	SameArgmax int
	// RuleChanged counts decisions where the float policy's rule picks
	// another node than its network's own best: the share of decisions
	// the rule decides.
	RuleChanged int
}

// ArgmaxRate is SameArgmax / Decisions.
func (a Agreement) ArgmaxRate() float64 {
	if a.Decisions == 0 {
		return 0
	}
	return float64(a.SameArgmax) / float64(a.Decisions)
}

// Rate is Same / Decisions.
func (a Agreement) Rate() float64 {
	if a.Decisions == 0 {
		return 0
	}
	return float64(a.Same) / float64(a.Decisions)
}

// shadow lets the float policy decide and scores the same candidates with
// the int8 policy alongside.
type shadow struct {
	float, q *policy.Learned
	buf      []float64
	agree    *Agreement
}

func (s *shadow) Name() string { return s.float.Name() }

func (s *shadow) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	s.float.NetworkScores(st, p, nodes, scores)
	if len(nodes) < 2 {
		s.float.Decide(st, p, nodes, scores)
		return
	}
	s.buf = slices.Grow(s.buf[:0], len(nodes))[:len(nodes)]
	s.q.NetworkScores(st, p, nodes, s.buf)
	s.agree.Decisions++
	own := argmax(scores)
	if own == argmax(s.buf) {
		s.agree.SameArgmax++
	}
	s.float.Decide(st, p, nodes, scores)
	if argmax(scores) != own {
		s.agree.RuleChanged++
	}
	s.q.Decide(st, p, nodes, s.buf)
	if argmax(scores) == argmax(s.buf) {
		s.agree.Same++
	}
}

func (s *shadow) PickGPUs(st *sim.State, p *sim.Pod, n int, dst []int) []int {
	return s.float.PickGPUs(st, p, n, dst)
}

func argmax(v []float64) int {
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	return best
}

// Measure runs the float model on env with cfg and counts, at
// every decision with two or more candidates, whether the int8 network
// would have picked the same node.
func Measure(ctx context.Context, env *sim.Env, m *policy.FloatModel, n *int8net.Net, cfg engine.RunConfig) (Agreement, error) {
	var a Agreement
	if m == nil || m.NewScorer == nil {
		return a, fmt.Errorf("%w: no float network to run (policy/nn's Model.Float gives one)", quant.ErrQuant)
	}
	f := sim.Factory{Name: "agreement", New: func(env *sim.Env) (sim.Policy, error) {
		sc, err := m.NewScorer()
		if err != nil {
			return nil, err
		}
		fl := policy.NewLearnedScorer("float", sc, m.Decision, env)
		return &shadow{float: fl, q: policy.NewLearnedScorer("int8", n.Scorer(), n.Decision, env), agree: &a}, nil
	}}
	_, err := engine.Run(ctx, env, f, cfg)
	return a, err
}
