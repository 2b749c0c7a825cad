package ppo

import (
	"context"
	"math/rand/v2"
	"sort"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
)

// Lookahead configures the planning teacher: FGD improved by Monte Carlo
// lookahead. Once the allocated share of the primary resource reaches
// Start, it takes FGD's TopK nodes, and for each places the pod there, then
// plays Samples futures of Horizon pods drawn from the workload (the same
// futures for every candidate) with FGD, and keeps the candidate whose
// futures end with the least failed demand plus fragmentation. The network
// learns to imitate this expensive planner (expert iteration).
//
// A decision plays TopK x Samples x Horizon pods, at most
// MaxLookaheadPlays; the planner stops playing when the episode's context
// is cancelled (the decision is then FGD's).
type Lookahead struct {
	TopK    int     `yaml:"topK"`
	Horizon int     `yaml:"horizon"`
	Samples int     `yaml:"samples"`
	Start   float64 `yaml:"start"`
}

// MaxLookaheadPlays bounds the pods one lookahead decision plays
// (TopK x Samples x Horizon; each is a pass of FGD over the cluster's
// nodes on a copy of the state). The candidate pod each rollout binds
// first is not counted: it is bound to its node, without a pass; each of
// the TopK x Samples rollouts also copies the state once.
const MaxLookaheadPlays = 1_000_000

// lookaheadTeacher implements sim.Policy for the teacher role.
type lookaheadTeacher struct {
	ctx    context.Context
	cfg    Lookahead
	env    *sim.Env
	fgd    *baseline.FGDPolicy
	rng    *rand.Rand
	clones uint64
	order  []int
	nodes  []int32
	sc     []float64
	// played counts the future pods played (tests)
	played int
}

func newLookahead(ctx context.Context, cfg Lookahead, env *sim.Env, seed uint64) *lookaheadTeacher {
	return &lookaheadTeacher{ctx: ctx, cfg: cfg, env: env, fgd: baseline.NewFGD(env), rng: rand.New(rand.NewPCG(seed, 0x100c))}
}

func (l *lookaheadTeacher) Name() string { return "fgd-lookahead" }

func (l *lookaheadTeacher) PickGPUs(st *sim.State, p *sim.Pod, n int, dst []int) []int {
	return l.fgd.PickGPUs(st, p, n, dst)
}

func (l *lookaheadTeacher) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	l.fgd.Score(st, p, nodes, scores)
	if len(nodes) < 2 || allocatedShare(st) < l.cfg.Start {
		return
	}
	l.order = l.order[:0]
	for i := range nodes {
		l.order = append(l.order, i)
	}
	sort.SliceStable(l.order, func(a, b int) bool { return scores[l.order[a]] > scores[l.order[b]] })
	k := min(l.cfg.TopK, len(l.order))
	futures := make([][]int, l.cfg.Samples)
	for m := range futures {
		futures[m] = make([]int, l.cfg.Horizon)
		for j := range futures[m] {
			futures[m][j] = l.rng.IntN(len(l.env.Pods))
		}
	}
	best, bestCost := -1, 0.0
	for _, ci := range l.order[:k] {
		var cost float64
		for m := range futures {
			c, ok := l.rollout(st, p, int(nodes[ci]), futures[m])
			if !ok {
				return // cancelled: FGD's scores stand
			}
			cost += c
		}
		if best < 0 || cost < bestCost {
			best, bestCost = ci, cost
		}
	}
	// Lift the planner's choice above every FGD score (scores are < 101).
	scores[best] += 1000
}

// rollout plays pod p on node n and then the future pods with FGD on a
// copy of st; it returns the failed demand plus the final fragmentation
// (milli-GPU, or milli-CPU when CPU is the primary resource); false when
// the context was cancelled before it finished.
func (l *lookaheadTeacher) rollout(st *sim.State, p *sim.Pod, n int, future []int) (float64, bool) {
	if l.ctx.Err() != nil {
		return 0, false
	}
	l.clones++
	cl := st.Clone((l.clones + 1) << 40)
	id, err := cl.AddPod(*p)
	if err != nil {
		return 0, true
	}
	if err := cl.Bind(id, n, l.fgd.PickGPUs(cl, p, n, nil)); err != nil {
		return 0, true
	}
	var failed float64
	for j, t := range future {
		if j%64 == 63 && l.ctx.Err() != nil {
			return 0, false
		}
		l.played++
		id, err := cl.AddPod(l.env.Pods[t])
		if err != nil {
			continue
		}
		q := &cl.Pods[id]
		l.nodes = l.nodes[:0]
		for c := range cl.Nodes {
			if cl.Feasible(c, q) {
				l.nodes = append(l.nodes, int32(c))
			}
		}
		if len(l.nodes) == 0 {
			if l.env.GPUPrimary {
				failed += float64(q.GPUDemand())
			} else {
				failed += float64(q.CPU)
			}
			continue
		}
		if cap(l.sc) < len(l.nodes) {
			l.sc = make([]float64, len(l.nodes))
		}
		sc := l.sc[:len(l.nodes)]
		l.fgd.Score(cl, q, l.nodes, sc)
		b := 0
		for i := range sc {
			if sc[i] > sc[b] {
				b = i
			}
		}
		c := int(l.nodes[b])
		_ = cl.Bind(id, c, l.fgd.PickGPUs(cl, q, c, nil))
	}
	if l.env.GPUPrimary {
		return failed + cl.FragGPU, true
	}
	return failed + cl.FragCPU, true
}
