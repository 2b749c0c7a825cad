package edgeplugin

import (
	"context"
	"errors"
	"fmt"
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

	"github.com/edgesched/edgesched/edge-plugin/serving"
	"github.com/edgesched/edgesched/edge-plugin/sources"
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
	core   *serving.Core
	// cmSource is the ConfigMap model source (nil with a model file); the
	// first scheduling cycle releases the events it held during New.
	cmSource *sources.ModelSource
	// depSource watches the dependency graph ConfigMap (nil without
	// dependenciesConfigMap).
	depSource *sources.Feed
	// topoSource watches the site topology ConfigMap (nil without
	// topologyConfigMap).
	topoSource *sources.Feed
	// policy is the scheduling policy in use (policy_filter.go);
	// policySource watches its ConfigMap (nil without policyConfigMap);
	// policyLister lists the cluster when there is no scheduler snapshot
	// (the extender's source).
	policySource *sources.Feed
	policyLister func() []fwk.NodeInfo
	// stopped are the waits of what New started (the model file's watch,
	// the ConfigMap watches): Wait calls them in turn.
	stopped []func()
	// last is the latest PreScore's cycle and result: Score, called once
	// per node, finds its state here without a CycleState lookup. Holding
	// the cycle's CycleState keeps its address from being reused.
	last atomic.Pointer[lastCycle]
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

// New is the plugin factory (in edge-scheduler's out-of-tree registry, internal/schedcmd). It validates the
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
	models, err := sources.OpenModelStore(sources.ModelStoreOptions{Keys: keys, StatePath: args.ModelStatePath, MaxAge: set.modelMaxAge})
	if err != nil {
		return nil, fmt.Errorf("%w: modelStatePath: %v", ErrArgs, err)
	}
	p := NewWithModels(h, *args, models, target)
	p.core.SetScanEvery(nodeScanEvery)
	p.core.SetLogger(logger)
	if (set.feeds() || set.model.name != "" || set.policy.name != "") && (h == nil || h.ClientSet() == nil) {
		return nil, fmt.Errorf("%w: modelConfigMap, dependenciesConfigMap, topologyConfigMap and policyConfigMap need the scheduler's API client", ErrArgs)
	}
	if set.policy.name != "" {
		sources.RegisterPolicyMetrics()
		var wait func()
		p.policySource, wait = sources.StartPolicy(ctx, h.ClientSet(), p.core.Policy(), set.policy.ns, set.policy.name)
		p.stopped = append(p.stopped, wait)
	}
	// The feeds' and the model ConfigMap's first lists are waited for
	// (each at most configMapSyncTimeout) at the same time, not one after
	// the other, and before New returns.
	feedsStarted := make(chan struct{})
	feedsWait := func() {}
	go func() { // owned by New: waited for below
		defer close(feedsStarted)
		if set.feeds() {
			feedsWait = p.startFeeds(ctx, h.ClientSet(), set)
		}
	}()
	defer func() {
		<-feedsStarted
		p.stopped = append(p.stopped, feedsWait)
	}()
	if set.model.name != "" {
		var rec events.EventRecorder
		if r := h.EventRecorder(); r != nil {
			rec = r
		}
		var wait func()
		p.cmSource, wait = sources.StartModelSource(ctx, h.ClientSet(), rec, models, set.model.ns, set.model.name, args.ModelConfigMapKey)
		p.stopped = append(p.stopped, wait)
		return p, nil
	}
	if _, err := models.LoadFile(args.ModelPath); err != nil {
		logger.Error(err, "No model yet: scoring neutrally until one loads", "path", args.ModelPath)
	}
	watched := make(chan struct{})
	go func() { // owned by the plugin: Wait waits for it
		defer close(watched)
		models.Watch(ctx, args.ModelPath, set.reload)
	}()
	p.stopped = append(p.stopped, func() { <-watched })
	return p, nil
}

// Wait blocks until every goroutine New started (the model file's watch,
// or the model ConfigMap's, and the dependency graph's, site topology's
// and scheduling policy's watches) has stopped; they stop when New's ctx
// ends. A plugin made otherwise (NewWithModels) has none.
func (p *EdgePolicy) Wait() {
	for _, wait := range p.stopped {
		wait()
	}
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
			p.depSource, depWait = sources.StartDependencies(ctx, client, p.core.Dependencies(), set.deps.ns, set.deps.name)
		})
	}
	if set.topo.name != "" {
		wg.Go(func() {
			p.topoSource, topoWait = sources.StartTopology(ctx, client, p.core.Topology(), set.topo.ns, set.topo.name)
		})
	}
	wg.Wait()
	return func() {
		depWait()
		topoWait()
	}
}

// StartFeeds starts the ConfigMap watches args names (the dependency
// graph, the site topology and the scheduling policy) with client, for a
// plugin made without the scheduler's client (the extender's: New had
// them cleared). The returned function blocks until the watches have
// stopped after ctx ended.
func (p *EdgePolicy) StartFeeds(ctx context.Context, client kubernetes.Interface, args *Args) func() {
	set := settingsOf(args)
	wait := func() {}
	if set.feeds() {
		wait = p.startFeeds(ctx, client, set)
	}
	waitPolicy := func() {}
	if set.policy.name != "" {
		sources.RegisterPolicyMetrics()
		_, waitPolicy = sources.StartPolicy(ctx, client, p.core.Policy(), set.policy.ns, set.policy.name)
	}
	return func() {
		waitPolicy()
		wait()
	}
}

// WatchesConfigMaps reports whether args name a ConfigMap to watch besides
// the model's (StartFeeds needs an API client then).
func WatchesConfigMaps(args *Args) bool {
	set := settingsOf(args)
	return set.feeds() || set.policy.name != ""
}

// SetNodeLister gives a plugin without a scheduler snapshot (the
// extender's) the cluster the scheduling policy counts placements in.
// Call it before the first cycle.
func (p *EdgePolicy) SetNodeLister(list func() []fwk.NodeInfo) { p.policyLister = list }

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

// NewWithModels returns a plugin with validated args (DecodeArgs) that
// scores with models' model against target, without starting any watch
// (for programs that load models themselves, and tests); New is the
// scheduler's factory.
func NewWithModels(h fwk.Handle, args Args, models *sources.ModelStore, target *sim.TargetWorkload) *EdgePolicy {
	RegisterMetrics()
	core := serving.New(models, serving.Options{Target: target, TelemetryMaxAge: settingsOf(&args).telMaxAge})
	return &EdgePolicy{handle: h, args: args, core: core}
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
func (p *EdgePolicy) Models() *sources.ModelStore { return p.core.Models() }

// Core returns the plugin's serving core (for the extender and tests).
func (p *EdgePolicy) Core() *serving.Core { return p.core }

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
	req    kubefmt.GPURequest
	policy *serving.PolicyCycle
}

func (s *preFilterState) Clone() fwk.StateData { return s }

// PreFilter parses the pod's GPU request; pods without one skip Filter.
func (p *EdgePolicy) PreFilter(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	p.cmSource.ReleaseEvents() // one atomic load after the first cycle
	req, err := kubefmt.PodGPURequest(pod)
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
	if st := policyFilter(pf.policy, ni); st != nil {
		return st
	}
	if req.GPUs == 0 { // here for the policy only
		return nil
	}
	// The node's GPUs and model from its converted entry (cached by
	// generation: kubefmt.NodeGPUs's map lookups on every node of every cycle cost
	// more than the rest of Filter together; BenchmarkFilter).
	gpus, model, free := p.core.NodeGPUs(ni)
	if gpus == 0 {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ReasonNoGPU)
	}
	if !req.Accepts(model) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ReasonGPUModel)
	}
	if int(req.GPUs) > gpus {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ReasonGPUAllocated)
	}
	if !serving.GPUFits(free, req.GPUs, req.Milli) {
		if req.Milli >= sim.MilliGPU {
			return fwk.NewStatus(fwk.Unschedulable, ReasonGPUAllocated)
		}
		return fwk.NewStatus(fwk.Unschedulable, ReasonGPUShare)
	}
	return nil
}

// preScoreState is the cycle's scoring (serving.Cycle) in CycleState.
// Read-only after PreScore, so Clone shares it.
type preScoreState struct {
	serving.Cycle
}

// aligned reports whether scores lists PreScore's nodes in PreScore's
// order (the same length and the same names at the three spots).
func (s *preScoreState) aligned(scores fwk.NodeScoreList) bool {
	if s == nil || s.ByPos == nil || len(scores) != len(s.ByPos) || len(scores) == 0 {
		return false
	}
	for k, i := range serving.Spots(len(scores)) {
		if scores[i].Name != s.PosNames[k] {
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
	ps.Policy = readPolicyCycle(cs)
	if ps.SetPod(pod) != nil {
		return nil
	}
	var all []fwk.NodeInfo
	var err error
	if p.handle != nil && p.handle.SnapshotSharedLister() != nil {
		all, err = p.handle.SnapshotSharedLister().NodeInfos().List()
	}
	if err != nil || len(all) == 0 {
		all = nodes
	}
	if reason, err := p.core.Score(all, nodes, &ps.Cycle); err != nil {
		logger.Error(err, "EdgePolicy scored neutrally", "pod", klog.KObj(pod), "reason", reason)
	}
	return nil
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
	if ps != nil && ps.ByPos != nil {
		return 0, nil
	}
	if fi, ok := ni.(*framework.NodeInfo); ok && ps != nil && ps.Model != nil && ps.Policy == nil && fi.Node() != nil {
		if i, ok := ps.ByInfo.Get(fi); ok && int(i) < len(ps.ByNode) {
			if b := ps.ByNode[i]; b != serving.NotScored {
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
		s = policyScore(cs, ni, s)
	} else {
		found := false
		if fi, ok := ni.(*framework.NodeInfo); ok && ps.Model != nil {
			if i, ok := ps.ByInfo.Get(fi); ok && int(i) < len(ps.ByNode) {
				found = true
				if b := ps.ByNode[i]; b != serving.NotScored {
					s = int64(b)
				}
			}
		}
		if !found {
			s, _ = ps.ScoreOf(n.Name)
		}
		if ps.Policy != nil {
			s = ps.Policy.Score(ni, s)
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
		for i, b := range ps.ByPos {
			scores[i].Score = int64(b)
		}
		return nil // each <= MaxNodeScore
	case ps != nil && ps.ByPos != nil:
		for i := range scores {
			scores[i].Score, _ = ps.ScoreOf(scores[i].Name)
		}
	}
	for i := range scores {
		scores[i].Score = min(fwk.MaxNodeScore, max(fwk.MinNodeScore, scores[i].Score))
	}
	return nil
}

// Reserve keeps what the explanation needs from the cycle's view (the
// chosen node's features and the baseline: explain.go) and the scheduling
// policy's annotation (policy_filter.go), then chooses the
// devices of a GPU pod on its node (the policy's own choice: FGD's device
// for a share, the lowest free devices otherwise) and remembers them for
// Bind and for the next snapshots.
func (p *EdgePolicy) Reserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	p.captureExplanation(ctx, cs, nodeName)
	p.capturePolicyAnnotation(cs, nodeName) // Bind may not read the snapshot
	if ps := readPreScore(cs); ps != nil {
		p.core.Release(&ps.Cycle) // nothing reads the scores after this
	}
	p.core.Mark(nodeName) // the scheduler assumed the pod there
	req, err := kubefmt.PodGPURequest(pod)
	if err != nil || req.GPUs == 0 {
		return nil
	}
	var epoch uint64
	if ps := readPreScore(cs); ps != nil {
		epoch = ps.Epoch
	}
	// The view PreScore used, if nothing rebuilt it since; otherwise
	// (PreScore did not run: one feasible node) the node alone.
	dev, err := p.core.PickDevices(epoch, pod, nodeName, func() (fwk.NodeInfo, error) {
		if p.handle == nil || p.handle.SnapshotSharedLister() == nil {
			return nil, errors.New("no snapshot")
		}
		return p.handle.SnapshotSharedLister().NodeInfos().Get(nodeName)
	})
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("%s: choosing GPU devices on %s: %w", Name, nodeName, err))
	}
	p.core.Reserve(pod.UID, nodeName, dev)
	return nil
}

// Unreserve forgets the devices chosen at Reserve.
func (p *EdgePolicy) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	p.core.Unreserve(pod.UID)
	p.core.Mark(nodeName)
}

// bindAnnotations is what Bind writes on the pod: the devices Reserve
// chose (AnnotationGPUDevices), when the cycle scored the node the
// policy's AnnotationExplanation (left out if it cannot be computed), and
// the AnnotationPolicy value Reserve kept. Empty for pods EdgePolicy has
// nothing to record about. It reads CycleState and the core, never the
// scheduler's snapshot (the binding cycle may not: fwk.Handle).
func (p *EdgePolicy) bindAnnotations(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) map[string]string {
	var ann map[string]string
	if dev, ok := p.core.Reserved(pod.UID, nodeName); ok {
		ann = map[string]string{AnnotationGPUDevices: kubefmt.FormatDevices(dev)}
	}
	if e := p.explanationAnnotation(ctx, cs, nodeName); e != "" {
		if ann == nil {
			ann = map[string]string{}
		}
		ann[AnnotationExplanation] = e
	}
	if e := reservedPolicyAnnotation(cs, nodeName); e != "" {
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
