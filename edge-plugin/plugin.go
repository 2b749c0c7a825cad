package edgeplugin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/openb"
)

// Name is the plugin's name in the scheduler's registry and profiles.
const Name = "EdgePolicy"

// EdgePolicy is the kube-scheduler plugin running the learned int8 policy.
type EdgePolicy struct {
	handle fwk.Handle
	args   Args
	models *ModelStore
	conv   *converter
	now    func() time.Time
	// cmSource is the ConfigMap model source (nil with a model file); the
	// first scheduling cycle releases the events it held during New.
	cmSource *configMapSource
	// depSource watches the dependency graph ConfigMap (nil without
	// dependenciesConfigMap).
	depSource *configMapFeed
	// topoSource watches the site topology ConfigMap (nil without
	// topologyConfigMap).
	topoSource *configMapFeed
	// policy is the scheduling policy in use (policy_filter.go);
	// policySource watches its ConfigMap (nil without policyConfigMap);
	// policyLister lists the cluster when there is no scheduler snapshot
	// (the extender's source).
	policy       *policyRules
	policySource *configMapFeed
	policyLister func() []fwk.NodeInfo
	// last is the latest PreScore's cycle and result: Score, called once
	// per node, finds its state here without a CycleState lookup. Holding
	// the cycle's CycleState keeps its address from being reused.
	last atomic.Pointer[lastCycle]
	// bufs holds *cycleBufs: the per-node slices of cycles that Reserve
	// (or the extender) released. The zero value is an empty pool.
	bufs sync.Pool
}

type lastCycle struct {
	cs fwk.CycleState
	ps *preScoreState
}

var (
	_ fwk.PreFilterPlugin = (*EdgePolicy)(nil)
	_ fwk.FilterPlugin    = (*EdgePolicy)(nil)
	_ fwk.PreScorePlugin  = (*EdgePolicy)(nil)
	_ fwk.ScorePlugin     = (*EdgePolicy)(nil)
	_ fwk.ScoreExtensions = (*EdgePolicy)(nil)
	_ fwk.ReservePlugin   = (*EdgePolicy)(nil)
	_ fwk.BindPlugin      = (*EdgePolicy)(nil)
)

// New is the plugin factory (app.WithPlugin(Name, New)). It validates the
// args, loads the trusted keys and the target workload, tries the model
// file once (a missing or bad model is logged and counted: the plugin
// then scores neutrally until a good one appears) and starts watching the
// file until ctx ends. With modelConfigMap it watches that ConfigMap
// instead (model_configmap.go), also until ctx ends.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, warnings, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx).WithValues("plugin", Name)
	for _, w := range warnings {
		logger.Info("Warning: " + w)
	}
	set := settingsOf(args)
	keys, err := quant.LoadKeyring(args.ModelKeys...)
	if err != nil {
		return nil, fmt.Errorf("%w: modelKeys: %v", ErrArgs, err)
	}
	target, err := LoadTarget(args.TargetWorkload, *args.TargetThreshold)
	if err != nil {
		return nil, fmt.Errorf("%w: targetWorkload: %v", ErrArgs, err)
	}
	models, err := OpenModelStore(ModelStoreOptions{Keys: keys, StatePath: args.ModelStatePath, MaxAge: set.modelMaxAge})
	if err != nil {
		return nil, fmt.Errorf("%w: modelStatePath: %v", ErrArgs, err)
	}
	p := newEdgePolicy(h, *args, models, target)
	p.conv.scanEvery = nodeScanEvery
	p.conv.log = logger
	if (set.feeds() || set.model.name != "" || set.policy.name != "") && (h == nil || h.ClientSet() == nil) {
		return nil, fmt.Errorf("%w: modelConfigMap, dependenciesConfigMap, topologyConfigMap and policyConfigMap need the scheduler's API client", ErrArgs)
	}
	if set.policy.name != "" {
		p.policySource, _ = startPolicySource(ctx, h.ClientSet(), p.policy, set.policy.ns, set.policy.name)
	}
	// The feeds' and the model ConfigMap's first lists are waited for
	// (each at most configMapSyncTimeout) at the same time, not one after
	// the other, and before New returns.
	feedsStarted := make(chan struct{})
	go func() { // owned by New: waited for below
		defer close(feedsStarted)
		if set.feeds() {
			p.startFeeds(ctx, h.ClientSet(), set)
		}
	}()
	defer func() { <-feedsStarted }()
	if set.model.name != "" {
		var rec events.EventRecorder
		if r := h.EventRecorder(); r != nil {
			rec = r
		}
		p.cmSource, _ = startConfigMapSource(ctx, h.ClientSet(), rec, p.models, set.model.ns, set.model.name, args.ModelConfigMapKey)
		return p, nil
	}
	if _, err := p.models.LoadFile(args.ModelPath); err != nil {
		logger.Error(err, "No model yet: scoring neutrally until one loads", "path", args.ModelPath)
	}
	go p.models.Watch(ctx, args.ModelPath, set.reload)
	return p, nil
}

// startFeeds watches the dependency graph and site topology ConfigMaps
// set names. Both wait (at most configMapSyncTimeout, together, not one
// after the other) for their first list. The returned function blocks
// until the watches have stopped after ctx ended.
func (p *EdgePolicy) startFeeds(ctx context.Context, client kubernetes.Interface, set settings) func() {
	var wg sync.WaitGroup
	depWait, topoWait := func() {}, func() {}
	if set.deps.name != "" {
		wg.Go(func() {
			p.depSource, depWait = startDependencySource(ctx, client, p.conv.deps, set.deps.ns, set.deps.name)
		})
	}
	if set.topo.name != "" {
		wg.Go(func() {
			p.topoSource, topoWait = startTopologySource(ctx, client, p.conv.topo, set.topo.ns, set.topo.name)
		})
	}
	wg.Wait()
	return func() {
		depWait()
		topoWait()
	}
}

// nodeScanEvery is the longest a node of the scheduler's snapshot goes
// unchecked in EdgePolicy's view while it is neither a cycle's candidate
// nor a node EdgePolicy reserved a pod on: PreScore reads the generation of
// its candidates and of those nodes, and of every node once per period.
// At 5,000 nodes, reading every NodeInfo's generation each cycle (a cache
// miss per node) was the largest part of PreScore in a real scheduler
// (docs/scale.md, "Sixth pass"). Within the period, a change the plugin
// did not see coming (another profile's or scheduler's pod, a telemetry
// annotation, a deleted pod) on a node that is not a candidate reaches the
// view's cluster-wide quantities (e.g. free GPUs per model) up to this
// late; the candidates themselves are always current.
const nodeScanEvery = 100 * time.Millisecond

func newEdgePolicy(h fwk.Handle, args Args, models *ModelStore, target *sim.TargetWorkload) *EdgePolicy {
	RegisterMetrics()
	p := &EdgePolicy{handle: h, args: args, models: models, conv: newConverter(target), now: time.Now, policy: &policyRules{}}
	p.conv.deps = &dependencies{}
	p.conv.topo = &topology{}
	p.conv.telMaxAge = settingsOf(&args).telMaxAge
	p.conv.clock = func() time.Time { return p.now() }
	return p
}

// LoadTarget compiles the target workload of an openb pod list reference
// (openb:NAME or a CSV path) the way the simulator does for its own
// workload (sim.NewTargetWorkload with threshold).
func LoadTarget(ref string, threshold float64) (*sim.TargetWorkload, error) {
	pods, err := openb.LoadPods(ref, nil)
	if err != nil {
		return nil, err
	}
	env, err := sim.NewEnv(&sim.Cluster{Name: "target", Nodes: []sim.NodeSpec{{Name: "n", CPU: 1, Memory: 1, Arch: sim.ArchAMD64}}},
		&sim.Workload{Name: ref, Pods: pods.Pods, Untimed: !pods.Timed}, sim.EnvOptions{TargetThreshold: threshold})
	if err != nil {
		return nil, err
	}
	return env.Target, nil
}

// Models returns the plugin's model store (for loaders and tests).
func (p *EdgePolicy) Models() *ModelStore { return p.models }

// Name implements fwk.Plugin.
func (p *EdgePolicy) Name() string { return Name }

const (
	preFilterKey fwk.StateKey = "PreFilter" + Name
	preScoreKey  fwk.StateKey = "PreScore" + Name
)

// preFilterState is the pod's parsed GPU request and the cycle's policy
// state (nil: none; also in the CycleState under policyKey), read once
// per Filter call.
type preFilterState struct {
	req    gpuRequest
	policy *policyCycle
}

func (s *preFilterState) Clone() fwk.StateData { return s }

// PreFilter parses the pod's GPU request; pods without one skip Filter.
func (p *EdgePolicy) PreFilter(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	p.cmSource.releaseEvents() // one atomic load after the first cycle
	req, err := podGPURequest(pod)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	policy := p.policyPreFilter(cs, pod)
	if req.GPUs == 0 && policy == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	cs.Write(preFilterKey, &preFilterState{req: req, policy: policy})
	return nil, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin. None: Filter reads
// the NodeInfo it is given (preemption's what-if copies included).
func (p *EdgePolicy) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter rejection reasons.
const (
	ReasonNoGPU        = "node has no GPUs"
	ReasonGPUModel     = "node's GPU model is not accepted by the pod"
	ReasonGPUShare     = "insufficient free GPU share on the node's devices"
	ReasonGPUAllocated = "node does not have enough whole free GPUs"
)

// Filter checks GPU model and per-device fit (whole devices free, or one
// device with the requested share free). Upstream NodeResourcesFit
// checks the totals; only the per-device view is ours.
func (p *EdgePolicy) Filter(_ context.Context, cs fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	v, err := cs.Read(preFilterKey)
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("reading %s: %w", preFilterKey, err))
	}
	pf := v.(*preFilterState)
	req := pf.req
	if ni.Node() == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node not found")
	}
	if st := p.policyFilter(pf.policy, ni); st != nil {
		return st
	}
	if req.GPUs == 0 { // here for the policy only
		return nil
	}
	// The node's GPUs and model from its converted entry (cached by
	// generation: kubefmt.NodeGPUs's map lookups on every node of every cycle cost
	// more than the rest of Filter together; BenchmarkFilter).
	e := p.conv.node(ni)
	gpus, model := e.spec.GPUs, e.spec.GPUModel
	if gpus == 0 {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ReasonNoGPU)
	}
	if !req.accepts(model) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ReasonGPUModel)
	}
	if int(req.GPUs) > gpus {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ReasonGPUAllocated)
	}
	if !gpuFits(e.free, req.GPUs, req.Milli) {
		if req.Milli >= sim.MilliGPU {
			return fwk.NewStatus(fwk.Unschedulable, ReasonGPUAllocated)
		}
		return fwk.NewStatus(fwk.Unschedulable, ReasonGPUShare)
	}
	return nil
}

// preScoreState holds one cycle's results: the view it scored on (for
// Reserve's device choice and explanation) and the normalised score of
// every candidate. Read-only after PreScore, so Clone shares it.
type preScoreState struct {
	epoch uint64 // the converter's view this cycle scored on (0: none)
	pod   sim.Pod
	// service is the pod's service (kubefmt.ServiceOf); pod.Service is
	// its index in the view's env, set when the cycle scores.
	service string
	// models are the GPU models the pod accepts (empty: any); pod.GPUMask
	// is their mask in the view's env, set when the cycle scores (the
	// features read it: pod_gpu_spec, pod_model_choice).
	models []string
	// model scored the cycle (nil: the cycle fell back, every node 0).
	model *Model
	// index is the view's node index (name -> node; immutable once built);
	// cand and raw are per candidate: the view node and the model's raw
	// score; byNode is per view node: its normalised score, or notScored.
	index  map[string]int
	byInfo *nodeIndex // view.byInfo (immutable)
	cand   []int32
	raw    []float32
	byNode []uint8
	// byPos is per position in PreScore's node list: its normalised score
	// (0: not scored); NormalizeScore copies it into the framework's list,
	// which holds the same nodes in the same order (RunScorePlugins), so
	// Score need not look the node up. posNames are the names at three
	// positions (first, middle, last) NormalizeScore checks that order
	// on. nil when the cycle fell back or a scheduling policy applies
	// (Score then scores each node itself).
	byPos    []uint8
	posNames [3]string
	// bufs backs cand, raw, byNode and byPos (from EdgePolicy.bufs);
	// release returns it once nothing reads them any more.
	bufs *cycleBufs
	// policy is the cycle's scheduling policy state (nil: none applies),
	// read once here rather than from the CycleState on every Score.
	policy *policyCycle
}

// notScored marks a view node the cycle did not score (MaxNodeScore is 100,
// so every normalised score fits a byte).
const notScored = 0xff

// scoreOf returns the normalised score of node name and whether the cycle
// scored it.
func (s *preScoreState) scoreOf(name string) (int64, bool) {
	if s == nil || s.model == nil {
		return 0, false
	}
	i, ok := s.index[name]
	if !ok || i < 0 || i >= len(s.byNode) || s.byNode[i] == notScored {
		return 0, false
	}
	return int64(s.byNode[i]), true
}

// candidate returns name's candidate position, or -1 (a linear search:
// the explanation asks once per pod).
func (s *preScoreState) candidate(name string) int {
	if s == nil || s.model == nil {
		return -1
	}
	i, ok := s.index[name]
	if !ok || i < 0 || i >= len(s.byNode) || s.byNode[i] == notScored {
		return -1
	}
	return slices.Index(s.cand, int32(i))
}

// fallBack makes every node score 0 (neutral).
func (s *preScoreState) fallBack() {
	s.model, s.cand, s.raw, s.byNode, s.byPos, s.bufs = nil, nil, nil, nil, nil, nil
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

// release returns s's per-node slices to pool once the cycle reads them
// no more (after Reserve's explanation, or the extender's answer). s
// then scores nothing (scoreOf and candidate find no node).
func (s *preScoreState) release(pool *sync.Pool) {
	if s == nil || s.bufs == nil {
		return
	}
	b := s.bufs
	s.cand, s.raw, s.byNode, s.byPos, s.bufs = nil, nil, nil, nil, nil
	pool.Put(b)
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

// spots are the three positions of an n-long node list posNames holds.
func spots(n int) [3]int { return [3]int{0, n / 2, n - 1} }

// aligned reports whether scores lists PreScore's nodes in PreScore's
// order (the same length and the same names at the three spots).
func (s *preScoreState) aligned(scores fwk.NodeScoreList) bool {
	if s == nil || s.byPos == nil || len(scores) != len(s.byPos) || len(scores) == 0 {
		return false
	}
	for k, i := range spots(len(scores)) {
		if scores[i].Name != s.posNames[k] {
			return false
		}
	}
	return true
}

func (s *preScoreState) Clone() fwk.StateData { return s }

// PreScore converts the snapshot, computes the pod's features on every
// feasible node and runs the int8 policy once for all of them (one batch:
// the pod's share of the first layer is computed once). Failures, panics
// included, never fail the cycle: every node then scores 0 (neutral) and
// a fallback is counted.
func (p *EdgePolicy) PreScore(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	logger := klog.FromContext(ctx)
	ps := &preScoreState{}
	cs.Write(preScoreKey, ps)
	defer p.last.Store(&lastCycle{cs: cs, ps: ps})
	policyPreScore(cs, nodes)
	ps.policy = readPolicyCycle(cs)
	sp, err := simPod(pod)
	if err != nil {
		metricFallbacks.WithLabelValues("error").Inc()
		return nil
	}
	ps.pod, ps.service, ps.models = sp, kubefmt.ServiceOf(pod), podModels(pod)
	var all []fwk.NodeInfo
	if p.handle != nil && p.handle.SnapshotSharedLister() != nil {
		all, err = p.handle.SnapshotSharedLister().NodeInfos().List()
	}
	if err != nil || len(all) == 0 {
		all = nodes
	}
	m := p.models.Current()
	start := time.Now()
	reason, err := p.score(m, all, nodes, ps)
	metricInference.Observe(time.Since(start).Seconds())
	if reason != "" {
		metricFallbacks.WithLabelValues(reason).Inc()
		ps.fallBack()
		if err != nil {
			logger.Error(err, "EdgePolicy scored neutrally", "pod", klog.KObj(pod), "reason", reason)
		}
	}
	return nil
}

// errNoModel marks a cycle without a model.
var errNoModel = errors.New("no model loaded")

// score fills ps (view and scores); it contains panics. reason is ""
// on success.
func (p *EdgePolicy) score(m *Model, all, nodes []fwk.NodeInfo, ps *preScoreState) (reason string, err error) {
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
	err = p.conv.withView(all, nodes, func(v *view) error {
		ps.epoch = v.epoch
		ps.pod.Service = serviceIndex(v.env, ps.service)
		ps.pod.GPUMask = gpuMaskOf(v.env, ps.models)
		bufs := getBufs(&p.bufs, len(nodes), len(v.st.Nodes), len(nodes))
		cand := bufs.cand
		pos := slices.Grow(v.pos[:0], len(nodes)) // nodes' position of each candidate
		x := viewIndexer{c: p.conv, v: v}
		for k, ni := range nodes {
			// Only nodes the simulator also finds feasible are scored
			// (the features assume the pod fits); others keep 0.
			if i, ok := x.index(ni); ok && v.st.Feasible(i, &ps.pod) {
				cand = append(cand, int32(i))
				pos = append(pos, int32(k))
			}
		}
		v.pos = pos
		if len(cand) == 0 {
			p.bufs.Put(bufs)
			return nil
		}
		raw := bufs.raw[:len(cand)]
		if err := v.scoreCandidates(m, &ps.pod, cand, raw); err != nil {
			return err
		}
		// The model's decision rule (a band the FGD score orders) works on
		// the same view as the simulator's learned policy, so the node
		// with MaxNodeScore is the one the simulator would bind.
		dec := slices.Grow(v.dec[:0], len(raw))[:len(raw)]
		for j, r := range raw {
			dec[j] = float64(r)
		}
		v.ext.Decide(m.Header.Decision, v.st, &ps.pod, cand, dec)
		norm := slices.Grow(v.norm[:0], len(raw))[:len(raw)]
		normalizeTo(norm, dec)
		v.dec, v.norm = dec, norm
		byNode := bufs.byNode
		for i := range byNode {
			byNode[i] = notScored
		}
		for j, i := range cand {
			byNode[i] = norm[j]
		}
		if ps.policy == nil {
			byPos := bufs.byPos
			clear(byPos)
			for j, k := range pos {
				byPos[k] = norm[j]
			}
			for k, i := range spots(len(nodes)) {
				if n := nodes[i].Node(); n != nil {
					ps.posNames[k] = n.Name
				}
			}
			ps.byPos = byPos
		}
		bufs.cand, bufs.raw = cand, raw
		ps.model, ps.index, ps.byInfo, ps.cand, ps.raw, ps.byNode, ps.bufs = m, v.index, v.byInfo, cand, raw, byNode, bufs
		return nil
	})
	if err != nil {
		return "error", err
	}
	return "", nil
}

// normalize maps decision scores to [0, MaxNodeScore] keeping the argmax
// exact: every node tied with the best (as the simulator counts ties)
// gets MaxNodeScore, every other node scales linearly into
// [0, MaxNodeScore-1]. NaN ranks lowest.
func normalize(raw []float64) []int64 {
	b := make([]uint8, len(raw))
	normalizeTo(b, raw)
	out := make([]int64, len(raw))
	for i, v := range b {
		out[i] = int64(v)
	}
	return out
}

// normalizeTo is normalize into out (len(raw) long; MaxNodeScore is 100,
// so a score fits a byte).
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
	scale := float64(fwk.MaxNodeScore-1) / span // one division, not one per node
	top := best - eps
	for i, s := range raw {
		switch {
		case s >= top: // false for NaN
			out[i] = uint8(fwk.MaxNodeScore)
		case linear && s >= worst:
			// (s-worst)*scale is in [0, MaxNodeScore-1): a conversion
			// truncates it as math.Floor would, without its call
			out[i] = uint8(min(fwk.MaxNodeScore-1, int64((s-worst)*scale)))
		default: // NaN, or no linear scale
			out[i] = uint8(fwk.MinNodeScore)
		}
	}
}

// Score returns the node's score computed in PreScore (0 when the cycle
// fell back or the node was not modelled). It never blocks.
func (p *EdgePolicy) Score(_ context.Context, cs fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	var ps *preScoreState
	if l := p.last.Load(); l != nil && l.cs == cs {
		ps = l.ps
	} else {
		ps = readPreScore(cs)
	}
	// The common case first: PreScore scored every node and
	// NormalizeScore copies the scores by position (no lookup: 4,788 of
	// them a pod at 5,000 nodes). Then a snapshot object PreScore
	// indexed, no scheduling policy.
	if ps != nil && ps.byPos != nil {
		return 0, nil
	}
	if fi, ok := ni.(*framework.NodeInfo); ok && ps != nil && ps.model != nil && ps.policy == nil && fi.Node() != nil {
		if i, ok := ps.byInfo.get(fi); ok && int(i) < len(ps.byNode) {
			if b := ps.byNode[i]; b != notScored {
				return int64(b), nil // <= MaxNodeScore
			}
			return 0, nil
		}
	}
	n := ni.Node()
	if n == nil {
		return 0, nil
	}
	var s int64
	if ps == nil {
		s = p.policyScore(cs, ni, s)
	} else {
		found := false
		if fi, ok := ni.(*framework.NodeInfo); ok && ps.model != nil {
			if i, ok := ps.byInfo.get(fi); ok && int(i) < len(ps.byNode) {
				found = true
				if b := ps.byNode[i]; b != notScored {
					s = int64(b)
				}
			}
		}
		if !found {
			s, _ = ps.scoreOf(n.Name)
		}
		if ps.policy != nil {
			s = ps.policy.score(ni, s)
		}
	}
	return min(fwk.MaxNodeScore, max(fwk.MinNodeScore, s)), nil
}

// ScoreExtensions implements fwk.ScorePlugin.
func (p *EdgePolicy) ScoreExtensions() fwk.ScoreExtensions { return p }

// NormalizeScore implements fwk.ScoreExtensions. Scores are normalised
// over the whole feasible set in PreScore (Score sees one node at a
// time). Without a scheduling policy, Score returned 0 and the scores
// are copied here: by position when the list holds PreScore's nodes in
// PreScore's order (as RunScorePlugins passes them), else by name. Then
// they are clamped to [MinNodeScore, MaxNodeScore], so the plugin's
// output range holds whatever happens upstream.
func (p *EdgePolicy) NormalizeScore(_ context.Context, cs fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	var ps *preScoreState
	if l := p.last.Load(); l != nil && l.cs == cs {
		ps = l.ps
	} else {
		ps = readPreScore(cs)
	}
	switch {
	case ps.aligned(scores):
		for i, b := range ps.byPos {
			scores[i].Score = int64(b)
		}
		return nil // each <= MaxNodeScore
	case ps != nil && ps.byPos != nil:
		for i := range scores {
			scores[i].Score, _ = ps.scoreOf(scores[i].Name)
		}
	}
	for i := range scores {
		scores[i].Score = min(fwk.MaxNodeScore, max(fwk.MinNodeScore, scores[i].Score))
	}
	return nil
}

// Reserve keeps what the explanation needs from the cycle's view (the
// chosen node's features and the baseline: explain.go), then chooses the
// devices of a GPU pod on its node (the policy's own choice: FGD's device
// for a share, the lowest free devices otherwise) and remembers them for
// Bind and for the next snapshots.
func (p *EdgePolicy) Reserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	p.captureExplanation(ctx, cs, nodeName)
	readPreScore(cs).release(&p.bufs) // nothing reads the scores after this
	p.conv.mark(nodeName)             // the scheduler assumed the pod there
	req, err := podGPURequest(pod)
	if err != nil || req.GPUs == 0 {
		return nil
	}
	dev, err := p.pickDevices(cs, pod, nodeName)
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("%s: choosing GPU devices on %s: %w", Name, nodeName, err))
	}
	p.conv.res.put(pod.UID, nodeName, dev, p.now())
	return nil
}

func (p *EdgePolicy) pickDevices(cs fwk.CycleState, pod *v1.Pod, nodeName string) (dev []int, err error) {
	defer func() {
		if r := recover(); r != nil {
			metricPanics.Inc()
			dev, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	sp, err := simPod(pod)
	if err != nil {
		return nil, err
	}
	pick := func(v *view) (err error) {
		dev, err = v.devicesFor(&sp, nodeName)
		return err
	}
	// The view PreScore used, if nothing rebuilt it since.
	if d, rerr := cs.Read(preScoreKey); rerr == nil && d.(*preScoreState).epoch != 0 {
		if ok, err := p.conv.withCurrent(d.(*preScoreState).epoch, pick); ok {
			return dev, err
		}
	}
	// Otherwise (PreScore did not run: one feasible node) model that node
	// alone; the device choice depends only on the node and the target.
	if p.handle == nil || p.handle.SnapshotSharedLister() == nil {
		return nil, errors.New("no snapshot")
	}
	ni, err := p.handle.SnapshotSharedLister().NodeInfos().Get(nodeName)
	if err != nil {
		return nil, err
	}
	v, err := p.conv.fresh([]fwk.NodeInfo{ni})
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

// Unreserve forgets the devices chosen at Reserve.
func (p *EdgePolicy) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	p.conv.res.m.Delete(pod.UID)
	p.conv.mark(nodeName)
}

// bindAnnotations is what Bind writes on the pod: the devices Reserve
// chose (AnnotationGPUDevices) and, when the cycle scored the node, the
// policy's AnnotationExplanation (left out if it cannot be computed). Empty
// for pods EdgePolicy has nothing to record about.
func (p *EdgePolicy) bindAnnotations(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) map[string]string {
	var ann map[string]string
	if dev, ok := p.conv.res.get(pod.UID, nodeName); ok {
		ann = map[string]string{AnnotationGPUDevices: formatDevices(dev)}
	}
	if e := p.explanationAnnotation(ctx, cs, nodeName); e != "" {
		if ann == nil {
			ann = map[string]string{}
		}
		ann[AnnotationExplanation] = e
	}
	if e := p.policyAnnotation(cs, nodeName); e != "" {
		if ann == nil {
			ann = map[string]string{}
		}
		ann[AnnotationPolicy] = e
	}
	return ann
}

// Bind binds the pod with one pods/binding request whose
// metadata.annotations carry bindAnnotations: the API server's binding
// subresource merges a Binding's annotations into the pod in the same
// update that sets spec.nodeName, so the pod is bound and annotated in one
// write (no PATCH besides the binding), and a pod is never bound without
// its devices (or annotated without being bound). Pods with nothing to
// record return Skip: the next bind plugin (DefaultBinder) binds them. The
// request goes the way DefaultBinder's does (the scheduler's API cacher
// when SchedulerAsyncAPICalls is on, else the client, retrying transient
// errors), so the profile must run EdgePolicy's Bind before DefaultBinder
// (deploy/edge-scheduler/scheduler-config.yaml: plugins.bind.enabled).
func (p *EdgePolicy) Bind(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if p.handle == nil {
		return fwk.NewStatus(fwk.Skip)
	}
	ann := p.bindAnnotations(ctx, cs, pod, nodeName)
	if len(ann) == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Annotations: ann},
		Target:     v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if c := p.handle.APICacher(); c != nil {
		onFinish, err := c.BindPod(binding)
		if err == nil {
			err = c.WaitOnFinish(ctx, onFinish)
		}
		if err != nil {
			return fwk.AsStatus(fmt.Errorf("%s: binding with annotations: %w", Name, err))
		}
		return nil
	}
	client := p.handle.ClientSet()
	if client == nil {
		return fwk.AsStatus(fmt.Errorf("%s: no API client to bind with", Name))
	}
	klog.FromContext(ctx).V(3).Info("Attempting to bind pod to node", "pod", klog.KObj(pod), "node", klog.KRef("", nodeName), "annotations", len(ann))
	if err := schedutil.BindPod(ctx, client, binding); err != nil {
		return fwk.AsStatus(fmt.Errorf("%s: binding with annotations: %w", Name, err))
	}
	return nil
}
