package trace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/edgesched/edgesched/agent/trace/tracefmt"
	"github.com/edgesched/edgesched/internal/backoff"
	"github.com/edgesched/edgesched/internal/kube"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
)

// RecorderConfig configures a Recorder. Start from DefaultRecorderConfig.
type RecorderConfig struct {
	// Store receives the events (required; the caller closes it after Run).
	Store *Store
	// Client reads Pods and Nodes (cluster-wide list/watch) and patches
	// this agent's Node (its flows annotation): kube.NewForConfig's clients
	// or a clientset adapted by kube/kubeclientset. Required. When Client
	// has the method IsWatchListSemanticsUnSupported() bool and it returns
	// true (client-go's fake clientset, adapted), the informers list and
	// watch instead of asking for watch-list streams, which the fake cannot
	// serve.
	Client kube.Interface
	// NodeName is this agent's node: the flows given to ObserveFlows are
	// published in its kubefmt.FlowsAnnotation. "" publishes nothing.
	NodeName string
	// FlowInterval is how often the flows annotation is written (the
	// rate window); default 10s, at least 1s.
	FlowInterval time.Duration
	// BackoffMin and BackoffMax pace retries of failed writes (defaults
	// 100ms and 5s).
	BackoffMin, BackoffMax time.Duration
	// Seed seeds the retry jitter.
	Seed uint64
	// Now is the clock (nil: time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// DefaultRecorderConfig returns the defaults.
func DefaultRecorderConfig() RecorderConfig {
	return RecorderConfig{FlowInterval: 10 * time.Second, BackoffMin: 100 * time.Millisecond, BackoffMax: 5 * time.Second}
}

// Validate names the first bad field.
func (c *RecorderConfig) Validate() error {
	switch {
	case c.Store == nil:
		return fmt.Errorf("%w: Store required", ErrConfig)
	case c.Client == nil:
		return fmt.Errorf("%w: Client required", ErrConfig)
	case c.FlowInterval < time.Second || c.FlowInterval > time.Hour:
		return fmt.Errorf("%w: FlowInterval %v, want 1s..1h", ErrConfig, c.FlowInterval)
	case c.BackoffMin <= 0 || c.BackoffMax < c.BackoffMin:
		return fmt.Errorf("%w: backoff must be positive (BackoffMax >= BackoffMin)", ErrConfig)
	}
	return nil
}

// Recorder records the site's workload into a Store: it watches every Pod
// and Node of the cluster with client-go informers and turns what it sees
// into events (arrivals at the pod's creationTimestamp, bindings,
// deletions, node usage from the telemetry annotation, call rates from
// every node's flows annotation). Every agent of a site runs one, so a new
// leader has the history. Run owns its goroutines; ObserveFlows is safe to
// call from any goroutine.
type Recorder struct {
	cfg RecorderConfig
	log *slog.Logger
	ch  chan tracefmt.Event

	mu     sync.Mutex
	stop   <-chan struct{}          // Run's ctx.Done(): queued sends give up
	pods   map[types.UID]podState   // recorded pods (alive)
	nodes  map[string]tracefmt.Node // recorded node attributes
	usage  map[string]time.Time     // newest usage sample recorded per node
	edges  map[string]time.Time     // newest flows window recorded per reporting node
	ahead  map[sampleKey]time.Time  // per node and annotation: the last sample refused as ahead of the clock
	flows  []FlowCount              // newest snapshot from ObserveFlows
	flowAt time.Time
	synced bool
	stats  RecorderStats
}

// podState is what the recorder recorded of a live pod.
type podState struct {
	ref  tracefmt.PodRef
	node string // "" while pending
}

// RecorderStats counts what a Recorder did since Run started.
type RecorderStats struct {
	Recorded, Skipped, Pruned int
	// WriteErrors counts failed store transactions (retried).
	WriteErrors int
	// Malformed counts annotations and pods that could not be read (a
	// pod with a malformed GPU request is recorded without GPUs).
	Malformed int
	// Refused counts events the store refused (Store.Append's
	// RefusedError, logged once per batch with the reasons); the rest of
	// their batches was written.
	Refused int
	// Skewed counts telemetry summaries and flows windows not recorded
	// because their time was more than kubefmt.MaxTelemetryClockSkew
	// ahead of the recorder's clock (a node whose clock ran ahead; one
	// such sample would otherwise become the node's high-water mark and
	// hold back its correct samples). Each distinct sample counts once,
	// however often the node object is seen with it.
	Skewed int
	// FlowsPublished counts flows annotations written.
	FlowsPublished int
}

// sampleKey names a node's telemetry or flows annotation.
type sampleKey struct{ annotation, node string }

// NewRecorder checks cfg.
func NewRecorder(cfg RecorderConfig) (*Recorder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Recorder{cfg: cfg, log: log, ch: make(chan tracefmt.Event, 4096), pods: map[types.UID]podState{}, nodes: map[string]tracefmt.Node{},
		usage: map[string]time.Time{}, edges: map[string]time.Time{}, ahead: map[sampleKey]time.Time{}}, nil
}

// Stats returns the counters.
func (r *Recorder) Stats() RecorderStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Synced reports whether the first list of pods and nodes was recorded
// and reconciled with the store (pods deleted while the agent was down
// are then recorded as deleted).
func (r *Recorder) Synced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.synced
}

// ObserveFlows hands the recorder the node's flow collector's newest
// cumulative counts; the rates between two annotation writes are
// published in kubefmt.FlowsAnnotation.
func (r *Recorder) ObserveFlows(at time.Time, flows []FlowCount) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flows, r.flowAt = append(r.flows[:0], flows...), at
}

const (
	indexNode = "edgesched-node"
	indexIP   = "edgesched-ip"
	batchMax  = 512
)

// Run records until ctx ends. It returns ctx's error, or an error when
// the informers cannot be set up. Run may be called again after it
// returned (not while it runs): it starts from what the store has, as a
// new Recorder would.
func (r *Recorder) Run(ctx context.Context) error {
	if err := r.load(ctx.Done()); err != nil {
		return err
	}
	inf, err := r.informers()
	if err != nil {
		return err
	}
	podInf, nodeInf := inf.pods, inf.nodes

	var wg, informers sync.WaitGroup
	wctx, stopWriter := context.WithCancel(context.WithoutCancel(ctx))
	wg.Go(func() { r.writeLoop(wctx) })
	informers.Go(func() { podInf.RunWithContext(ctx) })
	informers.Go(func() { nodeInf.RunWithContext(ctx) })
	defer func() {
		informers.Wait() // handlers have returned: nothing more is queued
		stopWriter()     // the writer drains what is queued, then stops
		wg.Wait()
	}()
	// the informers listed and the handlers went through the first list
	if !cache.WaitForCacheSync(ctx.Done(), inf.synced...) {
		return ctx.Err()
	}
	r.reconcile(podInf.GetIndexer(), nodeInf.GetIndexer())
	// usage samples seen before the pods were listed were held back (the
	// requests on each node were not known yet): record them now
	for _, o := range nodeInf.GetIndexer().List() {
		r.nodeSeen(o, podInf.GetIndexer())
	}
	if r.cfg.NodeName != "" {
		wg.Go(func() { r.flowLoop(ctx, podInf.GetIndexer()) })
	}
	<-ctx.Done()
	return ctx.Err()
}

// load reads the pods and nodes the store has current (what the recorder
// recorded before it stopped).
func (r *Recorder) load(stop <-chan struct{}) error {
	live, err := r.cfg.Store.LivePods()
	if err != nil {
		return fmt.Errorf("read live pods: %w", err)
	}
	nodes, err := r.cfg.Store.Nodes()
	if err != nil {
		return fmt.Errorf("read nodes: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// a Recorder run again starts afresh: what the last run held in
	// memory may not have reached the store (events queued as it stopped)
	r.stop, r.synced = stop, false
	r.pods, r.nodes, r.usage, r.edges = map[types.UID]podState{}, map[string]tracefmt.Node{}, map[string]time.Time{}, map[string]time.Time{}
	r.ahead = map[sampleKey]time.Time{}
	for _, e := range live {
		r.pods[types.UID(e.Pod.UID)] = podState{ref: tracefmt.PodRef{Namespace: e.Pod.Namespace, Name: e.Pod.Name}, node: e.Pod.Node}
	}
	for _, e := range nodes {
		r.nodes[e.Node.Name] = *e.Node
	}
	r.stats = RecorderStats{}
	return nil
}

// recorderInformers are the recorder's pod and node informers (not
// started) and whether their handlers went through the first list.
type recorderInformers struct {
	pods, nodes cache.SharedIndexInformer
	synced      []cache.InformerSynced
}

// informers builds the pod and node informers with the recorder's
// handlers.
func (r *Recorder) informers() (recorderInformers, error) {
	var inf recorderInformers
	inf.pods = newInformer(r.cfg.Client, &v1.Pod{}, podsListWatch(r.cfg.Client.Pods(metav1.NamespaceAll)),
		cache.Indexers{indexNode: podNodeIndex, indexIP: podIPIndex})
	inf.nodes = newInformer(r.cfg.Client, &v1.Node{}, nodesListWatch(r.cfg.Client.Nodes()), cache.Indexers{})
	pods := inf.pods.GetIndexer()
	reg, err := inf.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.podSeen(obj) },
		UpdateFunc: func(_, obj any) { r.podSeen(obj) },
		DeleteFunc: func(obj any) { r.podGone(obj) },
	})
	if err != nil {
		return inf, fmt.Errorf("pod handler: %w", err)
	}
	inf.synced = append(inf.synced, reg.HasSynced)
	reg, err = inf.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.nodeSeen(obj, pods) },
		UpdateFunc: func(_, obj any) { r.nodeSeen(obj, pods) },
		DeleteFunc: func(obj any) { r.nodeGone(obj) },
	})
	if err != nil {
		return inf, fmt.Errorf("node handler: %w", err)
	}
	inf.synced = append(inf.synced, reg.HasSynced)
	return inf, nil
}

// writeLoop appends queued events in batches, retrying a failed
// transaction with backoff; when ctx ends it drains the queue once more.
func (r *Recorder) writeLoop(ctx context.Context) {
	b := backoff.New(r.cfg.BackoffMin, r.cfg.BackoffMax, r.cfg.Seed^0x7ace)
	batch := make([]tracefmt.Event, 0, batchMax)
	for {
		batch = batch[:0]
		select {
		case e := <-r.ch:
			batch = append(batch, e)
		case <-ctx.Done():
			for {
				select {
				case e := <-r.ch:
					batch = append(batch, e)
					continue
				default:
				}
				break
			}
			if len(batch) > 0 {
				r.append(batch)
			}
			return
		}
	fill:
		for len(batch) < batchMax {
			select {
			case e := <-r.ch:
				batch = append(batch, e)
			default:
				break fill
			}
		}
		for !r.append(batch) {
			if !b.Sleep(ctx) {
				r.append(batch) // one last try on the way out
				return
			}
		}
		b.Reset()
	}
}

func (r *Recorder) append(batch []tracefmt.Event) bool {
	res, err := r.cfg.Store.Append(batch...)
	var refused *RefusedError
	if err != nil && !errors.As(err, &refused) {
		r.mu.Lock()
		r.stats.WriteErrors++
		r.mu.Unlock()
		r.log.Error("trace write failed; retrying", "events", len(batch), "err", err)
		return false
	}
	if refused != nil {
		// dropped, not retried: the format would refuse them again
		r.log.Warn("trace records refused; the rest of the batch was written", "refused", res.Refused, "events", len(batch), "err", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Recorded += res.Recorded
	r.stats.Skipped += res.Skipped
	r.stats.Pruned += res.Pruned
	r.stats.Refused += res.Refused
	return true
}

// emit queues an event for the writer; once Run's context ended it is
// dropped (a restarted recorder finds arrivals again in its first list and
// deletions by reconciling).
func (r *Recorder) emit(e tracefmt.Event) {
	select {
	case r.ch <- e:
	case <-r.stop:
	}
}

// podSeen records a pod's arrival (once, at its creationTimestamp) and
// its binding (at BindingTime), or its end when it reached a terminal
// phase.
func (r *Recorder) podSeen(obj any) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		r.podGone(p)
		return
	}
	r.mu.Lock()
	st, known := r.pods[p.UID]
	r.mu.Unlock()
	if !known {
		rec, err := PodRecord(p)
		if err != nil {
			r.mu.Lock()
			r.stats.Malformed++
			r.mu.Unlock()
			r.log.Warn("pod recorded without its GPU request", "pod", p.Namespace+"/"+p.Name, "err", err)
		}
		at := p.CreationTimestamp.Time
		if at.IsZero() {
			at = r.cfg.Now() // an apiserver always sets it; a fake may not
		}
		r.emit(tracefmt.Event{Kind: tracefmt.PodArrival, Time: at, Pod: &rec})
		st = podState{ref: tracefmt.PodRef{Namespace: p.Namespace, Name: p.Name}}
		r.mu.Lock()
		r.pods[p.UID] = st
		r.mu.Unlock()
	}
	if p.Spec.NodeName != "" && p.Spec.NodeName != st.node {
		r.emit(tracefmt.Event{Kind: tracefmt.PodBinding, Time: BindingTime(p, r.cfg.Now()), Pod: &tracefmt.Pod{UID: string(p.UID), Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName}})
		st.node = p.Spec.NodeName
		r.mu.Lock()
		r.pods[p.UID] = st
		r.mu.Unlock()
	}
}

// BindingTime is when pod p was bound: the lastTransitionTime of its
// PodScheduled condition when that is True (the apiserver sets it when it
// binds the pod; the kubelet for a pod created with its node), so an
// agent that first sees a pod long bound (after a restart, or a pod
// created while it was down) records when it was bound rather than when
// it looked. The time is kept within [creationTimestamp, now] (clocks of
// the apiserver and the agent may differ). Without the condition, or
// with a zero time, it is now: the clock when the recorder saw the
// binding.
func BindingTime(p *v1.Pod, now time.Time) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type != v1.PodScheduled || c.Status != v1.ConditionTrue || c.LastTransitionTime.IsZero() {
			continue
		}
		t := c.LastTransitionTime.Time
		if created := p.CreationTimestamp.Time; !created.IsZero() && t.Before(created) {
			t = created
		}
		if t.After(now) {
			t = now
		}
		return t
	}
	return now
}

func (r *Recorder) podGone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	_, known := r.pods[p.UID]
	delete(r.pods, p.UID)
	r.mu.Unlock()
	if !known {
		return
	}
	at := r.cfg.Now()
	if dt := p.DeletionTimestamp; dt != nil && dt.Time.Before(at) {
		at = dt.Time
	}
	r.emit(tracefmt.Event{Kind: tracefmt.PodDeletion, Time: at, Pod: &tracefmt.Pod{UID: string(p.UID), Namespace: p.Namespace, Name: p.Name}})
}

// nodeSeen records a node's attributes when they change, its telemetry
// summary and its published flows when newer than the last recorded.
func (r *Recorder) nodeSeen(obj any, pods cache.Indexer) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	info := NodeRecord(n)
	r.mu.Lock()
	changed := r.nodes[n.Name] != info
	if changed {
		r.nodes[n.Name] = info
	}
	r.mu.Unlock()
	if changed && info.CPUMilli > 0 {
		r.emit(tracefmt.Event{Kind: tracefmt.NodeInfo, Time: r.cfg.Now(), Node: &info})
	}
	if v, ok := n.Annotations[kubefmt.AnnotationTelemetry]; ok {
		r.nodeUsage(n, v, info, pods)
	}
	if v, ok := n.Annotations[kubefmt.FlowsAnnotation]; ok {
		r.nodeFlows(n.Name, v)
	}
}

func (r *Recorder) malformed(what, node string, err error) {
	r.mu.Lock()
	r.stats.Malformed++
	r.mu.Unlock()
	r.log.Debug("annotation not recorded", "annotation", what, "node", node, "err", err)
}

// skewed reports whether a node's sample dated at is more than
// kubefmt.MaxTelemetryClockSkew ahead of the recorder's clock, the bound
// the scheduler plugin reads telemetry with. Such a sample is not
// recorded and never becomes the node's high-water mark (nor the store's
// `seen` mark): one summary from a clock a year ahead, or in year 9999
// (beyond what the record's Unix nanoseconds hold), would otherwise hold
// back every correct sample of the node after it. It is counted
// (RecorderStats.Skewed) once per distinct sample, logged as a warning
// when the node's annotation goes ahead and at debug level after that.
func (r *Recorder) skewed(annotation, node string, at time.Time) bool {
	now := r.cfg.Now()
	key := sampleKey{annotation, node}
	r.mu.Lock()
	last, was := r.ahead[key]
	if !at.After(now.Add(kubefmt.MaxTelemetryClockSkew)) {
		delete(r.ahead, key)
		r.mu.Unlock()
		if was {
			r.log.Info("node clock back in range: recording its samples again", "node", node, "annotation", annotation, "ts", at)
		}
		return false
	}
	repeat := was && last.Equal(at)
	if !repeat {
		r.stats.Skewed++
		r.ahead[key] = at
	}
	r.mu.Unlock()
	switch {
	case !was:
		r.log.Warn("sample ahead of the clock not recorded (the node's clock ran ahead?)", "node", node, "annotation", annotation,
			"ts", at, "now", now, "max_skew", kubefmt.MaxTelemetryClockSkew)
	case !repeat:
		r.log.Debug("sample ahead of the clock not recorded", "node", node, "annotation", annotation, "ts", at, "now", now)
	}
	return true
}

func (r *Recorder) nodeUsage(n *v1.Node, v string, info tracefmt.Node, pods cache.Indexer) {
	s, err := kubefmt.DecodeTelemetry(v)
	if err != nil {
		r.malformed(kubefmt.AnnotationTelemetry, n.Name, err)
		return
	}
	r.mu.Lock()
	synced := r.synced
	r.mu.Unlock()
	if !synced {
		return // the pods are not listed yet: Run records it after the first list
	}
	if r.skewed(kubefmt.AnnotationTelemetry, n.Name, s.Time) {
		return
	}
	r.mu.Lock()
	last := r.usage[n.Name]
	if !s.Time.After(last) {
		r.mu.Unlock()
		return
	}
	r.usage[n.Name] = s.Time
	r.mu.Unlock()
	var requested int64
	objs, _ := pods.ByIndex(indexNode, n.Name)
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
			cpu, _ := kubefmt.PodRequests(p)
			requested += max(cpu, 0)
		}
	}
	r.emit(tracefmt.Event{Kind: tracefmt.NodeUsage, Time: s.Time, Usage: &tracefmt.Usage{Node: n.Name, CPU: min(max(s.CPU, 0), 1), Mem: min(max(s.Mem, 0), 1),
		CPUMilli: info.CPUMilli, RequestedCPUMilli: min(requested, sim.MaxQuantity)}})
}

func (r *Recorder) nodeFlows(node, v string) {
	f, err := kubefmt.DecodeFlows(v)
	if err != nil {
		r.malformed(kubefmt.FlowsAnnotation, node, err)
		return
	}
	if r.skewed(kubefmt.FlowsAnnotation, node, f.Time) {
		return
	}
	r.mu.Lock()
	last := r.edges[node]
	if !f.Time.After(last) {
		r.mu.Unlock()
		return
	}
	r.edges[node] = f.Time
	r.mu.Unlock()
	for _, e := range f.Edges {
		r.emit(tracefmt.Event{Kind: tracefmt.EdgeRate, Time: f.Time, Edge: &tracefmt.Edge{Src: e.Src, Dst: e.Dst, CallsPerSecond: e.CallsPerSecond, Reporter: node}})
	}
}

func (r *Recorder) nodeGone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	n, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	r.mu.Lock()
	_, known := r.nodes[n.Name]
	delete(r.nodes, n.Name)
	delete(r.ahead, sampleKey{kubefmt.AnnotationTelemetry, n.Name})
	delete(r.ahead, sampleKey{kubefmt.FlowsAnnotation, n.Name})
	r.mu.Unlock()
	if known {
		r.emit(tracefmt.Event{Kind: tracefmt.NodeInfo, Time: r.cfg.Now(), Node: &tracefmt.Node{Name: n.Name}})
	}
}

// reconcile records as deleted the pods the store has alive that the
// first list no longer shows (deleted while this agent was down), and
// forgets nodes that are gone.
//
// It reads the informers' stores while holding r.mu, the lock the
// handlers take to record a pod: every pod in r.pods was then either
// loaded from the store or recorded by a handler, which the informer calls
// after adding the pod to its store, so a pod absent from the store now is
// gone (its own delete notification, if still queued, then finds it
// forgotten). Reading the store first and locking after let a pod created
// in between be recorded by its handler and then taken for deleted
// (TestReconcileRace).
func (r *Recorder) reconcile(pods, nodes cache.Indexer) {
	now := r.cfg.Now()
	var gone []tracefmt.Event
	r.mu.Lock()
	for uid, st := range r.pods {
		if !podPresent(pods, uid, st.ref) {
			delete(r.pods, uid)
			gone = append(gone, tracefmt.Event{Kind: tracefmt.PodDeletion, Time: now, Pod: &tracefmt.Pod{UID: string(uid), Namespace: st.ref.Namespace, Name: st.ref.Name}})
		}
	}
	for name := range r.nodes {
		if _, exists, _ := nodes.GetByKey(name); !exists {
			delete(r.nodes, name)
			gone = append(gone, tracefmt.Event{Kind: tracefmt.NodeInfo, Time: now, Node: &tracefmt.Node{Name: name}})
		}
	}
	r.mu.Unlock()
	if len(gone) > 0 {
		r.log.Info("recording what changed while the agent was down", "events", len(gone))
	}
	for _, e := range gone {
		r.emit(e)
	}
	r.mu.Lock()
	r.synced = true
	r.mu.Unlock()
}

// podPresent reports whether the informer's store holds the pod uid (by
// its namespace and name: a pod recreated under the same name has another
// UID).
func podPresent(pods cache.Indexer, uid types.UID, ref tracefmt.PodRef) bool {
	key := ref.Name
	if ref.Namespace != "" {
		key = ref.Namespace + "/" + ref.Name
	}
	o, exists, err := pods.GetByKey(key)
	if err != nil || !exists {
		return false
	}
	p, ok := o.(*v1.Pod)
	return ok && p.UID == uid
}

// flowLoop publishes this node's call rates every FlowInterval.
func (r *Recorder) flowLoop(ctx context.Context, pods cache.Indexer) {
	t := time.NewTicker(r.cfg.FlowInterval)
	defer t.Stop()
	var rates flowRates
	published := false // the last annotation written had edges
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		snap, at := append([]FlowCount(nil), r.flows...), r.flowAt
		r.mu.Unlock()
		if at.IsZero() {
			continue
		}
		byAddr, win := rates.window(at, snap)
		if win < time.Second {
			continue
		}
		win = min(win, time.Hour)
		f := kubefmt.Flows{Time: at, Window: win}
		agg := map[[2]tracefmt.PodRef]float64{}
		for k, rate := range byAddr {
			src, ok1 := podByIP(pods, k[0])
			dst, ok2 := podByIP(pods, k[1])
			if ok1 && ok2 {
				agg[[2]tracefmt.PodRef{src, dst}] += rate
			}
		}
		for k, rate := range agg {
			f.Edges = append(f.Edges, kubefmt.FlowEdge{Src: k[0], Dst: k[1], CallsPerSecond: min(rate, tracefmt.MaxRate)})
		}
		if len(f.Edges) == 0 && !published {
			continue
		}
		if err := r.publishFlows(ctx, f); err != nil {
			r.log.Warn("flows annotation not written", "node", r.cfg.NodeName, "err", err)
			continue
		}
		published = len(f.Edges) > 0
	}
}

func (r *Recorder) publishFlows(ctx context.Context, f kubefmt.Flows) error {
	v, err := kubefmt.EncodeFlows(f)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{kubefmt.FlowsAnnotation: v}}})
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := r.cfg.Client.Nodes().Patch(pctx, r.cfg.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	r.mu.Lock()
	r.stats.FlowsPublished++
	r.mu.Unlock()
	return nil
}

func podByIP(pods cache.Indexer, ip netip.Addr) (tracefmt.PodRef, bool) {
	objs, err := pods.ByIndex(indexIP, ip.Unmap().String())
	if err != nil || len(objs) != 1 {
		return tracefmt.PodRef{}, false // unknown (outside the cluster) or ambiguous
	}
	p := objs[0].(*v1.Pod)
	return tracefmt.PodRef{Namespace: p.Namespace, Name: p.Name}, true
}

func podNodeIndex(obj any) ([]string, error) {
	p, ok := obj.(*v1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return nil, nil
	}
	return []string{p.Spec.NodeName}, nil
}

// podIPIndex indexes running pods by their IPs; host-network pods share
// their node's address and are left out.
func podIPIndex(obj any) ([]string, error) {
	p, ok := obj.(*v1.Pod)
	if !ok || p.Spec.HostNetwork || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		return nil, nil
	}
	var out []string
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			out = append(out, a.Unmap().String())
		}
	}
	if len(out) == 0 && p.Status.PodIP != "" {
		if a, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			out = append(out, a.Unmap().String())
		}
	}
	return out, nil
}

// PodRecord converts a pod into the trace's tracefmt.Pod (its node left
// to bindings) through kubefmt.SimPod, the conversion the scheduler plugin
// scores with: requests (memory rounded up to MiB), the GPU request and
// accepted models, QoS and priority. It adds what the twin enforces
// without a kube-scheduler (the architecture of a kubernetes.io/arch node
// selector, kubefmt.PodArch, and the CPU limit, kubefmt.PodCPULimit) and
// records edgesched.io/cpu-usage only when the pod gives it (the export
// then prefers the node's measured use to the simulator's usage model).
// Requests are kept within [0, sim.MaxQuantity]. Of the accepted GPU
// models the first 64 are kept, each cut to tracefmt.MaxGPUModel bytes
// (see there). A malformed GPU request is returned as an error with the
// record (without GPUs, as the plugin reads it). Other fields are kept as
// they are: one beyond the record format's limits (a string over 1,024
// bytes) makes Store.Append refuse the record, naming the pod and the
// field.
func PodRecord(p *v1.Pod) (tracefmt.Pod, error) {
	sp, models, err := kubefmt.SimPod(p)
	rec := tracefmt.Pod{UID: string(p.UID), Namespace: p.Namespace, Name: p.Name, Service: kubefmt.ServiceOf(p),
		CPUMilli: quantity(sp.CPU), MemoryMiB: quantity(sp.Mem), GPUs: sp.GPUs, GPUMilli: sp.GPUMilli,
		QoS: sp.QoS, Priority: sp.Priority, Arch: kubefmt.PodArch(p), CPULimitMilli: quantity(kubefmt.PodCPULimit(p))}
	if len(models) > tracefmt.MaxModels {
		models = models[:tracefmt.MaxModels]
	}
	for i, m := range models {
		models[i] = truncate(m, tracefmt.MaxGPUModel)
	}
	rec.GPUModels = models
	if u, ok := kubefmt.PodCPUUsage(p); ok {
		rec.CPUUsage = u
	}
	return rec, err
}

// quantity keeps a request or capacity within the record format's range.
func quantity(v int64) int64 { return min(max(v, 0), sim.MaxQuantity) }

// NodeRecord converts a node through kubefmt.SimNode, the conversion the
// scheduler plugin models nodes with: allocatable CPU (milli) and memory
// (MiB), GPUs and model (the model cut to tracefmt.MaxGPUModel bytes),
// zone (cut to 1,024 bytes), architecture and edgesched.io/failure-rate.
func NodeRecord(n *v1.Node) tracefmt.Node {
	spec, _ := kubefmt.SimNode(n)
	return tracefmt.Node{Name: n.Name, CPUMilli: quantity(spec.CPU), MemoryMiB: quantity(spec.Memory),
		GPUs: int32(spec.GPUs), GPUModel: truncate(spec.GPUModel, tracefmt.MaxGPUModel), Zone: truncate(spec.Zone, tracefmt.MaxString),
		Arch: spec.Arch, FailureRate: spec.FailureRate}
}

// newInformer is a shared index informer of one resource (no resync),
// built on the agent's own client rather than client-go's informers
// package, whose factory links every API group's client into the binary.
// client is asked whether it supports watch-list streams (see
// RecorderConfig.Client).
func newInformer(client any, obj runtime.Object, lw *cache.ListWatch, idx cache.Indexers) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), obj,
		cache.SharedIndexInformerOptions{Indexers: idx})
}

func podsListWatch(c kube.PodInterface) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, o)
		},
	}
}

func nodesListWatch(c kube.NodeInterface) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, o)
		},
	}
}
