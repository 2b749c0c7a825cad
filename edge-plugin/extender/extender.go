package extender

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
	"github.com/edgesched/edgesched/edge-plugin/serving"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// This file is the HTTP extender mode: for schedulers that cannot load
// the plugin (K3s's embedded kube-scheduler), the same policy code answers
// the kube-scheduler extender protocol (k8s.io/kube-scheduler/extender/v1):
//
//   - POST {prefix}/filter: ExtenderArgs in, ExtenderFilterResult out. The
//     decisions are edgeplugin.EdgePolicy's PreFilter and Filter, called as they are
//     (GPU model and per-device fit; the scheduling policy's required
//     rules, a refused node's reason naming the rule: policy_filter.go).
//     The plugin's two failure kinds are
//     kept apart: UnschedulableAndUnresolvable (no GPUs, model not
//     accepted, more devices than the node has, malformed request) goes to
//     FailedAndUnresolvableNodes, Unschedulable (no free device or share
//     right now) to FailedNodes, so preemption treats them as the plugin's
//     statuses would be treated.
//   - POST {prefix}/prioritize: ExtenderArgs in, HostPriorityList out. The
//     scores are edgeplugin.EdgePolicy's PreScore scores (same conversion, features,
//     int8 network and normalisation: every node tied with the best gets
//     MaxNodeScore=100, others [0, 99]) mapped to the extender range
//     [0, MaxExtenderPriority=10] by extenderPriority: 100 -> 10 and
//     [0, 99] -> [0, 9]. The tied-best set therefore stays exactly the
//     plugin's (and the simulator's); only the ranking below the best is
//     coarser. kube-scheduler multiplies by the extender's weight and by
//     MaxNodeScore/MaxExtenderPriority = 10, so with the default scorers
//     disabled the scheduler picks among the same nodes as the plugin.
//     The scheduling policy's preferred rules are mixed into the 0..100
//     scores as in the plugin's Score (policydoc Document.Combine, clamped
//     to [0, MaxNodeScore]) before that mapping, so the extender's scores
//     stay in [0, MaxExtenderPriority].
//
// The extender needs more than the request carries: the node objects
// (nodeCacheCapable=false sends them in full; with nodeCacheCapable=true
// the names are resolved from the source), every node of the cluster (the
// policy's features are relative to the largest node, as in PreScore,
// which sees the whole snapshot) and the pods already on the nodes. Those
// come from a ClusterSource: in production an informer cache of nodes and
// assigned pods (InformerSource), in tests a StaticSource. The request
// path only reads memory: no API calls.
//
// The bind verb (extender_bind.go) binds the pods the scheduler hands it
// (with managedResources, the GPU pods) with the devices the policy picks,
// as the plugin's Reserve and Bind do. Differences from the plugin: pods
// the scheduler binds itself get no edgesched.io/gpu-devices annotation,
// and GPU pods without one count with the converter's deterministic
// best-fit devices; and a binding the scheduler made a moment ago is only
// seen once the informer delivers it (the plugin sees the scheduler's
// assumed pods at once; the extender, the pods it bound itself).

// ClusterSource is the extender's view of the cluster beyond a request.
// Implementations must be safe for concurrent use and must not block on
// I/O (they serve from memory).
type ClusterSource interface {
	// Synced reports whether the initial state is loaded. Until then GPU
	// pods fail filtering (device occupancy is unknown) and prioritize
	// returns 503 (the scheduler then ignores the extender's scores).
	Synced() bool
	// ListNodes returns every node. Empty: the request's nodes are taken
	// as the whole cluster.
	ListNodes() []*v1.Node
	// GetNode returns a node by name (nodeCacheCapable requests).
	GetNode(name string) (*v1.Node, bool)
	// PodsOnNode returns the pods assigned to the node that still hold
	// resources (not Succeeded or Failed). The slice is the caller's.
	PodsOnNode(name string) []*v1.Pod
}

// DefaultMaxBodyBytes caps an extender request body. With
// nodeCacheCapable=false every feasible node object is in the request
// (typically 3-20 KiB each, most of it status.images), so 64 MiB is a few
// thousand nodes.
const DefaultMaxBodyBytes = 64 << 20

// Options configure an Extender.
type Options struct {
	// Prefix is the URL path prefix of the verbs ("" or e.g.
	// "/edgesched"): the verbs are {Prefix}/filter, {Prefix}/prioritize and
	// {Prefix}/bind.
	Prefix string
	// MaxBodyBytes caps request bodies (0: DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// Client serves the bind verb ({Prefix}/bind: get the pod, bind it
	// with its devices). nil: the verb answers every request with an
	// error result.
	Client kubernetes.Interface
	// Now is the clock of assumed pods (AssumeTTL; nil: time.Now).
	Now func() time.Time
	// BindWait bounds how long a filter call that depends on devices or
	// placements waits for the bindings of pods prioritized before it
	// (extender_inflight.go). 0: DefaultBindWait; negative: no wait.
	BindWait time.Duration
}

// Extender serves edgeplugin.EdgePolicy's Filter, Score and Bind over the
// kube-scheduler HTTP extender protocol. It is an http.Handler for the
// three verbs; Handler adds /healthz, /readyz and /metrics.
type Extender struct {
	p       *edgeplugin.EdgePolicy
	src     ClusterSource
	prefix  string
	maxBody int64

	client kubernetes.Interface
	now    func() time.Time
	// bindMu serialises the bind verb's device choice and assumption
	// (taken before mu).
	bindMu sync.Mutex

	// mu guards cache: NodeInfos reused while a node and its pods are
	// unchanged, so the converter's per-generation cache and incremental
	// State stay effective across requests; and assumed: the pods the
	// bind verb is binding or bound that the source may not show yet.
	mu      sync.Mutex
	cache   map[string]cachedInfo
	assumed map[types.UID]assumedPod
	// assumedOn lists each node's assumed pods (some perhaps forgotten
	// in assumed already: podsOnNode drops them).
	assumedOn map[string][]types.UID

	// order is the source's nodes in name order (nodeOrder), kept while
	// the set of names is the same.
	order atomic.Pointer[nodeOrder]

	// inflight holds the prioritized pods whose binding has not reached
	// the bind verb, once the scheduler has delegated a binding (binds:
	// a scheduler that binds itself never calls the verb, and its pods
	// would only ever expire); filter waits for them up to bindWait.
	inflight *inflight
	binds    atomic.Bool
	bindWait time.Duration
}

// nodeOrder places the cluster's nodes: an informer's store lists them in
// no fixed order, and the converter re-sorts and re-indexes the whole
// snapshot whenever its list changes order (entriesLocked), which at
// 5,000 nodes cost more than the rest of a request. Immutable once built.
type nodeOrder struct {
	names []string
	idx   map[string]int
}

func newNodeOrder(nodes []*v1.Node) *nodeOrder {
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	o := &nodeOrder{names: names, idx: make(map[string]int, len(names))}
	for i, n := range names {
		o.idx[n] = i
	}
	return o
}

// place puts src in o's order; ok is false when src is not o's set of
// names (a node came or went: build the order again).
func (o *nodeOrder) place(src []*v1.Node) ([]*v1.Node, bool) {
	if o == nil || len(src) != len(o.names) {
		return nil, false
	}
	all := make([]*v1.Node, len(o.names))
	for _, n := range src {
		i, ok := o.idx[n.Name]
		if !ok || all[i] != nil {
			return nil, false
		}
		all[i] = n
	}
	return all, true
}

type cachedInfo struct {
	fp uint64
	ni *framework.NodeInfo
}

// New returns the extender serving p's decisions with the cluster
// state of src.
func New(p *edgeplugin.EdgePolicy, src ClusterSource, o Options) *Extender {
	registerExtenderMetrics()
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.BindWait == 0 {
		o.BindWait = DefaultBindWait
	}
	e := &Extender{p: p, src: src, prefix: cleanPrefix(o.Prefix), maxBody: o.MaxBodyBytes, client: o.Client, now: o.Now,
		cache: map[string]cachedInfo{}, assumed: map[types.UID]assumedPod{}, assumedOn: map[string][]types.UID{},
		inflight: newInflight(), bindWait: o.BindWait}
	p.SetNodeLister(func() []fwk.NodeInfo { // the policy's view of where services run
		all, _ := e.allNodes(nil)
		return e.clusterInfos(all, "")
	})
	return e
}

func cleanPrefix(p string) string {
	p = strings.TrimRight(strings.TrimSpace(p), "/")
	if p != "" && !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return p
}

// FilterPath and PrioritizePath are the verbs' URL paths.
func (e *Extender) FilterPath() string     { return e.prefix + "/filter" }
func (e *Extender) PrioritizePath() string { return e.prefix + "/prioritize" }

// ServeHTTP serves the verbs (POST only).
func (e *Extender) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var verb string
	switch r.URL.Path {
	case e.FilterPath():
		verb = "filter"
	case e.PrioritizePath():
		verb = "prioritize"
	case e.BindPath():
		verb = "bind"
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, fmt.Sprintf("edgesched extender: %s: method %s not allowed, use POST", verb, r.Method), http.StatusMethodNotAllowed)
		return
	}
	start := time.Now()
	var result string
	if verb == "bind" {
		result = e.serveBind(w, r)
	} else {
		result = e.serveVerb(w, r, verb)
	}
	metricExtRequests.WithLabelValues(verb, result).Inc()
	metricExtDuration.WithLabelValues(verb).Observe(time.Since(start).Seconds())
}

// Handler is the extender's whole HTTP surface: the verbs, /healthz
// (the process serves), /readyz (the cluster source has synced) and
// /metrics (the legacy registry: the plugin's and the extender's series).
func (e *Extender) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(e.FilterPath(), e)
	mux.Handle(e.PrioritizePath(), e)
	mux.Handle(e.BindPath(), e)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !e.src.Synced() {
			http.Error(w, "cluster cache not synced", http.StatusServiceUnavailable)
			return
		}
		if e.p.Models().Current() == nil {
			_, _ = io.WriteString(w, "ok (no model: scoring neutrally)\n")
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.Handle("/metrics", legacyregistry.Handler())
	return mux
}

// Request results (metric label values).
const (
	extOK         = "ok"
	extBadRequest = "bad_request"
	extNotReady   = "not_ready"
	extPanic      = "panic"
	extError      = "error"
)

func (e *Extender) serveVerb(w http.ResponseWriter, r *http.Request, verb string) (result string) {
	args, err := e.decode(w, r)
	if err != nil {
		http.Error(w, fmt.Sprintf("edgesched extender: %s: %v", verb, err), http.StatusBadRequest)
		return extBadRequest
	}
	ctx := r.Context()
	logger := klog.FromContext(ctx).WithValues("verb", verb, "pod", klog.KObj(args.Pod))
	defer func() {
		if rec := recover(); rec != nil {
			serving.CountPanic()
			logger.Error(nil, "Extender panic contained", "panic", rec)
			klog.V(4).InfoS("Extender panic stack", "stack", string(debug.Stack()))
			msg := fmt.Sprintf("edgesched extender: internal error (panic): %v", rec)
			if verb == "filter" {
				// An error result: the scheduler fails this pod's cycle
				// (or skips the extender if it is ignorable).
				writeJSON(w, &extenderv1.ExtenderFilterResult{Error: msg})
			} else {
				http.Error(w, msg, http.StatusInternalServerError) // prioritize errors are ignored by the scheduler
			}
			result = extPanic
		}
	}()
	if verb == "filter" {
		res := e.Filter(ctx, args)
		writeJSON(w, res)
		if res.Error != "" {
			if !e.src.Synced() {
				return extNotReady
			}
			return extError
		}
		return extOK
	}
	if !e.src.Synced() {
		http.Error(w, "edgesched extender: prioritize: cluster cache not synced yet", http.StatusServiceUnavailable)
		return extNotReady
	}
	writeJSON(w, e.Prioritize(ctx, args))
	return extOK
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "edgesched extender: encoding the response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// decode reads ExtenderArgs strictly at the top level (only Pod, Nodes and
// NodeNames; one JSON value; exactly one of Nodes or NodeNames; a body of
// at most maxBody bytes). The Pod and Node objects inside are decoded
// leniently, as the API machinery does: a newer kube-scheduler may send
// fields this build does not know.
func (e *Extender) decode(w http.ResponseWriter, r *http.Request) (*extenderv1.ExtenderArgs, error) {
	raw, err := e.readBody(w, r)
	if err != nil {
		return nil, err
	}
	return decodeExtenderArgs(raw)
}

// readBody reads a JSON request body of at most maxBody bytes.
func (e *Extender) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return nil, fmt.Errorf("content type %q: want application/json", ct)
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, e.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, fmt.Errorf("request body exceeds the limit of %d bytes (raise --max-body-bytes, or use nodeCacheCapable)", e.maxBody)
		}
		return nil, fmt.Errorf("reading the request body: %v", err)
	}
	return raw, nil
}

func decodeExtenderArgs(raw []byte) (*extenderv1.ExtenderArgs, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("empty request body: want a JSON ExtenderArgs object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var top map[string]json.RawMessage
	if err := dec.Decode(&top); err != nil {
		return nil, fmt.Errorf("malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("malformed JSON: trailing data after the ExtenderArgs object")
	}
	if top == nil {
		return nil, errors.New("ExtenderArgs is null")
	}
	for k := range top {
		switch strings.ToLower(k) { // encoding/json matches field names case-insensitively
		case "pod", "nodes", "nodenames":
		default:
			return nil, fmt.Errorf("unknown field %q in ExtenderArgs (want Pod, Nodes, NodeNames)", k)
		}
	}
	args := &extenderv1.ExtenderArgs{}
	if err := json.Unmarshal(raw, args); err != nil {
		return nil, fmt.Errorf("decoding ExtenderArgs: %v", err)
	}
	switch {
	case args.Pod == nil:
		return nil, errors.New("ExtenderArgs.Pod is missing")
	case args.Nodes == nil && args.NodeNames == nil:
		return nil, errors.New("ExtenderArgs has neither Nodes nor NodeNames")
	case args.Nodes != nil && args.NodeNames != nil:
		return nil, errors.New("ExtenderArgs has both Nodes and NodeNames: want one (Nodes when nodeCacheCapable is false)")
	}
	seen := map[string]bool{}
	check := func(i int, name string) error {
		if name == "" {
			return fmt.Errorf("node %d has no name", i)
		}
		if seen[name] {
			return fmt.Errorf("node %q is listed twice", name)
		}
		seen[name] = true
		return nil
	}
	if args.Nodes != nil {
		for i := range args.Nodes.Items {
			if err := check(i, args.Nodes.Items[i].Name); err != nil {
				return nil, fmt.Errorf("ExtenderArgs.Nodes: %v", err)
			}
		}
	} else {
		for i, n := range *args.NodeNames {
			if err := check(i, n); err != nil {
				return nil, fmt.Errorf("ExtenderArgs.NodeNames: %v", err)
			}
		}
	}
	return args, nil
}

// requestNodes returns the request's nodes in order; with NodeNames they
// come from the source, and names it does not know are returned apart.
func (e *Extender) requestNodes(args *extenderv1.ExtenderArgs) (nodes []*v1.Node, missing []string) {
	if args.Nodes != nil {
		nodes = make([]*v1.Node, len(args.Nodes.Items))
		for i := range args.Nodes.Items {
			nodes[i] = &args.Nodes.Items[i]
		}
		return nodes, nil
	}
	for _, name := range *args.NodeNames {
		if n, ok := e.src.GetNode(name); ok {
			nodes = append(nodes, n)
		} else {
			missing = append(missing, name)
		}
	}
	return nodes, missing
}

// ReasonNodeUnknown is the filter reason for a node name the extender's
// cache does not hold (nodeCacheCapable requests only).
const ReasonNodeUnknown = "node not in the edgesched extender's cache yet"

// Filter answers a filter call with edgeplugin.EdgePolicy's PreFilter and Filter.
// The reply mirrors the request: Nodes for Nodes, NodeNames for NodeNames.
func (e *Extender) Filter(ctx context.Context, args *extenderv1.ExtenderArgs) *extenderv1.ExtenderFilterResult {
	res := &extenderv1.ExtenderFilterResult{FailedNodes: extenderv1.FailedNodesMap{}, FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{}}
	nodes, missing := e.requestNodes(args)
	for _, name := range missing {
		res.FailedNodes[name] = ReasonNodeUnknown
	}
	keep := make([]bool, len(nodes))
	cs := framework.NewCycleState()
	_, st := e.p.PreFilter(ctx, cs, args.Pod, nil)
	switch {
	case st.IsSkip(): // no GPU request: edgeplugin.EdgePolicy has nothing to check
		for i := range keep {
			keep[i] = true
		}
	case !st.IsSuccess(): // malformed GPU request: no node can take it
		for _, n := range nodes {
			res.FailedAndUnresolvableNodes[n.Name] = st.Message()
		}
	case !e.src.Synced():
		res.Error = "edgesched extender: cluster cache not synced yet (GPU device occupancy and the policy's placements unknown)"
		return res
	default:
		// devices and placements decide: first let the bindings of the
		// pods prioritized before this one arrive
		if e.bindWait > 0 && e.binds.Load() {
			metricExtBindWaits.WithLabelValues(string(e.inflight.wait(ctx, args.Pod.UID, e.bindWait))).Inc()
			e.inflight.filter(args.Pod.UID)
		}
		infos := e.infos(nodes, args.Pod.UID)
		for i, ni := range infos {
			fs := e.p.Filter(ctx, cs, args.Pod, ni)
			switch {
			case fs.IsSuccess():
				keep[i] = true
			case fs.Code() == fwk.UnschedulableAndUnresolvable:
				res.FailedAndUnresolvableNodes[nodes[i].Name] = fs.Message()
			default:
				res.FailedNodes[nodes[i].Name] = fs.Message()
			}
		}
	}
	if args.NodeNames != nil {
		names := make([]string, 0, len(nodes))
		for i, n := range nodes {
			if keep[i] {
				names = append(names, n.Name)
			}
		}
		res.NodeNames = &names
		return res
	}
	list := &v1.NodeList{Items: make([]v1.Node, 0, len(nodes))}
	for i, n := range nodes {
		if keep[i] {
			list.Items = append(list.Items, *n)
		}
	}
	res.Nodes = list
	return res
}

// extenderPriority maps edgeplugin.EdgePolicy's normalised score (0..MaxNodeScore,
// the tied-best nodes exactly MaxNodeScore) to the extender range: the
// tied-best nodes get MaxExtenderPriority, the others [0, 99] scale down
// to [0, MaxExtenderPriority-1] (floor). Monotone, and the best set is
// preserved exactly.
func extenderPriority(s int64) int64 {
	if s >= fwk.MaxNodeScore {
		return extenderv1.MaxExtenderPriority
	}
	if s <= fwk.MinNodeScore {
		return extenderv1.MinExtenderPriority
	}
	return min(extenderv1.MaxExtenderPriority-1, s*(extenderv1.MaxExtenderPriority-1)/(fwk.MaxNodeScore-1))
}

// Prioritize answers a prioritize call with edgeplugin.EdgePolicy's PreScore scores
// (over the whole cluster of the source, the request's nodes being the
// feasible ones) mapped by extenderPriority. Every requested node gets an
// entry; nodes the policy does not score (fallback, infeasible for the
// simulator, unknown) get 0, as in the plugin.
func (e *Extender) Prioritize(ctx context.Context, args *extenderv1.ExtenderArgs) *extenderv1.HostPriorityList {
	nodes, missing := e.requestNodes(args)
	if e.bindWait > 0 && args.Pod != nil {
		e.inflight.prioritize(args.Pod.UID) // its binding comes next
	}
	out := make(extenderv1.HostPriorityList, 0, len(nodes)+len(missing))
	scores := e.scores(ctx, args.Pod, nodes)
	e.policyScores(args.Pod, nodes, scores)
	for _, n := range nodes {
		out = append(out, extenderv1.HostPriority{Host: n.Name, Score: extenderPriority(scores[n.Name])})
	}
	for _, name := range missing {
		out = append(out, extenderv1.HostPriority{Host: name, Score: 0})
	}
	return &out
}

// scores is PreScore for the extender: the plugin's normalised scores
// (0..100) of the feasible nodes, with the same fallbacks and metrics.
func (e *Extender) scores(ctx context.Context, pod *v1.Pod, feasible []*v1.Node) map[string]int64 {
	out := make(map[string]int64, len(feasible))
	ps := &serving.Cycle{}
	if ps.SetPod(pod) != nil {
		return out
	}
	all, byName := e.allNodes(feasible)
	allInfos := e.clusterInfos(all, pod.UID)
	infos := make([]fwk.NodeInfo, 0, len(feasible))
	for _, n := range feasible {
		infos = append(infos, allInfos[byName[n.Name]])
	}
	core := e.p.Core()
	if reason, err := core.Score(allInfos, infos, ps); reason != "" {
		if err != nil {
			klog.FromContext(ctx).Error(err, "EdgePolicy extender scored neutrally", "pod", klog.KObj(pod), "reason", reason)
		}
		return out
	}
	for _, n := range feasible {
		if s, ok := ps.ScoreOf(n.Name); ok {
			out[n.Name] = s
		}
	}
	core.Release(ps)
	return out
}

// allNodes is the source's nodes in name order with the request's
// objects in place of the source's (the scheduler's copy is at least as
// fresh), and the index of every name. Without source nodes the
// request's nodes are the cluster. The index is shared: read it only.
func (e *Extender) allNodes(req []*v1.Node) ([]*v1.Node, map[string]int) {
	src := e.src.ListNodes()
	o := e.order.Load()
	all, ok := o.place(src)
	if !ok {
		o = newNodeOrder(src)
		e.order.Store(o)
		if all, ok = o.place(src); !ok { // duplicate names: the first stands
			all = make([]*v1.Node, len(o.names))
			for _, n := range src {
				if i := o.idx[n.Name]; all[i] == nil {
					all[i] = n
				}
			}
		}
	}
	idx, private := o.idx, false
	for _, n := range req {
		i, ok := idx[n.Name]
		if !ok { // a node the source does not hold yet: a private index
			if !private {
				idx, private = maps.Clone(idx), true
			}
			idx[n.Name] = len(all)
			all = append(all, n)
			continue
		}
		all[i] = n
	}
	return all, idx
}

// infos returns a NodeInfo per node with its pods from the source (the
// pod being scheduled left out). A node's NodeInfo is reused while the
// node's and its pods' resource versions are unchanged: its generation
// then stays the same and the converter's caches hit. Objects without a
// resource version (tests, hand-made sources) are never cached.
func (e *Extender) infos(nodes []*v1.Node, exclude types.UID) []fwk.NodeInfo {
	return e.nodeInfos(nodes, exclude, false)
}

// clusterInfos is infos of the whole cluster (allNodes), which may also
// forget the cached NodeInfos of nodes gone. Only here: a filter request
// names the few hundred nodes the scheduler found feasible, and forgetting
// the others' NodeInfos made the next prioritize build and convert every
// node again (60 ms a request at 5,000 nodes).
func (e *Extender) clusterInfos(all []*v1.Node, exclude types.UID) []fwk.NodeInfo {
	return e.nodeInfos(all, exclude, true)
}

// nodeInfos is infos; sweep forgets cached nodes not among nodes now and
// then (nodes must then be the whole cluster: the bind verb's one node is
// not).
func (e *Extender) nodeInfos(nodes []*v1.Node, exclude types.UID, sweep bool) []fwk.NodeInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]fwk.NodeInfo, len(nodes))
	for i, n := range nodes {
		pods := e.podsOnNode(n.Name)
		fp, cacheable := fingerprint(n, pods, exclude)
		if c, ok := e.cache[n.Name]; cacheable && ok && c.fp == fp {
			out[i] = c.ni
			continue
		}
		// a NodeInfo built again holds its pods in one order, whatever
		// order the source listed them in
		slices.SortFunc(pods, func(a, b *v1.Pod) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
		})
		kept := pods[:0:0]
		for _, p := range pods {
			if exclude == "" || p.UID != exclude {
				kept = append(kept, p)
			}
		}
		ni := framework.NewNodeInfo(kept...)
		ni.SetNode(n)
		out[i] = ni
		if cacheable {
			e.cache[n.Name] = cachedInfo{fp: fp, ni: ni}
		} else {
			delete(e.cache, n.Name)
		}
	}
	if sweep && len(e.cache) > 2*len(nodes)+64 { // forget deleted nodes now and then
		keep := make(map[string]bool, len(nodes))
		for _, n := range nodes {
			keep[n.Name] = true
		}
		for name := range e.cache {
			if !keep[name] {
				delete(e.cache, name)
			}
		}
	}
	return out
}

// fingerprint hashes a node's and its pods' identities and resource
// versions, in any order of the pods (an informer's index lists them in no
// fixed order: the per-pod hashes are summed, so nothing is sorted unless
// the NodeInfo is built again); cacheable is false when one is missing or
// the excluded pod is among them. The seed is per process: fingerprints
// are compared only within one.
func fingerprint(n *v1.Node, pods []*v1.Pod, exclude types.UID) (uint64, bool) {
	if n.ResourceVersion == "" {
		return 0, false
	}
	pair := func(a, b string) uint64 {
		return maphash.String(fingerprintSeed, a)*0x9e3779b97f4a7c15 ^ maphash.String(fingerprintSeed, b)
	}
	sum := pair(string(n.UID), n.ResourceVersion) + uint64(len(pods))*0xbf58476d1ce4e5b9
	for _, p := range pods {
		if p.ResourceVersion == "" || (exclude != "" && p.UID == exclude) {
			return 0, false
		}
		sum += pair(string(p.UID), p.ResourceVersion)
	}
	return sum, true
}

var fingerprintSeed = maphash.MakeSeed()

// StaticSource is a ClusterSource holding fixed objects (tests, tools,
// and embedding programs that maintain the state themselves).
type StaticSource struct {
	mu    sync.RWMutex
	nodes map[string]*v1.Node
	pods  map[string][]*v1.Pod
	// NotSynced makes Synced report false (tests of the not-ready path).
	NotSynced bool
}

// NewStaticSource returns a source with nodes and pods (pods are placed by
// spec.nodeName; unassigned ones are ignored).
func NewStaticSource(nodes []*v1.Node, pods ...*v1.Pod) *StaticSource {
	s := &StaticSource{nodes: map[string]*v1.Node{}, pods: map[string][]*v1.Pod{}}
	for _, n := range nodes {
		s.SetNode(n)
	}
	for _, p := range pods {
		s.AddPod(p)
	}
	return s
}

// SetNode adds or replaces a node.
func (s *StaticSource) SetNode(n *v1.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes[n.Name] = n
}

// AddPod adds an assigned pod.
func (s *StaticSource) AddPod(p *v1.Pod) {
	if p.Spec.NodeName == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods[p.Spec.NodeName] = append(s.pods[p.Spec.NodeName], p)
}

// Synced implements ClusterSource.
func (s *StaticSource) Synced() bool { return !s.NotSynced }

// ListNodes implements ClusterSource.
func (s *StaticSource) ListNodes() []*v1.Node {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*v1.Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		out = append(out, n)
	}
	return out
}

// GetNode implements ClusterSource.
func (s *StaticSource) GetNode(name string) (*v1.Node, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n, ok := s.nodes[name]
	return n, ok
}

// PodsOnNode implements ClusterSource.
func (s *StaticSource) PodsOnNode(name string) []*v1.Pod {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.pods[name])
}

// Extender metrics (legacy registry, next to the plugin's).
var (
	metricExtRequests = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "edgesched_extender",
		Name:           "requests_total",
		Help:           "Extender calls by verb (filter, prioritize) and result (ok, bad_request, not_ready, error, panic).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"verb", "result"})
	metricExtDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      "edgesched_extender",
		Name:           "request_duration_seconds",
		Help:           "Time to answer an extender call (decoding included), by verb.",
		Buckets:        metrics.ExponentialBuckets(50e-6, 2.5, 12),
		StabilityLevel: metrics.ALPHA,
	}, []string{"verb"})
	metricExtBindWaits = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "edgesched_extender",
		Name:           "filter_bind_waits_total",
		Help:           "Filter calls by how their wait for earlier prioritized pods' bindings ended (none, bound, expired, canceled).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"outcome"})
	registerExtOnce sync.Once
)

func registerExtenderMetrics() {
	edgeplugin.RegisterMetrics()
	registerPolicyMetrics()
	registerExtOnce.Do(func() { legacyregistry.MustRegister(metricExtRequests, metricExtDuration, metricExtBindWaits) })
}
