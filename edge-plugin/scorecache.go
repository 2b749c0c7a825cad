package edgeplugin

import (
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
// GPU model (policy.Extractor.Context), and on the model. So each view
// keeps, per pod key (every pod field the features read) and node, the
// last score and what it was computed from; a cycle recomputes, in one
// batch, only the nodes whose entry does not match. Between two bindings
// only the bound node changes, so a steady stream of similar pods costs
// one feature extraction and one forward pass per cycle.
//
// A view's cache lives and dies with the view (a new node set, a rebuilt
// State or a new environment starts empty) and is emptied when the model
// changes (a hot swap). It is used only under the converter's lock, like
// the view's State.

// maxCachedPodKeys bounds the pod keys a view keeps scores for: at 5,000
// nodes one key costs 5,000 × 40 B = 200 kB, so the cache stays under
// 7 MB; when a 33rd key arrives the cache starts over.
const maxCachedPodKeys = 32

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

// scoreEntry is one node's cached raw score for one pod key and what it was
// computed from. version is the node's version + 1 (0: empty).
type scoreEntry struct {
	version uint64
	svc     uint64
	hour    int64
	cpuUsed float64
	ctx     policy.NodeContext // policy.Extractor.Context
	score   float32
}

type scoreCache struct {
	model *Model
	keys  map[podKey][]scoreEntry
	// counters for the metric (read by the caller after a cycle)
	hits, misses int
}

// entries returns the per-node entries of pod key k for model m (n nodes),
// emptying the cache on a model change and when it is full.
func (c *scoreCache) entries(m *Model, k podKey, n int) []scoreEntry {
	if c.model != m || c.keys == nil {
		c.model, c.keys = m, make(map[podKey][]scoreEntry)
	}
	e, ok := c.keys[k]
	if !ok {
		if len(c.keys) >= maxCachedPodKeys {
			clear(c.keys)
		}
		e = make([]scoreEntry, n)
		c.keys[k] = e
	}
	return e
}

// scoreCandidates writes the raw score of pod p on every candidate (view
// nodes cand) into raw: from the cache where the entry still matches the
// node, from one batch of feature extraction and model inference for the
// others. Call with the converter's lock held.
func (v *view) scoreCandidates(m *Model, p *sim.Pod, cand []int32, raw []float32) error {
	const F = policy.NumFeatures
	ents := v.cache.entries(m, podKeyOf(p), len(v.st.Nodes))
	hour := v.st.Now / 3600
	var svc uint64
	if p.Service >= 0 {
		svc = v.st.ServiceVersion
	}
	stale := v.stale[:0]
	v.ext.BeginPod(v.st, p)
	for j, i := range cand {
		nd, e := &v.st.Nodes[i], &ents[i]
		if e.version == nd.Version+1 && e.svc == svc && e.hour == hour && e.cpuUsed == nd.CPUUsed && e.ctx == v.ext.Context(v.st, int(i)) {
			raw[j] = e.score
			continue
		}
		stale = append(stale, j)
	}
	v.stale = stale
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
	sc := m.getScorer()
	if err := sc.Scores(x, k, out); err != nil {
		return err // a scorer that failed is not returned to the pool
	}
	m.putScorer(sc)
	for s, j := range stale {
		i := cand[j]
		nd := &v.st.Nodes[i]
		raw[j] = out[s]
		ents[i] = scoreEntry{version: nd.Version + 1, svc: svc, hour: hour, cpuUsed: nd.CPUUsed, ctx: v.ext.Context(v.st, int(i)), score: out[s]}
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
