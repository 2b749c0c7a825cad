package serving

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/edgesched/edgesched/edge-plugin/sources"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/sim"
)

// This file converts the scheduler's snapshot into the simulator's types
// (sim.Env and sim.State), so that the features and the int8 policy see
// exactly what they would see in the simulator for the same cluster.

// convPod is a pod on a node in the simulator's terms, with the devices it
// holds.
type convPod struct {
	pod     sim.Pod
	service string // kubefmt.ServiceOf; its index depends on the view's env
	devices []int
}

// nodeEntry is one node converted; immutable once built, cached by the
// NodeInfo's generation (which the scheduler bumps on every change).
type nodeEntry struct {
	gen     int64
	spec    sim.NodeSpec
	sig     uint64 // hash of spec (specSig)
	ok      bool   // false: the node cannot be modelled (no CPU or memory)
	pods    []convPod
	skipped int
	free    []int64 // per-device free share after pods
	// tel is the node's telemetry summary (nil when the annotation is
	// absent or malformed); telErr is the decoding error of a malformed
	// one. Freshness is judged per cycle (telemetry.go), not here.
	tel    *kubefmt.TelemetrySummary
	telErr error
	// node is the Node object converted: the informer replaces the
	// object on every change, so while NodeInfo holds the same one, spec
	// and telemetry carry over to the next conversion (a bind moves the
	// generation, not the node).
	node *v1.Node
}

// simPod converts a pod (kubefmt.SimPod, the conversion the agent's trace
// recorder uses too); the error is a malformed GPU request.
func simPod(p *v1.Pod) (sim.Pod, error) {
	sp, _, err := kubefmt.SimPod(p)
	return sp, err
}

// reservations remembers the devices chosen at Reserve until the pod's
// annotation (set in Bind) shows up in the snapshot, or for ttl.
type reservations struct {
	m sync.Map // types.UID -> reservation
	// nextSweep is when put next drops expired reservations (Unix ns):
	// a sweep ranges over every reservation kept, so it runs once per
	// reservationSweep, not per Reserve (per Reserve it had grown to a
	// pass over the last ten minutes' GPU pods, the largest part of
	// Reserve at a few hundred pods a second).
	nextSweep atomic.Int64
}

type reservation struct {
	node    string
	devices []int
	at      time.Time
}

const (
	reservationTTL   = 10 * time.Minute
	reservationSweep = time.Minute
)

func (r *reservations) get(uid types.UID, node string) ([]int, bool) {
	v, ok := r.m.Load(uid)
	if !ok {
		return nil, false
	}
	res := v.(reservation)
	if res.node != node {
		return nil, false
	}
	return res.devices, true
}

func (r *reservations) put(uid types.UID, node string, devices []int, now time.Time) {
	r.m.Store(uid, reservation{node: node, devices: devices, at: now})
	next := r.nextSweep.Load()
	if d := next - now.UnixNano(); d > 0 && d <= int64(reservationSweep) {
		return // swept less than reservationSweep ago (and the clock did not go back)
	}
	if !r.nextSweep.CompareAndSwap(next, now.Add(reservationSweep).UnixNano()) {
		return // another Reserve sweeps
	}
	r.m.Range(func(k, v any) bool {
		if now.Sub(v.(reservation).at) > reservationTTL {
			r.m.Delete(k)
		}
		return true
	})
}

// convertNode converts a node and its pods. GPU pods keep the devices of
// their AnnotationGPUDevices, else of a reservation; the rest get devices
// derived deterministically (best fit in namespace/name order, after the
// recorded ones). Pods that do not fit the model of the node are skipped.
// prev is the node's last conversion (nil: none): when it converted the
// same Node object, its spec and telemetry are kept rather than decoded
// again (the telemetry annotation's JSON was half of a conversion at
// 5,000 nodes with a bind per cycle).
func convertNode(ni fwk.NodeInfo, res *reservations, prev *nodeEntry) *nodeEntry {
	n := ni.Node()
	e := &nodeEntry{gen: ni.GetGeneration(), node: n}
	if n == nil {
		return e
	}
	if prev != nil && prev.node == n {
		e.spec, e.ok, e.sig, e.tel, e.telErr = prev.spec, prev.ok, prev.sig, prev.tel, prev.telErr
	} else {
		e.spec, e.ok = kubefmt.SimNode(n)
		e.sig = specSig(&e.spec)
		e.tel, e.telErr = nodeTelemetry(n)
	}
	e.free = make([]int64, e.spec.GPUs)
	for i := range e.free {
		e.free[i] = sim.MilliGPU
	}
	type pending struct {
		p   *v1.Pod
		sp  sim.Pod
		dev []int
	}
	var later []pending
	for _, pi := range ni.GetPods() {
		p := pi.GetPod()
		sp, err := simPod(p)
		if err != nil {
			e.skipped++
			continue
		}
		if sp.Arch != sim.ArchAny && sp.Arch != e.spec.Arch {
			// bound against its selector (spec.nodeName set by hand): it
			// runs here all the same, so it counts as running anywhere
			sp.Arch = sim.ArchAny
		}
		svc := kubefmt.ServiceOf(p)
		if sp.GPUs == 0 {
			e.pods = append(e.pods, convPod{pod: sp, service: svc})
			continue
		}
		dev, ok := kubefmt.PodDevices(p, sp.GPUs, e.spec.GPUs)
		if !ok {
			dev, ok = res.get(p.UID, n.Name)
		}
		if !ok || !takeDevices(e.free, dev, sp.GPUMilli) {
			later = append(later, pending{p: p, sp: sp})
			continue
		}
		e.pods = append(e.pods, convPod{pod: sp, service: svc, devices: dev})
	}
	slices.SortFunc(later, func(a, b pending) int {
		return cmp.Or(cmp.Compare(a.p.Namespace, b.p.Namespace), cmp.Compare(a.p.Name, b.p.Name))
	})
	for _, l := range later {
		dev := bestFit(e.free, l.sp.GPUs, l.sp.GPUMilli)
		if dev == nil || !takeDevices(e.free, dev, l.sp.GPUMilli) {
			e.skipped++
			continue
		}
		e.pods = append(e.pods, convPod{pod: l.sp, service: kubefmt.ServiceOf(l.p), devices: dev})
	}
	return e
}

// samePods reports whether a and b hold the same pods on the same devices
// (what withView binds for a node).
func samePods(a, b *nodeEntry) bool {
	return a.skipped == b.skipped && slices.EqualFunc(a.pods, b.pods, func(x, y convPod) bool {
		return x.pod == y.pod && x.service == y.service && slices.Equal(x.devices, y.devices)
	})
}

// takeDevices subtracts milli from each device if all of them have it.
func takeDevices(free []int64, dev []int, milli int64) bool {
	for _, g := range dev {
		if g < 0 || g >= len(free) || free[g] < milli {
			return false
		}
	}
	for _, g := range dev {
		free[g] -= milli
	}
	return true
}

// bestFit mirrors sim.State.BestFitGPUs: for a share, the device with the
// least free share that fits; for whole devices, the lowest free ones.
func bestFit(free []int64, n int32, milli int64) []int {
	var dst []int
	if milli >= sim.MilliGPU {
		for g, f := range free {
			if f == sim.MilliGPU {
				dst = append(dst, g)
				if int32(len(dst)) == n {
					return dst
				}
			}
		}
		return nil
	}
	for range n {
		best := -1
		for g, f := range free {
			if f < milli || slices.Contains(dst, g) {
				continue
			}
			if best < 0 || f < free[best] {
				best = g
			}
		}
		if best < 0 {
			return nil
		}
		dst = append(dst, best)
	}
	return dst
}

// gpuFits is sim.State.Feasible's GPU rule on per-device free shares.
func gpuFits(free []int64, n int32, milli int64) bool {
	var fits int32
	for _, f := range free {
		if f >= milli {
			fits++
		}
	}
	return fits >= n
}

// converter turns snapshots into simulator views. Converted nodes are
// cached by NodeInfo generation (concurrency-safe, for Filter); the
// environment is cached by the nodes' static specs; and one State is kept
// and updated in place between cycles: only nodes whose generation changed
// have their pods unbound and bound again.
type converter struct {
	target *sim.TargetWorkload
	res    *reservations
	nodes  sync.Map // node name -> *nodeEntry
	// nodeNames counts the names in nodes; entriesLocked forgets the
	// names gone from the snapshot once they are as many as its nodes
	// (pruneNodesLocked).
	nodeNames atomic.Int64
	// known is the last snapshot's entries by NodeInfo object, for
	// Filter's lock-free lookups (published by entriesLocked).
	known atomic.Pointer[knownNodes]

	// mu guards everything below and every use of cur's State.
	mu     sync.Mutex
	envSig uint64
	env    *sim.Env
	index  map[string]int
	cur    *view
	epoch  uint64
	// The last snapshot's node list, its entries by position and its
	// positions in name order (entriesLocked): the scheduler's snapshot
	// keeps one NodeInfo object per node and the same list while no node
	// is added or removed, so a cycle usually re-sorts nothing.
	lastInfos   []fwk.NodeInfo
	lastEntries []*nodeEntry
	lastGens    []int64 // lastEntries' generations (no pointer chase per node)
	lastOrder   []int
	lastView    []int32 // view index by position (-1: not modelled)
	sortedBuf   []*nodeEntry
	changedBuf  []int32
	// listVersion moves on whenever the list, its order or the view
	// indices of its positions may have changed (view.byInfo's key).
	listVersion uint64
	// scanEvery is the longest a node of the snapshot goes unchecked
	// (its generation read) while it is neither a cycle's candidate nor
	// marked (mark); <= 0 checks every node every cycle. lastScan is the
	// last check of every node; marked the positions to check next.
	// posByName is the positions by node name (with a scan period).
	scanEvery time.Duration
	lastScan  time.Time
	marked    []int32
	posByName map[string]int32

	// Node telemetry (telemetry.go): the staleness bound (<= 0: the
	// default), the clock (nil: time.Now) and where transitions are logged.
	telMaxAge time.Duration
	clock     func() time.Time
	log       klog.Logger

	// deps is the service dependency graph in use (dependencies.go) and
	// topo the site topology (topology.go); their versions are part of
	// the env's key (envVersion).
	deps       *sources.Dependencies
	topo       *sources.Topology
	envVersion [2]uint64
	envTopo    *sources.TopoSpec // the topology env was compiled with (its clock's too)
}

func newConverter(target *sim.TargetWorkload) *converter {
	return &converter{target: target, res: &reservations{}, log: klog.Background()}
}

// knownNodes is the snapshot entriesLocked last saw: its NodeInfo objects'
// positions (immutable once published) and the entries converted there.
// Filter reads it on parallel goroutines without a lock. A new one is
// published when the list changes; between, entriesLocked stores a node's
// new conversion in its slot when the node's generation moves on (one
// atomic store per changed node, not a copy of every slot per cycle: that
// copy was a sixth of a cycle after a bind at 5,000 nodes). A reader may
// see a slot newer or older than the object it holds; node checks the
// generation and the name, so such a slot is never used.
type knownNodes struct {
	at      *nodeIndex // NodeInfo object -> position in entries
	entries []atomic.Pointer[nodeEntry]
}

// node returns the converted node, from the cache when its generation
// matches. Safe for concurrent use (Filter runs in parallel): first by
// the NodeInfo object among the last snapshot's (an address lookup, as
// the scheduler passes its snapshot's objects), then by name.
func (c *converter) node(ni fwk.NodeInfo) *nodeEntry {
	n := ni.Node()
	if n == nil {
		return &nodeEntry{}
	}
	var prev *nodeEntry
	if fi, ok := ni.(*framework.NodeInfo); ok {
		if k := c.known.Load(); k != nil {
			if p, ok := k.at.get(fi); ok {
				// the object may hold another node, or the same node
				// since changed: only its generation and name tell
				if e := k.entries[p].Load(); e != nil && e.spec.Name == n.Name {
					if e.gen == generation(ni) {
						return e
					}
					prev = e
				}
			}
		}
	}
	if v, ok := c.nodes.Load(n.Name); ok {
		if e := v.(*nodeEntry); e.gen == generation(ni) {
			return e
		} else if prev == nil {
			prev = e
		}
	}
	e := convertNode(ni, c.res, prev)
	if _, loaded := c.nodes.Swap(n.Name, e); !loaded {
		c.nodeNames.Add(1)
	}
	return e
}

// pruneNodesLocked forgets the conversions of nodes that are not in the
// last snapshot (c.lastEntries) once the cache holds more than twice as
// many names as the snapshot (plus slack), so a fleet whose nodes come
// and go under new names does not keep every Node object it ever saw
// (amortised: one pass over the cache per as many new names as there are
// nodes). Call with c.mu held, after the list changed.
func (c *converter) pruneNodesLocked() {
	if c.nodeNames.Load() <= int64(2*len(c.lastEntries)+64) {
		return
	}
	keep := make(map[string]bool, len(c.lastEntries))
	for _, e := range c.lastEntries {
		keep[e.spec.Name] = true
	}
	c.nodes.Range(func(k, _ any) bool {
		if !keep[k.(string)] {
			if _, ok := c.nodes.LoadAndDelete(k); ok {
				c.nodeNames.Add(-1)
			}
		}
		return true
	})
}

// view is the simulator's picture of the cluster. The State and the
// Extractor are single-goroutine: a view is only used under the
// converter's lock (withView), or owned outright (fresh).
type view struct {
	env   *sim.Env
	st    *sim.State
	ext   *policy.Extractor
	index map[string]int
	epoch uint64
	// incremental bookkeeping: per node, its entry and its pods' IDs
	entries []*nodeEntry
	podIDs  [][]int32
	dirty   bool // a mutation did not finish (panic): rebuild
	// telemetry (telemetry.go): per node, the measured CPU use applied to
	// its CPUUsed (NaN: none, the usage model's sum stands) and the
	// telemetry state of the last cycle (for logging transitions).
	measured []float64
	telState []telState
	// telEntry is the conversion whose telemetry was last applied to each
	// node, telAt (Unix ns) when, and telRecheck when it expires.
	telEntry          []*nodeEntry
	telAt, telRecheck []int64
	// telCount counts the nodes by telemetry state; telNext is the
	// earliest telRecheck, telLast the last cycle's clock (Unix ns).
	telCount         [len(telReasons)]int
	telNext, telLast int64
	// byInfo maps the snapshot's NodeInfo objects to view indices (built
	// for list version byInfoVersion; replaced, never changed, so cycles
	// that still hold it may read it while another one runs).
	byInfo        *nodeIndex
	byInfoVersion uint64
	// scores cached per pod key and node (scorecache.go), and scratch
	cache      scoreCache
	stale      []int
	stamps     []uint32
	xbuf, obuf []float32
	ctxs       []policy.NodeContext // per candidate (scoreCandidates)
	dec        []float64            // decision scores (PreScore's scratch)
	norm       []uint8              // normalised scores (PreScore's scratch)
	pos        []int32              // candidates' positions in PreScore's list (PreScore's scratch)
}

// withView brings the kept State up to date with the snapshot all (nodes
// sorted by name: the simulator's node order, so "first on ties" agrees)
// and runs fn on it under the converter's lock. cands are the cycle's
// candidates: with a scan period (converter.scanEvery), only they and the
// nodes marked since the last cycle are checked, and every node at least
// once a period (entriesLocked); nil checks every node.
func (c *converter) withView(all, cands []fwk.NodeInfo, fn func(*view) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	entries, d := c.entriesLocked(all, cands)
	if len(entries) == 0 {
		c.forget()
		return fmt.Errorf("no schedulable nodes to model")
	}
	env, index, changed, err := c.envFor(entries, d)
	if err != nil {
		c.forget()
		return err
	}
	v := c.cur
	if changed || v == nil || v.dirty || len(v.st.Pods) > 4*len(v.st.Running())+4096 {
		v = newView(env, index, len(entries))
		v.inheritTelemetry(c.cur)
		d.full = true
	}
	c.epoch++
	c.cur, v.epoch = v, c.epoch
	v.dirty = true
	skipped := 0
	update := func(i int, e *nodeEntry) {
		if old := v.entries[i]; old == e {
			return
		} else if old != nil && samePods(old, e) {
			// A new conversion with the same pods (an annotation moved,
			// e.g. the agent's telemetry): the node's state, its version
			// and its cached scores stay; applyTelemetry below applies
			// the new measurements.
			v.entries[i] = e
			return
		}
		for _, id := range v.podIDs[i] {
			_ = v.st.Unbind(id)
		}
		v.podIDs[i] = v.podIDs[i][:0]
		skipped += e.skipped
		for _, cp := range e.pods {
			pod := cp.pod
			pod.Service = serviceIndex(v.env, cp.service)
			id, err := v.st.AddPod(pod)
			if err == nil {
				err = v.st.Bind(id, i, cp.devices)
			}
			if err != nil {
				skipped++
				continue
			}
			v.podIDs[i] = append(v.podIDs[i], id)
		}
		v.entries[i] = e
	}
	if d.full {
		for i, e := range entries {
			update(i, e)
		}
	} else {
		for _, i := range d.changed {
			update(int(i), entries[i])
		}
	}
	if v.byInfo == nil || v.byInfoVersion != c.listVersion {
		t := newNodeIndex(len(c.lastInfos))
		for p, ni := range c.lastInfos {
			if fi, ok := ni.(*framework.NodeInfo); ok && c.lastView[p] >= 0 {
				t.put(fi, c.lastView[p])
			}
		}
		v.byInfo, v.byInfoVersion = t, c.listVersion
	}
	c.applyTelemetry(v, entries, d)
	v.st.Now = c.simNow(c.envTopo)
	v.dirty = false
	if skipped > 0 {
		metricSkippedPods.Add(float64(skipped))
	}
	return fn(v)
}

// withCurrent runs fn on the kept view if it is still the one of epoch.
func (c *converter) withCurrent(epoch uint64, fn func(*view) error) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil || c.cur.epoch != epoch || c.cur.dirty {
		return false, nil
	}
	return true, fn(c.cur)
}

func newView(env *sim.Env, index map[string]int, n int) *view {
	ext := policy.NewExtractor(env)
	// Until a model scores on the view (scoreCandidates sets what it
	// reads), Context includes the telemetry and architecture steps.
	ext.UseTelemetry(true)
	ext.UseArch(true)
	return &view{env: env, st: sim.NewState(env), ext: ext, index: index,
		entries: make([]*nodeEntry, n), podIDs: make([][]int32, n), measured: nanSlice(n), telState: make([]telState, n),
		telEntry: make([]*nodeEntry, n), telAt: make([]int64, n), telRecheck: make([]int64, n)}
}

// entries converts the snapshot's modellable nodes, sorted by name.
func (c *converter) entries(all []fwk.NodeInfo) []*nodeEntry {
	entries := make([]*nodeEntry, 0, len(all))
	for _, ni := range all {
		if e := c.node(ni); e.ok {
			entries = append(entries, e)
		}
	}
	slices.SortFunc(entries, func(a, b *nodeEntry) int { return cmp.Compare(a.spec.Name, b.spec.Name) })
	return entries
}

// snapshotDelta is what changed in the snapshot since entriesLocked's last
// call, so a cycle's work on an unchanged cluster is O(changed nodes), not
// O(nodes): the generation compare is the only pass over every node.
type snapshotDelta struct {
	// full: the node list, its name order or the set of modelled nodes
	// changed, so any view index may hold another entry (changed is nil).
	full bool
	// changed are the view indices whose entry is a new conversion.
	changed []int32
	// specs: a changed entry's static spec differs (envFor rebuilds).
	specs bool
}

// sameInfo is a == b without runtime.ifaceeq's call for the snapshot's
// own type (a pointer comparison inline; once per node per cycle).
func sameInfo(a, b fwk.NodeInfo) bool {
	fa, ok1 := a.(*framework.NodeInfo)
	fb, ok2 := b.(*framework.NodeInfo)
	if ok1 && ok2 {
		return fa == fb
	}
	return a == b
}

// generation is ni.GetGeneration without an interface call for the
// snapshot's own type (inline, a field read; once per node per cycle).
func generation(ni fwk.NodeInfo) int64 {
	if fi, ok := ni.(*framework.NodeInfo); ok && fi != nil {
		return fi.Generation
	}
	return ni.GetGeneration()
}

// entriesLocked is entries for withView, reusing the last snapshot's
// conversions and name order where the list holds the same NodeInfo
// objects, and the delta from the last call. The result is valid until
// the next call. Call with c.mu held.
func (c *converter) entriesLocked(all, cands []fwk.NodeInfo) ([]*nodeEntry, snapshotDelta) {
	d := snapshotDelta{changed: c.changedBuf[:0]}
	// The same NodeInfo objects in the same places (else convert the
	// list anew: a pass over the list itself, no node's object read),
	// then a new conversion where a checked node's generation moved on.
	sameList := len(all) == len(c.lastInfos) && len(c.lastGens) == len(all) && len(c.lastView) == len(all)
	resort := false
	known := c.known.Load()
	if sameList {
		infos := c.lastInfos[:len(all)]
		for i, ni := range all {
			if !sameInfo(ni, infos[i]) {
				sameList = false
				break
			}
		}
	}
	if sameList {
		gens := c.lastGens[:len(all)]
		check := func(i int) {
			ni := all[i]
			if gens[i] == generation(ni) {
				return
			}
			old, e := c.lastEntries[i], c.node(ni)
			c.lastEntries[i], gens[i] = e, e.gen
			if known != nil && i < len(known.entries) {
				known.entries[i].Store(e)
			}
			// the same object now holding another node, or a node
			// that is modelled no more or again: sort and index again
			if e.spec.Name != old.spec.Name || e.ok != old.ok {
				resort = true
				return
			}
			if j := c.lastView[i]; j >= 0 {
				c.sortedBuf[j] = e
				d.changed = append(d.changed, j)
				d.specs = d.specs || e.sig != old.sig
			}
		}
		now := c.now()
		if cands == nil || known == nil || c.scanEvery <= 0 || 4*len(cands) >= len(all) ||
			now.Sub(c.lastScan) >= c.scanEvery || now.Before(c.lastScan) {
			// every node: reading each NodeInfo's generation is a
			// cache miss per node at thousands of nodes, the largest
			// part of PreScore before the scan period. With a quarter of
			// the nodes or more as candidates (a small site, where the
			// scheduler scores every node, or percentageOfNodesToScore
			// 100) the pass in list order costs less than finding each
			// candidate's position (BenchmarkCycle's cpu-pod: about 13%).
			for i, ni := range all {
				if gens[i] != generation(ni) { // the common case inline: no call per node
					check(i)
				}
			}
			c.lastScan = now
		} else {
			for _, ni := range cands {
				if fi, ok := ni.(*framework.NodeInfo); ok {
					if p, ok := known.at.get(fi); ok {
						check(int(p))
					}
				}
			}
			for _, p := range c.marked {
				if int(p) < len(all) {
					check(int(p))
				}
			}
		}
		c.marked = c.marked[:0]
	}
	if sameList && !resort {
		c.changedBuf = d.changed
		if known == nil {
			c.publishKnownLocked()
		}
		return c.sortedBuf, d
	}
	if !sameList {
		c.lastInfos = append(c.lastInfos[:0], all...)
		c.lastEntries, c.lastGens = c.lastEntries[:0], c.lastGens[:0]
		for _, ni := range all {
			e := c.node(ni)
			c.lastEntries, c.lastGens = append(c.lastEntries, e), append(c.lastGens, e.gen)
		}
		c.pruneNodesLocked()
	}
	c.listVersion++
	c.lastOrder = c.lastOrder[:0]
	for i := range c.lastEntries {
		c.lastOrder = append(c.lastOrder, i)
	}
	slices.SortFunc(c.lastOrder, func(a, b int) int {
		return cmp.Compare(c.lastEntries[a].spec.Name, c.lastEntries[b].spec.Name)
	})
	out := c.sortedBuf[:0]
	c.lastView = slices.Grow(c.lastView[:0], len(all))[:len(all)]
	for _, i := range c.lastOrder {
		c.lastView[i] = -1
		if e := c.lastEntries[i]; e.ok {
			c.lastView[i] = int32(len(out))
			out = append(out, e)
		}
	}
	c.sortedBuf = out
	c.publishKnownLocked()
	c.marked, c.lastScan = c.marked[:0], c.now()
	if c.scanEvery > 0 {
		clear(c.posByName)
		if c.posByName == nil {
			c.posByName = make(map[string]int32, len(c.lastEntries))
		}
		for p, e := range c.lastEntries {
			c.posByName[e.spec.Name] = int32(p)
		}
	}
	return out, snapshotDelta{full: true, specs: true}
}

// now is the converter's clock (nil: time.Now).
func (c *converter) now() time.Time {
	if c.clock != nil {
		return c.clock()
	}
	return time.Now()
}

// mark has the next cycle check the node nodeName of the last snapshot
// (Reserve and Unreserve: the scheduler assumes or forgets a pod there, and
// the node may not be among the next cycle's candidates).
func (c *converter) mark(nodeName string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.scanEvery <= 0 {
		return // every cycle checks every node
	}
	if len(c.marked) >= len(c.posByName) {
		// cycles that score did not run for as many reservations (e.g. a
		// one-node cluster, where the scheduler skips PreScore): the next
		// one reads every node, and the marks stay bounded
		c.marked, c.lastScan = c.marked[:0], time.Time{}
		return
	}
	if p, ok := c.posByName[nodeName]; ok {
		c.marked = append(c.marked, p)
	}
}

// publishKnownLocked publishes the last snapshot's entries for Filter
// (knownNodes) with a new index of its NodeInfo objects: when the list,
// its order or the set of modelled nodes changed (entriesLocked updates
// the slots of changed nodes in place otherwise). Call with c.mu held.
func (c *converter) publishKnownLocked() {
	at := newNodeIndex(len(c.lastInfos))
	for p, ni := range c.lastInfos {
		if fi, ok := ni.(*framework.NodeInfo); ok {
			at.put(fi, int32(p))
		}
	}
	k := &knownNodes{at: at, entries: make([]atomic.Pointer[nodeEntry], len(c.lastEntries))}
	for i, e := range c.lastEntries {
		k.entries[i].Store(e)
	}
	c.known.Store(k)
}

// forget drops the last snapshot's list, so the next entriesLocked
// converts and sorts again (its delta would be relative to a snapshot no
// view was brought up to). Call with c.mu held.
func (c *converter) forget() {
	c.known.Store(nil)
	c.lastInfos, c.lastEntries, c.lastGens = c.lastInfos[:0], c.lastEntries[:0], c.lastGens[:0]
	c.lastView, c.sortedBuf = c.lastView[:0], c.sortedBuf[:0]
}

// viewIndexer finds the view index of NodeInfo objects of the snapshot
// withView last converted: by pointer (the scheduler's snapshot keeps one
// NodeInfo object per node while the node exists; the feasible nodes come
// in the order parallel filters found them), else by name. Use only inside
// withView's fn.
type viewIndexer struct {
	c *converter
	v *view
}

func (x *viewIndexer) index(ni fwk.NodeInfo) (int, bool) {
	if fi, ok := ni.(*framework.NodeInfo); ok {
		if i, ok := x.v.byInfo.get(fi); ok {
			return int(i), true
		}
	}
	n := ni.Node()
	if n == nil {
		return 0, false
	}
	i, ok := x.v.index[n.Name]
	return i, ok
}

// fresh builds a private view of a few nodes (not kept), e.g. for one
// node's device choice.
func (c *converter) fresh(all []fwk.NodeInfo) (*view, error) {
	entries := c.entries(all)
	if len(entries) == 0 {
		return nil, fmt.Errorf("no schedulable nodes to model")
	}
	tp := c.topo.Current()
	env, index, err := c.compileEnv(entries, c.deps.Current(), tp)
	if err != nil {
		return nil, err
	}
	v := newView(env, index, len(entries))
	v.st.Now = c.simNow(tp)
	for i, e := range entries {
		for _, cp := range e.pods {
			pod := cp.pod
			pod.Service = serviceIndex(env, cp.service)
			if id, err := v.st.AddPod(pod); err == nil {
				_ = v.st.Bind(id, i, cp.devices)
			}
		}
	}
	return v, nil
}

// envFor returns the compiled environment of the nodes' static specs,
// rebuilt (changed) only when one of them changed. Call with c.mu held.
func (c *converter) envFor(entries []*nodeEntry, d snapshotDelta) (*sim.Env, map[string]int, bool, error) {
	g, tp := c.deps.Current(), c.topo.Current()
	var key [2]uint64
	if g != nil {
		key[0] = g.Version
	}
	if tp != nil {
		key[1] = tp.Version
	}
	if c.env != nil && !d.full && !d.specs && c.envVersion == key && len(c.index) == len(entries) {
		return c.env, c.index, false, nil // no static spec changed
	}
	sig := uint64(len(entries))
	for _, e := range entries {
		sig = (sig ^ e.sig) * 0x100000001b3 // FNV-1a's step over the nodes' spec hashes
	}
	if c.env != nil && c.envSig == sig && c.envVersion == key && len(c.index) == len(entries) {
		return c.env, c.index, false, nil
	}
	env, index, err := c.compileEnv(entries, g, tp)
	if err != nil {
		return nil, nil, false, err
	}
	c.env, c.envSig, c.envVersion, c.envTopo, c.index = env, sig, key, tp, index
	return env, index, true, nil
}

// specSig hashes a node's static spec (what envFor compares).
func specSig(s *sim.NodeSpec) uint64 {
	h := fnv.New64a()
	b := make([]byte, 0, 128)
	b = append(b, s.Name...)
	b = append(b, 0)
	b = strconv.AppendInt(b, s.CPU, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, s.Memory, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(s.GPUs), 10)
	b = append(b, s.GPUModel...)
	b = append(b, ',', byte(s.Arch))
	b = append(b, s.Zone...)
	b = append(b, 0)
	b = strconv.AppendUint(b, math.Float64bits(s.FailureRate), 16)
	if s.Power != nil {
		for _, w := range []float64{s.Power.IdleWatts, s.Power.WattsPerCore, s.Power.WattsPerGPU} {
			b = append(b, ',')
			b = strconv.AppendUint(b, math.Float64bits(w), 16)
		}
	}
	h.Write(b)
	return h.Sum64()
}

// compileEnv compiles the environment of the nodes' static specs with the
// target workload, the service dependency graph g and the site topology
// tp (nil: none).
func (c *converter) compileEnv(entries []*nodeEntry, g *sources.DepGraph, tp *sources.TopoSpec) (*sim.Env, map[string]int, error) {
	cl := &sim.Cluster{Name: "kubernetes", GPUModels: sim.KnownGPUModels()}
	known := map[string]bool{}
	for _, m := range cl.GPUModels {
		known[m.Name] = true
	}
	zones := map[string]bool{}
	for _, e := range entries {
		s := e.spec
		if s.Zone == "" {
			s.Zone = "default"
		}
		zones[s.Zone] = true
		if s.GPUModel != "" && !known[s.GPUModel] {
			if len(cl.GPUModels) < 64 { // unknown models are appended: known indices stay fixed
				known[s.GPUModel] = true
				// (with its typical board power, as the policy's view
				// assumes: nodeWatts)
				cl.GPUModels = append(cl.GPUModels, sim.GPUModel{Name: s.GPUModel, Watts: sim.GPUWatts(s.GPUModel)})
			} else {
				s.GPUs, s.GPUModel = 0, ""
			}
		}
		cl.Nodes = append(cl.Nodes, s)
	}
	tp.Apply(cl, slices.Sorted(mapsKeys(zones)))
	w := &sim.Workload{Name: "target"}
	if g != nil {
		w.Services, w.Dependencies = g.Services, g.Edges
	}
	env, err := sim.NewEnv(cl, w, sim.EnvOptions{})
	if err != nil {
		return nil, nil, err
	}
	if g != nil && g.Embeddings != nil {
		env.Partners, env.PartnersEncoder = policy.PartnersOf(g.Embeddings, env.Services), g.Embeddings.Encoder
	}
	if g != nil && g.Previous != nil {
		env.PreviousPartners, env.PreviousEncoder = policy.PartnersOf(g.Previous, env.Services), g.Previous.Encoder
	}
	env.Target = c.target
	index := make(map[string]int, len(entries))
	for i, e := range entries {
		index[e.spec.Name] = i
	}
	return env, index, nil
}

// simNow is the simulator's clock for a cycle: the wall clock's Unix
// seconds when the topology has hourly carbon curves (CarbonAt then reads
// the hour of the day in UTC), else 0 as in every run without one, so the
// score caches (keyed on the hour) do not expire hourly for nothing.
func (c *converter) simNow(tp *sources.TopoSpec) int64 {
	if tp == nil || !tp.Timed {
		return 0
	}
	now := time.Now
	if c.clock != nil {
		now = c.clock
	}
	return now().Unix()
}

func mapsKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// serviceIndex is the index of service name in env (-1: no service, or
// one the graph does not name).
func serviceIndex(env *sim.Env, name string) int32 {
	if name == "" || env == nil {
		return -1
	}
	if i, ok := env.ServiceIndex(name); ok {
		return int32(i)
	}
	return -1
}
