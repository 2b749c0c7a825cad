package serving

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/edgesched/edgesched/edge-plugin/sources"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/sim"
)

// MaxScore is the top of the normalised scores (the framework's
// MaxNodeScore, 100): every normalised score fits a byte.
const MaxScore = fwk.MaxNodeScore

// Options configures a Core. The zero value of every field but Target is
// usable.
type Options struct {
	// Target is the target workload FGD's fragmentation is measured
	// against (required; LoadTarget).
	Target *sim.TargetWorkload
	// TelemetryMaxAge is how old a node's telemetry summary may be
	// (<= 0: kubefmt.DefaultTelemetryMaxAge).
	TelemetryMaxAge time.Duration
	// ScanEvery is the longest a node of the snapshot goes unchecked while
	// it is neither a cycle's candidate nor marked (Mark); 0 checks every
	// node every cycle.
	ScanEvery time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Logger receives telemetry transitions (zero: klog.Background()).
	Logger klog.Logger
}

// Core is the serving core: it converts the scheduler's snapshot into the
// simulator's view, scores a pod's candidate nodes with the model in use
// through the policy code path the simulator runs (one score cache),
// chooses GPU devices, explains a choice and evaluates the scheduling
// policy. It knows the framework's read-only NodeInfo and nothing else of
// it: no CycleState, Status or Handle (the plugin and the extender hold
// those).
type Core struct {
	models *sources.ModelStore
	policy *sources.PolicyRules
	conv   *converter
	now    func() time.Time
	// bufs holds *cycleBufs: the per-node slices of cycles released
	// (Release). The zero value is an empty pool.
	bufs sync.Pool
}

// New returns a Core scoring with models' current model.
func New(models *sources.ModelStore, o Options) *Core {
	RegisterMetrics()
	c := &Core{models: models, policy: &sources.PolicyRules{}, conv: newConverter(o.Target), now: o.Now}
	if c.now == nil {
		c.now = time.Now
	}
	c.conv.deps = &sources.Dependencies{}
	c.conv.topo = &sources.Topology{}
	c.conv.telMaxAge = o.TelemetryMaxAge
	c.conv.scanEvery = o.ScanEvery
	c.conv.clock = func() time.Time { return c.now() }
	if o.Logger.GetSink() != nil {
		c.conv.log = o.Logger
	}
	return c
}

// Models is the model store the core scores with.
func (c *Core) Models() *sources.ModelStore { return c.models }

// Dependencies is the service dependency graph in use (fed by
// sources.StartDependencies).
func (c *Core) Dependencies() *sources.Dependencies { return c.conv.deps }

// Topology is the site topology in use (fed by sources.StartTopology).
func (c *Core) Topology() *sources.Topology { return c.conv.topo }

// Policy is the scheduling policy in use (fed by sources.StartPolicy).
func (c *Core) Policy() *sources.PolicyRules { return c.policy }

// Target is the target workload.
func (c *Core) Target() *sim.TargetWorkload { return c.conv.target }

// Now reads the core's clock.
func (c *Core) Now() time.Time { return c.now() }

// SetClock replaces the clock (tests; before the first cycle).
func (c *Core) SetClock(now func() time.Time) { c.now = now }

// SetScanEvery replaces Options.ScanEvery (tests and benchmarks; before
// the first cycle).
func (c *Core) SetScanEvery(d time.Duration) { c.conv.scanEvery = d }

// SetTelemetryMaxAge replaces Options.TelemetryMaxAge (tests; before the
// first cycle).
func (c *Core) SetTelemetryMaxAge(d time.Duration) { c.conv.telMaxAge = d }

// SetLogger replaces Options.Logger (tests; before the first cycle).
func (c *Core) SetLogger(l klog.Logger) { c.conv.log = l }

// NodeGPUs returns the node's GPUs, GPU model and per-device free share
// (read-only) from its conversion, cached by the NodeInfo's generation.
// Safe for concurrent use (Filter runs in parallel).
func (c *Core) NodeGPUs(ni fwk.NodeInfo) (gpus int, model string, free []int64) {
	e := c.conv.node(ni)
	return e.spec.GPUs, e.spec.GPUModel, e.free
}

// GPUFits is sim.State.Feasible's GPU rule on per-device free shares: n
// whole free devices, or one device with milli free for a share.
func GPUFits(free []int64, n int32, milli int64) bool { return gpuFits(free, n, milli) }

// Mark tells the core that nodeName changed outside a cycle it saw (a pod
// was assumed or forgotten there): the next cycle checks it.
func (c *Core) Mark(nodeName string) { c.conv.mark(nodeName) }

// Reserve remembers the devices chosen for pod uid on node until the
// pod's annotation is in the snapshot (or reservationTTL passes).
func (c *Core) Reserve(uid types.UID, node string, devices []int) {
	c.conv.res.put(uid, node, devices, c.now())
}

// Reserved returns the devices reserved for pod uid on node.
func (c *Core) Reserved(uid types.UID, node string) ([]int, bool) { return c.conv.res.get(uid, node) }

// Unreserve forgets pod uid's reservation.
func (c *Core) Unreserve(uid types.UID) { c.conv.res.m.Delete(uid) }

// View is the simulator's picture of the cluster a cycle scores on. It is
// only used inside WithView, WithCurrent or Fresh's caller, never
// concurrently.
type View = view

// Env is the view's simulator environment.
func (v *view) Env() *sim.Env { return v.env }

// State is the view's simulator state.
func (v *view) State() *sim.State { return v.st }

// Node is the index of the named node in the view.
func (v *view) Node(name string) (int, bool) {
	i, ok := v.index[name]
	return i, ok
}

// WithView brings the kept view up to date with the snapshot all and
// runs fn on it under the core's lock; cands are the cycle's candidates
// (nil checks every node).
func (c *Core) WithView(all, cands []fwk.NodeInfo, fn func(*View) error) error {
	return c.conv.withView(all, cands, fn)
}

// WithCurrent runs fn on the kept view if it is still the one of epoch
// (no cycle rebuilt it since); ok is false otherwise.
func (c *Core) WithCurrent(epoch uint64, fn func(*View) error) (ok bool, err error) {
	return c.conv.withCurrent(epoch, fn)
}

// Fresh builds a view of infos alone, owned by the caller.
func (c *Core) Fresh(infos []fwk.NodeInfo) (*View, error) { return c.conv.fresh(infos) }

// Cycle holds one pod's scoring: the view it scored on (for the device
// choice and the explanation) and the normalised score of every
// candidate. Read-only once Score returns, until Release.
type Cycle struct {
	Epoch uint64 // the view this cycle scored on (0: none)
	Pod   sim.Pod
	// Service is the pod's service (kubefmt.ServiceOf); Pod.Service is
	// its index in the view's env, set when the cycle scores.
	Service string
	// Models are the GPU models the pod accepts (empty: any); Pod.GPUMask
	// is their mask in the view's env, set when the cycle scores (the
	// features read it: pod_gpu_spec, pod_model_choice).
	Models []string
	// Model scored the cycle (nil: the cycle fell back, every node 0).
	Model *sources.Model
	// Index is the view's node index (name -> node; immutable once
	// built); Cand and Raw are per candidate: the view node and the
	// model's raw score; ByNode is per view node: its normalised score,
	// or NotScored.
	Index  map[string]int
	ByInfo *NodeIndex // the view's NodeInfo index (immutable)
	Cand   []int32
	Raw    []float32
	ByNode []uint8
	// ByPos is per position in the node list scored: its normalised score
	// (0: not scored); the plugin's NormalizeScore copies it into the
	// framework's list, which holds the same nodes in the same order.
	// PosNames are the names at Spots. nil when the cycle fell back or a
	// scheduling policy applies (Policy != nil).
	ByPos    []uint8
	PosNames [3]string
	// bufs backs Cand, Raw, ByNode and ByPos (from Core.bufs); Release
	// returns it once nothing reads them any more.
	bufs *cycleBufs
	// Policy is the cycle's scheduling policy state (nil: none applies).
	Policy *PolicyCycle
}

// NotScored marks a view node the cycle did not score (MaxScore is 100,
// so every normalised score fits a byte).
const NotScored = 0xff

// SetPod converts pod into the cycle (kubefmt.SimPod); an error (a
// malformed GPU request) is counted as an "error" fallback.
func (s *Cycle) SetPod(pod *v1.Pod) error {
	sp, _, err := kubefmt.SimPod(pod)
	if err != nil {
		metricFallbacks.WithLabelValues("error").Inc()
		return err
	}
	s.Pod, s.Service, s.Models = sp, kubefmt.ServiceOf(pod), podModels(pod)
	return nil
}

// ScoreOf returns the normalised score of node name and whether the cycle
// scored it.
func (s *Cycle) ScoreOf(name string) (int64, bool) {
	if s == nil || s.Model == nil {
		return 0, false
	}
	i, ok := s.Index[name]
	if !ok || i < 0 || i >= len(s.ByNode) || s.ByNode[i] == NotScored {
		return 0, false
	}
	return int64(s.ByNode[i]), true
}

// Candidate returns name's candidate position, or -1 (a linear search:
// the explanation asks once per pod).
func (s *Cycle) Candidate(name string) int {
	if s == nil || s.Model == nil {
		return -1
	}
	i, ok := s.Index[name]
	if !ok || i < 0 || i >= len(s.ByNode) || s.ByNode[i] == NotScored {
		return -1
	}
	return slices.Index(s.Cand, int32(i))
}

// fallBack makes every node score 0 (neutral).
func (s *Cycle) fallBack() {
	s.Model, s.Cand, s.Raw, s.ByNode, s.ByPos, s.bufs = nil, nil, nil, nil, nil, nil
}

// cycleBufs are one cycle's per-node slices. At 5,000 nodes they are
// about 50 KB a cycle: allocated afresh, they were most of a cycle's
// garbage, and the collections they caused cost a tenth of PreScore's
// time (BenchmarkCycle with GOGC=off).
type cycleBufs struct {
	cand          []int32
	raw           []float32
	byNode, byPos []uint8
}

// Release returns s's per-node slices to the core once the cycle reads
// them no more (after Reserve's explanation, or the extender's answer).
// s then scores nothing (ScoreOf and Candidate find no node).
func (c *Core) Release(s *Cycle) {
	if s == nil || s.bufs == nil {
		return
	}
	b := s.bufs
	s.Cand, s.Raw, s.ByNode, s.ByPos, s.bufs = nil, nil, nil, nil, nil
	c.bufs.Put(b)
}

// getBufs returns a cycle's slices from pool: cand empty with room for n
// candidates, raw n long, byNode views long, byPos positions long.
func getBufs(pool *sync.Pool, n, views, positions int) *cycleBufs {
	b, _ := pool.Get().(*cycleBufs)
	if b == nil {
		b = &cycleBufs{}
	}
	b.cand = slices.Grow(b.cand[:0], n)
	b.raw = slices.Grow(b.raw[:0], n)[:0]
	b.byNode = slices.Grow(b.byNode[:0], views)[:views]
	b.byPos = slices.Grow(b.byPos[:0], positions)[:positions]
	return b
}

// Spots are the three positions of an n-long node list PosNames holds.
func Spots(n int) [3]int { return [3]int{0, n / 2, n - 1} }

// errNoModel marks a cycle without a model.
var errNoModel = errors.New("no model loaded")

// Score scores s's pod on nodes (the feasible ones) in the cluster all
// with the model in use, observing the inference time. On failure, a
// panic included, or without a model, every node scores 0 (neutral), the
// fallback is counted and reason says why (no_model, panic, error; "" on
// success); err is what went wrong, for the caller's log.
func (c *Core) Score(all, nodes []fwk.NodeInfo, s *Cycle) (reason string, err error) {
	m := c.models.Current()
	start := time.Now()
	reason, err = c.score(m, all, nodes, s)
	metricInference.Observe(time.Since(start).Seconds())
	if reason != "" {
		metricFallbacks.WithLabelValues(reason).Inc()
		s.fallBack()
	}
	return reason, err
}

// score fills ps (view and scores); it contains panics. reason is ""
// on success.
func (c *Core) score(m *sources.Model, all, nodes []fwk.NodeInfo, ps *Cycle) (reason string, err error) {
	defer func() {
		if r := recover(); r != nil {
			metricPanics.Inc()
			reason, err = "panic", fmt.Errorf("panic in policy: %v", r)
			klog.V(4).InfoS("EdgePolicy panic stack", "stack", string(debug.Stack()))
		}
	}()
	if m == nil {
		return "no_model", nil
	}
	reason = ""
	err = c.conv.withView(all, nodes, func(v *view) error {
		ps.Epoch = v.epoch
		ps.Pod.Service = serviceIndex(v.env, ps.Service)
		ps.Pod.GPUMask = gpuMaskOf(v.env, ps.Models)
		bufs := getBufs(&c.bufs, len(nodes), len(v.st.Nodes), len(nodes))
		cand := bufs.cand
		pos := slices.Grow(v.pos[:0], len(nodes)) // nodes' position of each candidate
		x := viewIndexer{c: c.conv, v: v}
		for k, ni := range nodes {
			// Only nodes the simulator also finds feasible are scored
			// (the features assume the pod fits); others keep 0.
			if i, ok := x.index(ni); ok && v.st.Feasible(i, &ps.Pod) {
				cand = append(cand, int32(i))
				pos = append(pos, int32(k))
			}
		}
		v.pos = pos
		if len(cand) == 0 {
			c.bufs.Put(bufs)
			return nil
		}
		raw := bufs.raw[:len(cand)]
		if err := v.scoreCandidates(m, &ps.Pod, cand, raw); err != nil {
			return err
		}
		// The model's decision rule (a band the FGD score orders, or caps
		// on requests and measured CPU) works on the same view as the
		// simulator's learned policy, so the node with MaxScore is the one
		// the simulator would bind.
		dec := slices.Grow(v.dec[:0], len(raw))[:len(raw)]
		for j, r := range raw {
			dec[j] = float64(r)
		}
		v.ext.Decide(m.Header.Decision, v.st, &ps.Pod, cand, dec)
		norm := slices.Grow(v.norm[:0], len(raw))[:len(raw)]
		normalizeTo(norm, dec)
		v.dec, v.norm = dec, norm
		byNode := bufs.byNode
		for i := range byNode {
			byNode[i] = NotScored
		}
		for j, i := range cand {
			byNode[i] = norm[j]
		}
		if ps.Policy == nil {
			byPos := bufs.byPos
			clear(byPos)
			for j, k := range pos {
				byPos[k] = norm[j]
			}
			for k, i := range Spots(len(nodes)) {
				if n := nodes[i].Node(); n != nil {
					ps.PosNames[k] = n.Name
				}
			}
			ps.ByPos = byPos
		}
		bufs.cand, bufs.raw = cand, raw
		ps.Model, ps.Index, ps.ByInfo, ps.Cand, ps.Raw, ps.ByNode, ps.bufs = m, v.index, v.byInfo, cand, raw, byNode, bufs
		return nil
	})
	if err != nil {
		return "error", err
	}
	return "", nil
}

// Normalize maps decision scores to [0, MaxScore] keeping the argmax
// exact: every node tied with the best (as the simulator counts ties)
// gets MaxScore, every other node scales linearly into [0, MaxScore-1].
// NaN ranks lowest.
func Normalize(raw []float64) []int64 {
	b := make([]uint8, len(raw))
	normalizeTo(b, raw)
	out := make([]int64, len(raw))
	for i, v := range b {
		out[i] = int64(v)
	}
	return out
}

// normalizeTo is Normalize into out (len(raw) long; MaxScore is 100, so a
// score fits a byte).
func normalizeTo(out []uint8, raw []float64) {
	clear(out)
	best, worst := math.Inf(-1), math.Inf(1)
	for _, s := range raw {
		// comparisons, false for NaN (max and min order signed zeros
		// and NaNs too: twice the time at 5,000 nodes)
		if s > best {
			best = s
		}
		if s < worst {
			worst = s
		}
	}
	if math.IsInf(best, -1) {
		return
	}
	eps := 1e-9 * max(1, math.Abs(best))
	if math.IsInf(best, 0) {
		eps = 0
	}
	span := best - worst
	linear := span > 0 && !math.IsInf(span, 0)
	scale := float64(MaxScore-1) / span // one division, not one per node
	top := best - eps
	for i, s := range raw {
		switch {
		case s >= top: // false for NaN
			out[i] = uint8(MaxScore)
		case linear && s >= worst:
			// (s-worst)*scale is in [0, MaxScore-1): a conversion
			// truncates it as math.Floor would, without its call
			out[i] = uint8(min(MaxScore-1, int64((s-worst)*scale)))
		default: // NaN, or no linear scale
			out[i] = uint8(fwk.MinNodeScore)
		}
	}
}

// PickDevices is the policy's device choice for pod on nodeName: on the
// view of epoch if no cycle rebuilt it since (the cycle that scored the
// node), else on a view of the node alone, which single returns (the
// device choice depends only on the node and the target). It contains
// panics.
func (c *Core) PickDevices(epoch uint64, pod *v1.Pod, nodeName string, single func() (fwk.NodeInfo, error)) (dev []int, err error) {
	defer func() {
		if r := recover(); r != nil {
			metricPanics.Inc()
			dev, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	sp, _, err := kubefmt.SimPod(pod)
	if err != nil {
		return nil, err
	}
	pick := func(v *view) (err error) {
		dev, err = v.devicesFor(&sp, nodeName)
		return err
	}
	if epoch != 0 {
		if ok, err := c.conv.withCurrent(epoch, pick); ok {
			return dev, err
		}
	}
	ni, err := single()
	if err != nil {
		return nil, err
	}
	v, err := c.conv.fresh([]fwk.NodeInfo{ni})
	if err != nil {
		return nil, err
	}
	return dev, pick(v)
}

// devicesFor is the policy's device choice for sp on the named node of
// v (a copy the caller owns).
func (v *view) devicesFor(sp *sim.Pod, nodeName string) ([]int, error) {
	i, ok := v.index[nodeName]
	if !ok {
		return nil, fmt.Errorf("node %s not modelled", nodeName)
	}
	if !v.st.Feasible(i, sp) {
		return nil, errors.New("the pod does not fit the node's devices")
	}
	d := v.ext.PickGPUs(v.st, sp, i, nil)
	if int32(len(d)) != sp.GPUs {
		return nil, errors.New("no device choice")
	}
	return append([]int(nil), d...), nil
}

// DevicesFor is the policy's device choice for pod on nodeName of v (a
// copy the caller owns).
func (v *view) DevicesFor(pod *v1.Pod, nodeName string) ([]int, error) {
	sp, _, err := kubefmt.SimPod(pod)
	if err != nil {
		return nil, err
	}
	return v.devicesFor(&sp, nodeName)
}

// WithLatest runs fn on the view the last cycle scored on, if there is
// one (ok false otherwise), under the core's lock (tests and debugging).
func (c *Core) WithLatest(fn func(*View) error) (ok bool, err error) {
	c.conv.mu.Lock()
	defer c.conv.mu.Unlock()
	if c.conv.cur == nil {
		return false, nil
	}
	return true, fn(c.conv.cur)
}

// Extractor is the view's feature extractor.
func (v *view) Extractor() *policy.Extractor { return v.ext }

// Diagnostics is the converter's scan bookkeeping (tests and debugging).
type Diagnostics struct {
	// Marked is how many snapshot positions are marked for the next
	// cycle; LastScan when every node was last checked (zero: the next
	// cycle checks every node); Known whether Filter's lock-free index of
	// the last snapshot is published.
	Marked   int
	LastScan time.Time
	Known    bool
}

// Diagnostics reads the converter's scan bookkeeping.
func (c *Core) Diagnostics() Diagnostics {
	c.conv.mu.Lock()
	defer c.conv.mu.Unlock()
	return Diagnostics{Marked: len(c.conv.marked), LastScan: c.conv.lastScan, Known: c.conv.known.Load() != nil}
}
