package ppo

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
	"github.com/edgesched/edgesched/sim/engine"
)

// step is one decision of an episode.
type step struct {
	off, k int // features x[off : off+k*F] in the episode's arena
	// qoff: the teacher's target distribution over the k candidates is
	// q[qoff : qoff+k] (soft targets; -1: the action alone)
	qoff   int
	action int
	logp   float32
	value  float32
	reward float32
	// filled by GAE
	adv, ret float32
}

// episode is one rollout.
type episode struct {
	// seen is the range of the raw rows extracted (policy.Range), the
	// model's input bounds once merged over training (trainer.seen)
	seen     policy.Range
	x        []float32
	q        []float32 // soft targets of cloning steps (step.qoff)
	steps    []step
	ret      float64 // sum of rewards
	measures map[string]float64
}

// actMode selects how the actor picks.
type actMode int

const (
	actSample  actMode = iota // sample from the softmax (PPO rollouts)
	actTeacher                // follow a teacher baseline (behaviour cloning)
	actGreedy                 // take the highest score (evaluation)
)

// actor is the training-time policy: it computes features, runs the
// network, picks a node and records the decision.
type actor struct {
	net     *nn.Net
	schema  policy.Schema
	ext     *policy.Extractor
	rng     *rand.Rand
	mode    actMode
	teacher sim.Policy
	ep      *episode
	probs   []float64
	tscores []float64
	record  bool
	// warm: the teacher acts, unrecorded, until the allocated share of the
	// primary resource reaches warmUntil.
	warm      bool
	warmUntil float64
	// teacher mode: record from this allocated share on, only the
	// teacher's topK candidates (0: all).
	recordFrom float64
	topK       int
	// soft: the inverse temperature of soft targets (0: none)
	soft float64
	idx  []int
}

func (a *actor) Name() string { return "learned-training" }

func (a *actor) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	if a.warm {
		if allocatedShare(st) < a.warmUntil {
			a.teacher.Score(st, p, nodes, scores)
			return
		}
		a.warm = false
	}
	if a.mode == actTeacher {
		a.teach(st, p, nodes, scores)
		return
	}
	k := len(nodes)
	a.ext.BeginPod(st, p)
	off := len(a.ep.x)
	a.ep.x = append(a.ep.x, make([]float32, k*policy.NumFeatures)...)
	x := a.ep.x[off:]
	for i, n := range nodes {
		row := x[i*policy.NumFeatures : (i+1)*policy.NumFeatures]
		a.ext.Extract(st, p, int(n), row)
		a.schema.Clamp(row) // without bounds (every training but Options.KeepBounds) it does nothing
		a.ep.seen.Observe(row)
		a.schema.Normalize(row)
	}
	logits, value, err := a.net.Forward(x, k)
	if err != nil {
		panic(err) // shapes are ours
	}
	logp := logSoftmax(logits, &a.probs)
	act := 0
	if a.mode == actGreedy {
		for i := range logits {
			if logits[i] > logits[act] {
				act = i
			}
		}
	} else {
		u := a.rng.Float64()
		act = k - 1
		for i, lp := range logp {
			u -= math.Exp(lp)
			if u <= 0 {
				act = i
				break
			}
		}
	}
	for i := range scores {
		scores[i] = 0
	}
	scores[act] = 1
	if !a.record {
		a.ep.x = a.ep.x[:off]
		a.ep.steps = append(a.ep.steps, step{})
		return
	}
	a.ep.steps = append(a.ep.steps, step{off: off, k: k, qoff: -1, action: act, logp: float32(logp[act]), value: value})
}

// teach lets the teacher decide and records its choice: every candidate,
// or only the teacher's topK best (its choice among them) once the
// allocated share reaches recordFrom.
func (a *actor) teach(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	a.teacher.Score(st, p, nodes, scores)
	if allocatedShare(st) < a.recordFrom {
		return
	}
	k := len(nodes)
	idx := a.idx[:0]
	for i := range nodes {
		idx = append(idx, i)
	}
	sort.SliceStable(idx, func(i, j int) bool { return scores[idx[i]] > scores[idx[j]] })
	if a.topK > 0 && k > a.topK {
		idx = idx[:a.topK]
	}
	a.idx = idx
	a.ext.BeginPod(st, p)
	off := len(a.ep.x)
	a.ep.x = append(a.ep.x, make([]float32, len(idx)*policy.NumFeatures)...)
	x := a.ep.x[off:]
	for j, i := range idx {
		row := x[j*policy.NumFeatures : (j+1)*policy.NumFeatures]
		a.ext.Extract(st, p, int(nodes[i]), row)
		a.schema.Clamp(row)
		a.ep.seen.Observe(row)
		a.schema.Normalize(row)
	}
	// idx[0] is the teacher's choice (the engine takes the highest score,
	// first on ties, as the stable sort does).
	qoff := -1
	if a.soft > 0 {
		qoff = len(a.ep.q)
		best := scores[idx[0]]
		var sum float64
		for _, i := range idx {
			sum += math.Exp(a.soft * (scores[i] - best))
		}
		for _, i := range idx {
			a.ep.q = append(a.ep.q, float32(math.Exp(a.soft*(scores[i]-best))/sum))
		}
	}
	a.ep.steps = append(a.ep.steps, step{off: off, k: len(idx), action: 0, qoff: qoff})
}

func allocatedShare(st *sim.State) float64 {
	c := st.Env.Capacity
	if st.Env.GPUPrimary {
		return float64(st.Alloc.GPU) / float64(c.GPU)
	}
	return float64(st.Alloc.CPU) / float64(c.CPU)
}

func (a *actor) PickGPUs(st *sim.State, p *sim.Pod, n int, dst []int) []int {
	return a.ext.PickGPUs(st, p, n, dst)
}

// logSoftmax returns log-probabilities of logits (in a reused buffer).
func logSoftmax(logits []float32, buf *[]float64) []float64 {
	if cap(*buf) < len(logits) {
		*buf = make([]float64, len(logits))
	}
	out := (*buf)[:len(logits)]
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	lse := mx + math.Log(sum)
	for i, v := range logits {
		out[i] = float64(v) - lse
	}
	return out
}

// rewarder turns the outcomes of an episode into per-decision rewards.
type rewarder struct {
	w                    Reward
	env                  *sim.Env
	ep                   *episode
	prevFrag, prevCross  float64
	prevUtil             float64
	baseLatency, maxUtil float64
	gpuPrimary           bool
	capCPU, capGPU       float64
	candidatesAtLastStep int
	lastSteps            int
}

func newRewarder(w Reward, env *sim.Env, ep *episode, cfg engine.RunConfig) *rewarder {
	return &rewarder{w: w, env: env, ep: ep, baseLatency: cfg.BaseLatencyMs, maxUtil: cfg.MaxUtil, gpuPrimary: env.GPUPrimary,
		capCPU: float64(env.Capacity.CPU), capGPU: math.Max(float64(env.Capacity.GPU), 1)}
}

func (r *rewarder) fragShare(st *sim.State) float64 {
	if r.gpuPrimary {
		return st.FragGPU / r.capGPU
	}
	return st.FragCPU / r.capCPU
}

func (r *rewarder) crossShare(st *sim.State) float64 {
	c, _ := st.CrossZoneShare()
	return c
}

func activeUtil(st *sim.State) float64 {
	var used, capacity float64
	for i := range st.Nodes {
		if nd := &st.Nodes[i]; nd.Pods > 0 {
			used += nd.CPUUsed
			capacity += float64(nd.CPU)
		}
	}
	if capacity == 0 {
		return 0
	}
	return used / capacity
}

// outcome is the engine's OnOutcome hook.
func (r *rewarder) outcome(st *sim.State, p *sim.Pod, node int) {
	var rw float64
	w := r.w
	if node < 0 {
		demand := float64(p.CPU) / r.capCPU
		if r.gpuPrimary {
			demand = float64(p.GPUDemand()) / r.capGPU
		}
		rw -= w.Failure*demand + w.FailureCount
	} else {
		if w.Fragmentation != 0 {
			f := r.fragShare(st)
			rw -= w.Fragmentation * (f - r.prevFrag)
			r.prevFrag = f
		}
		if w.CrossZone != 0 && p.Service >= 0 {
			c := r.crossShare(st)
			rw -= w.CrossZone * (c - r.prevCross)
			r.prevCross = c
		}
		nd := &st.Nodes[node]
		if w.CrossZonePod != 0 && p.Service >= 0 {
			if c, ok := st.PodCrossZoneShare(int(p.Service), int(nd.Zone)); ok {
				rw -= w.CrossZonePod * c
			}
		}
		if w.Latency != 0 {
			rho := math.Min(nd.CPUUsed/float64(nd.CPU), r.maxUtil)
			lat := r.baseLatency / (1 - rho)
			if p.Service >= 0 {
				lat += st.DependencyRTT(int(p.Service), int(nd.Zone))
			}
			rw -= w.Latency * lat / 100
		}
		if w.LatencyProxy != 0 {
			rw -= w.LatencyProxy * st.LatencyProxy(p.Service, node, r.baseLatency) / 100
		}
		if w.Carbon != 0 {
			watts := float64(p.CPU)*p.Usage/1000*nd.WattsPerCore + float64(p.GPUDemand())/sim.MilliGPU*nd.WattsPerGPU
			rw -= w.Carbon * watts / 1000 * r.env.CarbonAt(nd.CarbonZone, st.Now) / 100
		}
		if w.Utilization != 0 {
			u := activeUtil(st)
			rw += w.Utilization * (u - r.prevUtil)
			r.prevUtil = u
		}
	}
	if n := len(r.ep.steps); n > 0 {
		if n != r.lastSteps && w.DecisionLatency != 0 {
			rw -= w.DecisionLatency * float64(r.ep.steps[n-1].k) / 1000
		}
		r.lastSteps = n
		r.ep.steps[n-1].reward += float32(rw)
		r.ep.ret += rw
	}
}

// newTeacher builds the behaviour-cloning teacher for one episode (ctx:
// the episode's, which the lookahead planner checks).
func newTeacher(ctx context.Context, bc BCConfig, env *sim.Env, seed uint64) (sim.Policy, error) {
	switch bc.Teacher {
	case "fgd-lookahead":
		return newLookahead(ctx, bc.Lookahead, env, seed), nil
	case baseline.FGDPressure:
		return baseline.NewFGDPressure(env, bc.PressureWeight), nil
	case baseline.FGDStrand:
		return baseline.NewFGDStrand(env, bc.PressureWeight, bc.StrandWeight), nil
	}
	f, err := baseline.Lookup(bc.Teacher)
	if err != nil {
		return nil, fmt.Errorf("bc teacher: %w", err)
	}
	t, err := f.New(env)
	if err != nil {
		return nil, err
	}
	if _, ok := t.(sim.Starter); ok {
		return nil, fmt.Errorf("%w: teacher %s is randomised; pick a deterministic baseline", ErrConfig, bc.Teacher)
	}
	return t, nil
}

// runEpisode runs one episode on env with the actor's network and mode.
func runEpisode(ctx context.Context, env *sim.Env, net *nn.Net, schema policy.Schema, mode actMode, bc BCConfig, rcfg engine.RunConfig, w Reward, actSeed uint64, record bool, warmUntil float64) (*episode, error) {
	ep := &episode{}
	ext := policy.NewExtractor(env)
	// the trainer annotates its environments with the model's own
	// GraphSAGE weights (trainer.sage): their partners are the model's
	ext.UsePartnersOf(env.PartnersEncoder)
	a := &actor{net: net, schema: schema, ext: ext, rng: rand.New(rand.NewPCG(actSeed, 0xac7)), mode: mode, ep: ep, record: record, warm: warmUntil > 0, warmUntil: warmUntil, recordFrom: bc.RecordFrom, topK: bc.RecordTopK, soft: bc.SoftTargets}
	if mode == actTeacher || a.warm {
		t, err := newTeacher(ctx, bc, env, actSeed)
		if err != nil {
			return nil, err
		}
		a.teacher = t
	}
	rw := newRewarder(w, env, ep, rcfg)
	rcfg.OnOutcome = rw.outcome
	rcfg.TieBreak = engine.TieFirst // the actor marks exactly one node
	res, err := engine.Run(ctx, env, sim.Factory{Name: "learned-training", New: func(*sim.Env) (sim.Policy, error) { return a, nil }}, rcfg)
	if err != nil {
		return nil, err
	}
	ep.measures = res.Measures
	return ep, nil
}
