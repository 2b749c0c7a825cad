package engine

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/disrupt"
)

// Mode is an evaluation mode.
type Mode string

// Evaluation modes.
const (
	// Replay: pods arrive and leave at their trace times; pods that do not
	// fit wait (pending) and are retried when capacity frees up.
	Replay Mode = "replay"
	// Inflate: the FGD paper's method. Pods are sampled (seeded, with
	// replacement) from the workload and placed one by one, never leaving,
	// until the arrived demand reaches a target share of cluster capacity.
	Inflate Mode = "inflate"
)

// ParseMode parses "replay" or "inflate".
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case Replay, Inflate:
		return Mode(s), nil
	}
	return "", fmt.Errorf("%w: mode %q (want replay or inflate)", sim.ErrInvalid, s)
}

// TieBreak selects how ties between equally scored nodes are broken.
type TieBreak string

// Tie-break rules.
const (
	TieRandom TieBreak = "random"
	TieFirst  TieBreak = "first"
)

// Random streams derived from a run's seed; each has its own purpose so
// that, for example, a policy drawing more numbers never changes which pods
// inflate mode samples.
const (
	streamSample   = 1
	streamTieBreak = 2
	streamPolicy   = 3
	streamDisrupt  = 4
)

// RunConfig configures one run. Start from DefaultRunConfig.
type RunConfig struct {
	Mode Mode
	Seed uint64
	// InflateTarget is where inflate mode stops, as a share of cluster
	// capacity of InflateResource (default 1.3, the paper's 130%).
	InflateTarget float64
	// InflateStep is the spacing of the recorded curve (default 0.01).
	InflateStep float64
	// InflateResource is "gpu" or "cpu"; "" picks gpu when the cluster has
	// GPUs and the workload asks for them, cpu otherwise.
	InflateResource string
	// TieBreak is how equal best scores are resolved: TieRandom (default,
	// uniform with the seeded tie-break stream, like kube-scheduler's
	// selectHost) or TieFirst (lowest node index, like the deterministic
	// scheduler fork the FGD paper's artifact runs on).
	TieBreak TieBreak
	// Samples is the number of evenly spaced time samples in replay mode
	// (default 240).
	Samples int
	// BaseLatencyMs is the service time of a pod on an idle node in the
	// latency proxy (default 10).
	BaseLatencyMs float64
	// MaxUtil caps node utilisation in the latency proxy's 1/(1-rho)
	// slowdown (default 0.95, i.e. at most 20x).
	MaxUtil float64
	// Check verifies the state's invariants after every binding (slow; for
	// tests and debugging).
	Check bool
	// FailedClasses makes the run count its failed pods by class
	// (Result.Failures; one pass over the workload per run, about 4 ms
	// for 27,000 constrained pods). Off (nil Failures) unless set:
	// trainers do not pay for it; edgectl sim sets it.
	FailedClasses bool
	// OnBind, when set, is called before every binding with the chosen node
	// and devices; the state still shows the node before the pod lands.
	OnBind func(st *sim.State, pod *sim.Pod, node int, gpus []int)
	// OnOutcome, when set, is called after every scheduling attempt with
	// the node the pod was bound to, or -1 when nothing fitted (in replay
	// the pod may still be placed on a later retry). Trainers compute
	// rewards here.
	OnOutcome func(st *sim.State, pod *sim.Pod, node int)
	// Progress, when set, is called with work done out of total now and
	// then; total is permille of the target (inflate) or events (replay).
	Progress func(done, total int64)
}

// DefaultRunConfig returns the defaults for a mode.
func DefaultRunConfig(mode Mode) RunConfig {
	return RunConfig{Mode: mode, Seed: 1, TieBreak: TieRandom, InflateTarget: 1.3, InflateStep: 0.01, Samples: 240, BaseLatencyMs: 10, MaxUtil: 0.95}
}

// MaxCurveMarks caps the marks of an inflate curve, InflateTarget /
// InflateStep (a point every step; marks are rounded to 1e-9 anyway): at
// the largest target, 10, a step of at least 1e-4. A step of 1e-300
// looped without end; 1e-8 built 130 million marks.
const MaxCurveMarks = 100_000

// ErrInflateStep wraps a refused InflateStep (edgectl sim names its
// --step flag); it wraps sim.ErrInvalid.
var ErrInflateStep = fmt.Errorf("%w: inflate step", sim.ErrInvalid)

// Validate checks the configuration.
func (c *RunConfig) Validate() error {
	if _, err := ParseMode(string(c.Mode)); err != nil {
		return err
	}
	switch {
	case !(c.InflateTarget > 0 && c.InflateTarget <= 10):
		return fmt.Errorf("%w: inflate target must be in (0, 10], got %v", sim.ErrInvalid, c.InflateTarget)
	case !(c.InflateStep > 0 && c.InflateStep <= c.InflateTarget):
		return fmt.Errorf("%w must be in (0, target], got %v", ErrInflateStep, c.InflateStep)
	case !(c.InflateTarget/c.InflateStep <= MaxCurveMarks):
		return fmt.Errorf("%w %v makes more than %d curve marks up to the target %v: want a step of at least %.3g", ErrInflateStep, c.InflateStep, MaxCurveMarks, c.InflateTarget, c.InflateTarget/MaxCurveMarks)
	case c.TieBreak != "" && c.TieBreak != TieRandom && c.TieBreak != TieFirst:
		return fmt.Errorf("%w: tie break %q (want random or first)", sim.ErrInvalid, c.TieBreak)
	case c.InflateResource != "" && c.InflateResource != "gpu" && c.InflateResource != "cpu":
		return fmt.Errorf("%w: inflate resource %q (want gpu or cpu)", sim.ErrInvalid, c.InflateResource)
	case c.Samples < 2 || c.Samples > 100000:
		return fmt.Errorf("%w: samples must be in [2, 100000], got %d", sim.ErrInvalid, c.Samples)
	case !(c.BaseLatencyMs > 0 && c.BaseLatencyMs <= 1e5):
		return fmt.Errorf("%w: base latency must be in (0, 1e5] ms, got %v", sim.ErrInvalid, c.BaseLatencyMs)
	case !(c.MaxUtil > 0 && c.MaxUtil < 1):
		return fmt.Errorf("%w: max utilisation must be in (0, 1), got %v", sim.ErrInvalid, c.MaxUtil)
	}
	return nil
}

// CurvePoint is one step of an inflate sweep.
type CurvePoint struct {
	// ArrivedShare is the arrived demand of the inflate resource (GPU unless
	// inflating by CPU) over its capacity; the curve has a point at every
	// step, at exactly 1 and at the target.
	ArrivedShare float64 `json:"arrived_gpu_share"`
	// UnallocatedGPUShare is 1 - allocated GPU / GPU capacity.
	UnallocatedGPUShare float64 `json:"unallocated_gpu_share"`
	FailedPods          int     `json:"failed_pods"`
	ArrivedPods         int     `json:"arrived_pods"`
	AllocCPUShare       float64 `json:"alloc_cpu_share"`
	FragGPUShare        float64 `json:"frag_gpu_share"`
}

// SeriesPoint is one utilisation sample: X is seconds (replay) or the
// arrived share of the inflate resource (inflate).
type SeriesPoint struct {
	X        float64 `json:"x"`
	AllocCPU float64 `json:"alloc_cpu"`
	AllocMem float64 `json:"alloc_mem"`
	AllocGPU float64 `json:"alloc_gpu"`
	UsedCPU  float64 `json:"used_cpu"`
	UsedMem  float64 `json:"used_mem"`
}

// Result is what one run of one policy measured.
type Result struct {
	Policy      string             `json:"policy"`
	Seed        uint64             `json:"seed"`
	Mode        Mode               `json:"mode"`
	WallSeconds float64            `json:"wall_seconds"`
	Decisions   int                `json:"decisions"`
	Measures    map[string]float64 `json:"measures"`
	Curve       []CurvePoint       `json:"curve,omitempty"`
	Series      []SeriesPoint      `json:"series,omitempty"`
	// Failures are the pod classes with the most failed pods (at most
	// MaxFailedClasses; nil when none failed or RunConfig.FailedClasses
	// is off).
	Failures []FailedClass `json:"failures,omitempty"`
}

// ErrPolicy wraps a policy's misbehaviour (an invalid device choice, a
// failing Start).
var ErrPolicy = errors.New("sim: policy error")

// Run evaluates one policy on env. It is deterministic for a given env,
// policy and config (decision latency aside).
func Run(ctx context.Context, env *sim.Env, f sim.Factory, cfg RunConfig) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Mode == Replay && !env.HasTimes {
		return nil, fmt.Errorf("%w: replay mode needs pods with creation times", sim.ErrInvalid)
	}
	pol, err := f.New(env)
	if err != nil {
		return nil, fmt.Errorf("new policy %s: %w", f.Name, err)
	}
	st := sim.NewState(env)
	st.LoadModel.MaxUtil, st.NoiseSeed = cfg.MaxUtil, cfg.Seed
	r := &runner{
		env: env, st: st, pol: pol, cfg: cfg,
		tie:    rand.New(rand.NewPCG(cfg.Seed, streamTieBreak)),
		cand:   make([]int32, 0, len(env.Nodes)),
		scores: make([]float64, len(env.Nodes)),
		rec:    newRecorder(env, cfg),
	}
	if picker, ok := pol.(sim.GPUPicker); ok {
		r.picker = picker
	}
	if f, ok := pol.(sim.NodeFilter); ok {
		r.filter = f
	}
	if s, ok := pol.(sim.Starter); ok {
		if err := s.Start(st, rand.New(rand.NewPCG(cfg.Seed, streamPolicy))); err != nil {
			return nil, fmt.Errorf("%w: start %s: %v", ErrPolicy, pol.Name(), err)
		}
	}
	start := time.Now()
	switch cfg.Mode {
	case Inflate:
		err = r.inflate(ctx)
	case Replay:
		err = r.replay(ctx)
	}
	if err != nil {
		return nil, err
	}
	res := r.rec.result()
	for name, v := range res.Measures {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: measure %s is %v (inputs out of range?)", sim.ErrInvalid, name, v)
		}
	}
	res.Policy = pol.Name()
	res.Seed = cfg.Seed
	res.Mode = cfg.Mode
	res.WallSeconds = time.Since(start).Seconds()
	res.Decisions = r.decisions
	return res, nil
}

type runner struct {
	env       *sim.Env
	st        *sim.State
	pol       sim.Policy
	picker    sim.GPUPicker
	filter    sim.NodeFilter
	cfg       RunConfig
	tie       *rand.Rand
	cand      []int32
	scores    []float64
	gpus      []int
	ties      []int32
	rec       *recorder
	decisions int
}

// schedule tries to bind pod id; it reports whether the pod was placed.
func (r *runner) schedule(id int32) (bool, error) {
	st := r.st
	p := &st.Pods[id]
	t0 := time.Now()
	r.decisions++
	r.cand = r.cand[:0]
	for n := range st.Nodes {
		if st.Feasible(n, p) && (r.filter == nil || r.filter.Admit(st, p, n)) {
			r.cand = append(r.cand, int32(n))
		}
	}
	if len(r.cand) == 0 {
		r.rec.decision(time.Since(t0))
		r.rec.noFit(st, id)
		if r.cfg.OnOutcome != nil {
			r.cfg.OnOutcome(st, p, -1)
		}
		return false, nil
	}
	scores := r.scores[:len(r.cand)]
	r.pol.Score(st, p, r.cand, scores)
	n := int(r.pick(scores))
	if r.picker != nil {
		r.gpus = r.picker.PickGPUs(st, p, n, r.gpus[:0])
	} else {
		r.gpus = st.BestFitGPUs(n, p, r.gpus[:0])
	}
	r.rec.decision(time.Since(t0))
	if r.cfg.OnBind != nil {
		r.cfg.OnBind(st, p, n, r.gpus)
	}
	if err := st.Bind(id, n, r.gpus); err != nil {
		return false, fmt.Errorf("%w: %s: %v", ErrPolicy, r.pol.Name(), err)
	}
	if r.cfg.Check {
		if err := st.CheckInvariants(); err != nil {
			return false, err
		}
	}
	if r.cfg.OnOutcome != nil {
		r.cfg.OnOutcome(st, p, n)
	}
	return true, nil
}

// pick returns the candidate with the highest score, breaking ties
// uniformly at random. NaN scores rank lowest.
func (r *runner) pick(scores []float64) int32 {
	best := math.Inf(-1)
	for _, s := range scores {
		if s > best {
			best = s
		}
	}
	eps := 1e-9 * max(1, math.Abs(best))
	if math.IsInf(best, 0) {
		eps = 0
	}
	r.ties = r.ties[:0]
	for i, s := range scores {
		if s >= best-eps || (math.IsInf(best, -1) && !(s > best)) {
			r.ties = append(r.ties, r.cand[i])
		}
	}
	if len(r.ties) == 1 || r.cfg.TieBreak == TieFirst {
		return r.ties[0]
	}
	return r.ties[r.tie.IntN(len(r.ties))]
}

func (r *runner) inflateResource() string {
	if r.cfg.InflateResource != "" {
		return r.cfg.InflateResource
	}
	if r.env.Capacity.GPU > 0 {
		for i := range r.env.Pods {
			if r.env.Pods[i].GPUs > 0 {
				return "gpu"
			}
		}
	}
	return "cpu"
}

func (r *runner) inflate(ctx context.Context) error {
	env, st := r.env, r.st
	if len(env.Pods) == 0 {
		return fmt.Errorf("%w: inflate mode needs a workload with pods", sim.ErrInvalid)
	}
	res := r.inflateResource()
	capacity, demand := env.Capacity.GPU, func(p *sim.Pod) int64 { return p.GPUDemand() }
	if res == "cpu" {
		capacity, demand = env.Capacity.CPU, func(p *sim.Pod) int64 { return p.CPU }
	} else if capacity == 0 {
		return fmt.Errorf("%w: inflate by gpu on a cluster without GPUs", sim.ErrInvalid)
	}
	var positive bool
	for i := range env.Pods {
		if demand(&env.Pods[i]) > 0 {
			positive = true
			break
		}
	}
	if !positive {
		return fmt.Errorf("%w: no pod of the workload asks for %s, so inflating by it never ends", sim.ErrInvalid, res)
	}
	r.rec.inflate = true
	// Expected samples to reach the target: target / mean demand per pod.
	var sum int64
	for i := range env.Pods {
		sum += demand(&env.Pods[i])
	}
	target := int64(math.Ceil(r.cfg.InflateTarget * float64(capacity)))
	if expected := float64(target) / (float64(sum) / float64(len(env.Pods))); expected > MaxInflatePods {
		return fmt.Errorf("%w: inflating to %.0f%% of capacity would take about %.3g pods (at most %d)", sim.ErrInvalid, 100*r.cfg.InflateTarget, expected, MaxInflatePods)
	}
	sample := rand.New(rand.NewPCG(r.cfg.Seed, streamSample))
	marks := curveMarks(r.cfg.InflateTarget, r.cfg.InflateStep)
	markDemand := func(share float64) int64 { return int64(math.Ceil(share * float64(capacity))) }
	var arrived int64
	r.rec.sample(st, 0)
	r.rec.curvePoint(st, 0)
	next := 1
	var lastProgress int64 = -1
	for arrived < target {
		if len(st.Pods)%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if len(st.Pods) >= MaxInflatePods {
			return fmt.Errorf("%w: inflate sampled %d pods without reaching the target", sim.ErrInvalid, MaxInflatePods)
		}
		id, err := st.AddPod(env.Pods[sample.IntN(len(env.Pods))])
		if err != nil {
			return err
		}
		p := &st.Pods[id]
		arrived += demand(p)
		r.rec.arrive(p)
		ok, err := r.schedule(id)
		if err != nil {
			return err
		}
		r.rec.outcome(id, p, ok)
		// Record every mark this pod's demand crossed.
		for next < len(marks) && arrived >= markDemand(marks[next]) {
			r.rec.sample(st, marks[next])
			r.rec.curvePoint(st, marks[next])
			next++
		}
		if r.cfg.Progress != nil {
			if pm := min(1000, arrived*1000/target); pm != lastProgress {
				lastProgress = pm
				r.cfg.Progress(pm, 1000)
			}
		}
	}
	return nil
}

// MaxInflatePods bounds the pods one inflate run may sample.
const MaxInflatePods = 20_000_000

// curveMarks returns the arrived shares an inflate curve records: 0, every
// step below the target, exactly 1 (when the target reaches it) and the
// target itself. It takes at most MaxCurveMarks steps (all a validated
// configuration makes), whatever step it is given.
func curveMarks(target, step float64) []float64 {
	n := MaxCurveMarks + 1
	if r := target / step; r >= 0 && r < MaxCurveMarks {
		n = int(r) + 1
	}
	marks := make([]float64, 0, n+2)
	for k := 0; k <= MaxCurveMarks; k++ {
		m := math.Round(float64(k)*step*1e9) / 1e9
		if m >= target-1e-9 {
			break
		}
		marks = append(marks, m)
	}
	if target > 1+1e-9 {
		marks = append(marks, 1)
	}
	marks = append(marks, target)
	slices.Sort(marks)
	return slices.CompactFunc(marks, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })
}

// timedEvent is a departure or a pending pod's deadline.
type timedEvent struct {
	t  int64
	id int32
}
type eventHeap []timedEvent

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].id < h[j].id
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(timedEvent)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// replay state of each pod
const (
	podWaiting uint8 = iota
	podPending
	podPlaced
	podFailed
	podDone
)

func (r *runner) replay(ctx context.Context) error {
	env, st := r.env, r.st
	n := len(env.Pods)
	// Pods join the run in arrival order, so a pod's ID is its rank.
	tpl := make([]int, n)
	for i := range tpl {
		tpl[i] = i
	}
	sort.SliceStable(tpl, func(a, b int) bool { return env.Pods[tpl[a]].Create < env.Pods[tpl[b]].Create })
	for _, t := range tpl {
		if _, err := st.AddPod(env.Pods[t]); err != nil {
			return err
		}
	}
	t0, tEnd := int64(0), int64(0)
	if n > 0 {
		t0 = st.Pods[0].Create
		tEnd = st.Pods[n-1].Create
	}
	for i := range st.Pods {
		if d := st.Pods[i].Delete; d != sim.NoDeletion && d > tEnd {
			tEnd = d
		}
	}
	samples := make([]int64, r.cfg.Samples)
	for i := range samples {
		samples[i] = t0 + int64(math.Round(float64(tEnd-t0)*float64(i)/float64(len(samples)-1)))
	}
	status := make([]uint8, n)
	placedOnce := make([]bool, n)
	var deps, deadlines eventHeap
	var pending []int32 // ordered by priority (desc), then arrival order
	byPriority := func(a, b int32) int {
		pa, pb := &st.Pods[a], &st.Pods[b]
		if pa.Priority != pb.Priority {
			return int(pb.Priority) - int(pa.Priority)
		}
		return int(a) - int(b)
	}
	bound := func(id int32) {
		p := &st.Pods[id]
		status[id] = podPlaced
		if placedOnce[id] { // rescheduled after an eviction
			return
		}
		placedOnce[id] = true
		r.rec.outcome(id, p, true)
		if p.Delete != sim.NoDeletion {
			heap.Push(&deps, timedEvent{t: p.Delete, id: id})
		}
	}
	// retry schedules the pending pods that fit on node now; pending
	// keeps its order.
	retry := func(node int) error {
		kept := pending[:0]
		for _, id := range pending {
			if st.Feasible(node, &st.Pods[id]) {
				ok, err := r.schedule(id)
				if err != nil {
					return err
				}
				if ok {
					bound(id)
					continue
				}
			}
			kept = append(kept, id)
		}
		pending = kept
		return nil
	}
	addPending := func(id int32) {
		status[id] = podPending
		i, _ := slices.BinarySearchFunc(pending, id, byPriority)
		pending = slices.Insert(pending, i, id)
		if d := st.Pods[id].Delete; d != sim.NoDeletion {
			heap.Push(&deadlines, timedEvent{t: d, id: id})
		}
	}
	// place schedules an arriving (or evicted) pod: bound, failed when its
	// end has come, or pending.
	place := func(id int32) error {
		p := &st.Pods[id]
		ok, err := r.schedule(id)
		switch {
		case err != nil:
			return err
		case ok:
			bound(id)
		case p.Delete != sim.NoDeletion && p.Delete <= st.Now:
			status[id] = podFailed
			r.rec.outcome(id, p, false)
		default:
			addPending(id)
		}
		return nil
	}
	disruptions, err := disrupt.Schedule(rand.New(rand.NewPCG(r.cfg.Seed, streamDisrupt)), t0, tEnd+1, env.Disruptions, r.failureRates(), env.Uplinks)
	if err != nil {
		return fmt.Errorf("%w: %v", sim.ErrInvalid, err)
	}
	di := 0
	ai, si := 0, 0
	totalEvents := int64(2 * n)
	var done, lastProgress int64
	st.Now = t0
	r.rec.startClock(t0)
	for iter := 0; ai < n || deps.Len() > 0 || deadlines.Len() > 0 || si < len(samples) || di < len(disruptions); iter++ {
		if iter%64 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		// The next event: at equal times departures go first, then
		// deadlines of pending pods, then arrivals, then the sample.
		var next int64
		kind := 0
		consider := func(t int64, k int) {
			if kind == 0 || t < next {
				next, kind = t, k
			}
		}
		if deps.Len() > 0 {
			consider(deps[0].t, 1)
		}
		if deadlines.Len() > 0 {
			consider(deadlines[0].t, 2)
		}
		if di < len(disruptions) {
			consider(disruptions[di].T, 5)
		}
		if ai < n {
			consider(st.Pods[ai].Create, 3)
		}
		if si < len(samples) {
			consider(samples[si], 4)
		}
		r.rec.advanceTo(st, next)
		st.Now = next
		switch kind {
		case 1: // a pod leaves: retry the pending pods that now fit there
			d := heap.Pop(&deps).(timedEvent)
			done++
			if status[d.id] != podPlaced { // evicted and not back: its deadline handles it
				continue
			}
			status[d.id] = podDone
			node := int(st.Placements[d.id].Node)
			if err := st.Unbind(d.id); err != nil {
				return err
			}
			if err := retry(node); err != nil {
				return err
			}
		case 2: // a pending pod's time is up: it failed (or was lost)
			d := heap.Pop(&deadlines).(timedEvent)
			if status[d.id] == podPending {
				status[d.id] = podFailed
				if placedOnce[d.id] {
					r.rec.lost++
				} else {
					r.rec.outcome(d.id, &st.Pods[d.id], false)
				}
				if i, found := slices.BinarySearchFunc(pending, d.id, byPriority); found {
					pending = slices.Delete(pending, i, i+1)
				}
			}
		case 3:
			id := int32(ai)
			ai++
			p := &st.Pods[id]
			r.rec.arrive(p)
			done++
			if err := place(id); err != nil {
				return err
			}
		case 4:
			r.rec.sample(st, float64(st.Now))
			si++
		case 5:
			ev := disruptions[di]
			di++
			if err := r.disrupt(ev, place, retry); err != nil {
				return err
			}
		}
		if r.cfg.Progress != nil && (done-lastProgress)*100 >= totalEvents {
			lastProgress = done
			r.cfg.Progress(min(done, totalEvents), totalEvents)
		}
	}
	r.rec.pendingAtEnd(len(pending))
	if r.cfg.Progress != nil {
		r.cfg.Progress(totalEvents, totalEvents)
	}
	return nil
}

// failureRates lists the nodes' failure rates (per day).
func (r *runner) failureRates() []float64 {
	out := make([]float64, len(r.env.Nodes))
	for i := range r.env.Nodes {
		out[i] = r.env.Nodes[i].FailureRate
	}
	return out
}

// disrupt applies one disruption event. A failed node's pods are evicted
// and rescheduled at once, like a controller recreating them (resched
// places each); a repaired node takes pending pods (retry).
func (r *runner) disrupt(ev disrupt.Event, resched func(int32) error, retry func(int) error) error {
	st := r.st
	switch ev.Kind {
	case disrupt.NodeDown:
		r.rec.nodeFailures++
		var evicted []int32
		for _, id := range st.Running() {
			if int(st.Placements[id].Node) == int(ev.Index) {
				evicted = append(evicted, id)
			}
		}
		slices.Sort(evicted)
		for _, id := range evicted {
			if err := st.Unbind(id); err != nil {
				return err
			}
		}
		st.SetDown(int(ev.Index), true)
		r.rec.evicted += len(evicted)
		for _, id := range evicted {
			if err := resched(id); err != nil {
				return err
			}
		}
	case disrupt.NodeUp:
		st.SetDown(int(ev.Index), false)
		return retry(int(ev.Index))
	case disrupt.FlapStart:
		r.rec.flaps++
		st.SetFlap(int(ev.Index), true)
	case disrupt.FlapEnd:
		st.SetFlap(int(ev.Index), false)
	}
	return nil
}
