package policy

import (
	"github.com/edgesched/edgesched/sim"
)

// Learned is the learned policy as a simulator policy: the scorer MLP over
// each candidate's normalised features; the engine binds the highest score.
//
// A node's score depends only on the node's state, the pod's features
// (its shape's requests plus its QoS class, priority and service, which a
// shape does not distinguish), the placement of the pod's dependency
// neighbours, the hour (carbon curves) and the steps of the node's GPU
// model pressure and, for a network that reads them, of its architecture
// shares and telemetry (Extractor.Context), so scores are cached per
// (node, shape) and recomputed, in one batch, only for the nodes where one of those
// changed. What is the same for every node (the pod's tag, the service
// graph's version, the hour) keys a shape's whole row: a pod with another
// key starts a new generation of the row, and entries of older ones miss.
// An entry holds only what varies by node (the node's version and
// Context) and its row generation, 24 bytes, so the check of every
// candidate in every decision (most of them hits) reads a third of the
// memory it did with the whole key in each entry.
type Learned struct {
	name       string
	sc         Scorer
	ext        *Extractor
	shapes     int
	nodes      int
	cache      []learnedEntry
	rows       []rowState // per shape: the key its row of cache is computed for
	flatCarbon bool
	dec        Decision
	x          []float32
	out        []float32
	stale      []int
	ctxs       []NodeContext // the candidates' Contexts, one per node of a call
}

// Scorer scores a batch of candidate nodes for one pod from their raw
// (unnormalised) feature rows: k rows of NumFeatures in raw, one score per
// row into out. Every row of a call belongs to the same pod, so the pod
// features (the first NumPodFeatures) are the same on every row; scorers
// may compute their share once per call. A Scorer belongs to one run.
type Scorer interface {
	Scores(raw []float32, k int, out []float32) error
}

// InputReader is implemented by scorers that can tell which features
// they read (nn.Net.ReadsInput); a Learned policy skips what the
// others do not read (the telemetry steps in its cache keys).
type InputReader interface {
	ReadsInput(i int) bool
}

// readsAny reports whether sc reads one of the features (true when it
// cannot tell).
func readsAny(sc Scorer, features ...int) bool {
	r, ok := sc.(InputReader)
	if !ok {
		return true
	}
	for _, i := range features {
		if r.ReadsInput(i) {
			return true
		}
	}
	return false
}

// TelemetryFeatures and ArchShareFeatures are the indices whose steps
// Context includes only for a scorer that reads one of them
// (Extractor.UseTelemetry, UseArch).
var (
	TelemetryFeatures = []int{FirstTelemetryFeature, FirstTelemetryFeature + 1, FirstTelemetryFeature + 2, FirstTelemetryFeature + 3}
	ArchShareFeatures = []int{ArchPinnedShareFeature, ArchFreeShareFeature}
)

// NumPodFeatures is the number of leading features that describe the pod
// alone (equal on every candidate row of a decision).
const NumPodFeatures = 13

// learnedEntry is one cached score: valid while the node's version and
// Context are those recorded (under its row's key).
type learnedEntry struct {
	version  uint64 // node version + 1; 0 means empty
	tel      uint64 // Context.tel
	score    float32
	pressure uint16 // Context.pressure
	gen      uint16 // the row's generation it was computed in
}

// hit reports whether e is current for a node at version v with Context c
// in row generation gen.
func (e *learnedEntry) hit(v uint64, c NodeContext, gen uint16) bool {
	return e.version == v+1 && e.gen == gen && e.pressure == c.pressure && e.tel == c.tel
}

// rowState is a shape's row of the cache: the key of its generation gen.
type rowState struct {
	key rowKey
	gen uint16
}

// rowKey is what a score depends on besides the node and the shape.
type rowKey struct {
	svc  uint64
	hour int64
	tag  podTag
}

// podTag is what the features read of a pod beyond its shape.
type podTag struct {
	qos      sim.QoS
	priority int32
	service  int32
}

// AffinityReader is a scorer whose model carries GraphSAGE weights of its
// own: its dep_affinity reads partners of their ID only ("": the
// shipped ones, AffinityEncoder). Scorers that do not implement it read
// AffinityEncoder's.
type AffinityReader interface {
	AffinityEncoder() string
}

// NewLearnedScorer returns a learned policy for one run on env that scores
// with sc (the float network, or the int8 one of package quant) and
// decides by d (the model's decision rule).
func NewLearnedScorer(name string, sc Scorer, d Decision, env *sim.Env) *Learned {
	flat := true
	for _, cz := range env.CarbonZones {
		for _, v := range cz.Curve {
			flat = flat && v == cz.Curve[0]
		}
	}
	ext := NewExtractor(env)
	ext.UseTelemetry(readsAny(sc, TelemetryFeatures...))
	ext.UseArch(readsAny(sc, ArchShareFeatures...))
	ext.UseEmission(readsAny(sc, EmissionFeature))
	if r, ok := sc.(AffinityReader); ok {
		ext.UsePartnersOf(r.AffinityEncoder())
	}
	return &Learned{
		name:       name,
		sc:         sc,
		ext:        ext,
		shapes:     env.Shapes,
		nodes:      len(env.Nodes),
		cache:      make([]learnedEntry, len(env.Nodes)*max(1, env.Shapes)),
		rows:       make([]rowState, max(1, env.Shapes)),
		flatCarbon: flat,
		dec:        d,
	}
}

// Name implements sim.Policy.
func (l *Learned) Name() string { return l.name }

// Score implements sim.Policy: NetworkScores, then Decide.
func (l *Learned) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	l.NetworkScores(st, p, nodes, scores)
	l.Decide(st, p, nodes, scores)
}

// Decide rewrites the network's scores of nodes by the model's decision
// rule (Extractor.Decide).
func (l *Learned) Decide(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	l.ext.Decide(l.dec, st, p, nodes, scores)
}

// NetworkScores writes the network's score of every candidate (no
// decision rule).
func (l *Learned) NetworkScores(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	l.ext.BeginPod(st, p)
	var hour int64
	if !l.flatCarbon {
		hour = st.Now / 3600
	}
	var svc uint64
	if p.Service >= 0 {
		svc = st.ServiceVersion
	}
	l.stale = l.stale[:0]
	cacheable := int(p.Shape) < l.shapes
	var row []learnedEntry
	var gen uint16
	if cacheable {
		row = l.cache[int(p.Shape)*l.nodes : (int(p.Shape)+1)*l.nodes]
		key := rowKey{svc: svc, hour: hour, tag: podTag{qos: p.QoS, priority: p.Priority, service: p.Service}}
		r := &l.rows[p.Shape]
		if r.key != key {
			// every entry of the row was computed under the old key
			r.key = key
			if r.gen++; r.gen == 0 {
				// the generation wrapped: entries of the last generation 0
				// must not count
				clear(row)
			}
		}
		gen = r.gen
		if cap(l.ctxs) < len(nodes) {
			l.ctxs = make([]NodeContext, len(nodes))
		}
		l.ctxs = l.ctxs[:len(nodes)]
		l.ext.Contexts(st, nodes, l.ctxs)
		for i, n := range nodes {
			if e := &row[n]; e.hit(st.Versions[n], l.ctxs[i], gen) {
				scores[i] = float64(e.score)
				continue
			}
			l.stale = append(l.stale, i)
		}
	} else {
		for i := range nodes {
			l.stale = append(l.stale, i)
		}
	}
	if len(l.stale) == 0 {
		return
	}
	k := len(l.stale)
	x := grow(&l.x, k*NumFeatures)
	for j, i := range l.stale {
		l.ext.Extract(st, p, int(nodes[i]), x[j*NumFeatures:(j+1)*NumFeatures])
	}
	out := grow(&l.out, k)
	if err := l.sc.Scores(x, k, out); err != nil { // shapes are ours; cannot happen
		for _, i := range l.stale {
			scores[i] = 0
		}
		return
	}
	for j, i := range l.stale {
		scores[i] = float64(out[j])
		if cacheable {
			n, c := nodes[i], l.ctxs[i]
			row[n] = learnedEntry{version: st.Nodes[n].Version + 1, tel: c.tel, pressure: c.pressure, gen: gen, score: out[j]}
		}
	}
}

// PickGPUs implements sim.GPUPicker with the device choice the features
// describe.
func (l *Learned) PickGPUs(st *sim.State, p *sim.Pod, n int, dst []int) []int {
	return l.ext.PickGPUs(st, p, n, dst)
}

// grow returns (*buf)[:n], reallocating when it is too short.
func grow(buf *[]float32, n int) []float32 {
	if cap(*buf) < n {
		*buf = make([]float32, n)
	}
	*buf = (*buf)[:n]
	return *buf
}
