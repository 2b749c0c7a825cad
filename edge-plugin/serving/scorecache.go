package serving

import (
	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/edgesched/edgesched/edge-plugin/sources"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/sim"
)

// The score cache makes a cycle's cost proportional to what changed since
// the last one, not to the cluster's size. A node's raw policy score
// depends only on the pod's features, the node's own state in the view
// (its version, which changes with every bind and unbind there, and its
// CPUUsed, which telemetry may move without a bind), the placement of the
// pod's dependency neighbours (the State's ServiceVersion, for pods with a
// service), the hour (carbon curves) and the pressure step of the node's
// GPU model and, for a model that reads them, the node's telemetry steps
// (policy.Extractor.Context), and on the model.
//
// The node's part of that is the same for every pod, so the view keeps it
// once per node (nodeState) and numbers its changes: a node's stamp moves
// on whenever its version, CPUUsed or Context does. Per pod key (every pod
// field the features read) the cache keeps, per node, the last raw score
// and the node's stamp it was computed at (8 bytes), plus the hour and
// service version of the key's last cycle. A cycle recomputes, in one
// batch, only the nodes whose stamp moved; between two bindings only the
// bound node changes, so a steady stream of similar pods costs one feature
// extraction and one forward pass per cycle.
//
// Pod keys are kept in a least-recently-used list bounded by memory
// (scoreCacheBytes): at 5,000 nodes a key costs 40 kB, so 1,638 keys fit in
// 64 MiB; a stream of more distinct shapes than that evicts the least
// recently used key, never the whole cache. (The first version kept 32 keys
// of 56 B per node and started over on the 33rd: with 1,000 shapes in the
// stream it hit 1.9% of the time; docs/scale.md.)
//
// A view's cache lives and dies with the view (a new node set, a rebuilt
// State or a new environment starts empty) and is emptied when the model
// changes (a hot swap). It is used only under the converter's lock, like
// the view's State.

// scoreCacheBytes bounds the memory of a view's score cache (its per-node
// score slots; the per-key overhead is a few hundred bytes).
const scoreCacheBytes = 64 << 20

// maxCachedPodKeys bounds the number of keys on small clusters, where
// scoreCacheBytes would allow millions.
const maxCachedPodKeys = 8192

// cachedPodKeys is the number of pod keys a view of n nodes keeps.
func cachedPodKeys(n int) int {
	return max(1, min(maxCachedPodKeys, scoreCacheBytes/(8*max(n, 1))))
}

// podKey is every pod field the features read (policy.Extractor: requests,
// GPU demand, QoS, priority, service; mask and architecture for safety).
type podKey struct {
	cpu, mem, milli int64
	gpus            int32
	mask            uint64
	arch            sim.Arch
	qos             sim.QoS
	priority        int32
	service         int32
}

func podKeyOf(p *sim.Pod) podKey {
	return podKey{cpu: p.CPU, mem: p.Mem, milli: p.GPUMilli, gpus: p.GPUs, mask: p.GPUMask, arch: p.Arch,
		qos: p.QoS, priority: p.Priority, service: p.Service}
}

// nodeState is what a node's score depends on beyond the pod and the
// cycle's hour and service version, and the stamp numbering its changes
// (0: never seen; stamps start at 1).
type nodeState struct {
	version uint64
	cpuUsed float64
	ctx     policy.NodeContext
	stamp   uint32
}

// scoreSlot is one node's cached raw score for one pod key, valid while
// the node's stamp is still stamp (0: empty).
type scoreSlot struct {
	stamp uint32
	score float32
}

// keyScores is one pod key's cached scores.
type keyScores struct {
	hour  int64
	svc   uint64
	slots []scoreSlot
}

type scoreCache struct {
	model *sources.Model
	keys  *simplelru.LRU[podKey, *keyScores]
	nodes []nodeState
	free  []*keyScores // evicted keys, reused
}

// entries returns the per-node slots of pod key k for model m (n nodes) in
// a cycle of hour hour and service version svc, emptying the cache on a
// model change. The caller must set the model's telemetry use on the
// extractor when changed reports a model change.
func (c *scoreCache) entries(m *sources.Model, k podKey, n int, hour int64, svc uint64) (ks *keyScores, changed bool) {
	if c.model != m || c.keys == nil || len(c.nodes) != n {
		changed = c.model != m
		c.model = m
		c.nodes = make([]nodeState, n)
		c.free = c.free[:0]
		c.keys, _ = simplelru.NewLRU[podKey, *keyScores](cachedPodKeys(n), func(_ podKey, v *keyScores) {
			c.free = append(c.free, v)
		})
	}
	ks, ok := c.keys.Get(k)
	if !ok {
		if l := len(c.free); l > 0 {
			ks, c.free = c.free[l-1], c.free[:l-1]
			clear(ks.slots)
		} else {
			ks = &keyScores{slots: make([]scoreSlot, n)}
		}
		ks.hour, ks.svc = hour, svc
		c.keys.Add(k, ks)
	}
	if ks.hour != hour || ks.svc != svc {
		clear(ks.slots)
		ks.hour, ks.svc = hour, svc
	}
	return ks, changed
}

// restamp moves node i's stamp on and returns it: scoreCandidates calls
// it when the node's version, CPUUsed or context changed since its stamp
// was last taken (that check is written inline in its loop over nodes: a
// call per node was a tenth of the cycle).
func (c *scoreCache) restamp(i int32, nd *sim.Node, ctx policy.NodeContext) uint32 {
	s := &c.nodes[i]
	s.version, s.cpuUsed, s.ctx = nd.Version, nd.CPUUsed, ctx
	s.stamp++
	if s.stamp == 0 { // wrapped: no slot may still claim stamp 1
		c.keys.Purge()
		clear(c.nodes)
		s = &c.nodes[i]
		s.version, s.cpuUsed, s.ctx, s.stamp = nd.Version, nd.CPUUsed, ctx, 1
	}
	return s.stamp
}

// scoreCandidates writes the raw score of pod p on every candidate (view
// nodes cand) into raw: from the cache where the node's stamp has not
// moved, from one batch of feature extraction and model inference for the
// others. Call with the converter's lock held.
func (v *view) scoreCandidates(m *sources.Model, p *sim.Pod, cand []int32, raw []float32) error {
	const F = policy.NumFeatures
	hour := v.st.Now / 3600
	var svc uint64
	if p.Service >= 0 {
		svc = v.st.ServiceVersion
	}
	ks, changed := v.cache.entries(m, podKeyOf(p), len(v.st.Nodes), hour, svc)
	if changed {
		// Context includes the telemetry and architecture steps only for
		// a model that reads them (as policy.Learned does): others keep
		// their cached scores when a node's measurements or the
		// cluster's architecture shares move a step.
		v.ext.UseTelemetry(m.ReadsTelemetry())
		v.ext.UseArch(m.ReadsArch())
		v.ext.UseEmission(m.ReadsEmission())
		// dep_affinity reads partners of the model's GraphSAGE weights only
		v.ext.UsePartnersOf(m.AffinityEncoder())
	}
	slots := ks.slots
	stale, stamps := v.stale[:0], v.stamps[:0]
	v.ext.BeginPod(v.st, p)
	if cap(v.ctxs) < len(cand) {
		v.ctxs = make([]policy.NodeContext, len(cand))
	}
	ctxs := v.ctxs[:len(cand)]
	v.ext.Contexts(v.st, cand, ctxs)
	nodes, states := v.st.Nodes, v.cache.nodes
	for j, i := range cand {
		// the node's stamp (restamp's check, inline)
		nd, ns := &nodes[i], &states[i]
		s := ns.stamp
		if s == 0 || ns.version != nd.Version || ns.cpuUsed != nd.CPUUsed || !ns.ctx.Same(ctxs[j]) {
			s = v.cache.restamp(i, nd, ctxs[j])
		}
		if e := slots[i]; e.stamp == s {
			raw[j] = e.score
			continue
		}
		stale, stamps = append(stale, j), append(stamps, s)
	}
	v.stale, v.stamps = stale, stamps
	metricScoreCache.WithLabelValues("hit").Add(float64(len(cand) - len(stale)))
	if len(stale) == 0 {
		return nil
	}
	metricScoreCache.WithLabelValues("miss").Add(float64(len(stale)))
	k := len(stale)
	x := growF32(&v.xbuf, k*F)
	for s, j := range stale {
		v.ext.Extract(v.st, p, int(cand[j]), x[s*F:(s+1)*F])
	}
	out := growF32(&v.obuf, k)
	sc := m.GetScorer()
	if err := sc.Scores(x, k, out); err != nil {
		return err // a scorer that failed is not returned to the pool
	}
	m.PutScorer(sc)
	for s, j := range stale {
		raw[j] = out[s]
		slots[cand[j]] = scoreSlot{stamp: stamps[s], score: out[s]}
	}
	return nil
}

// growF32 returns (*b)[:n], reallocating when it is too short.
func growF32(b *[]float32, n int) []float32 {
	if cap(*b) < n {
		*b = make([]float32, n)
	}
	return (*b)[:n]
}
