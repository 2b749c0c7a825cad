package sources

import (
	"cmp"
	"context"
	"slices"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
)

// Service dependencies (docs/edge-plugin.md, "Service dependencies"):
// with dependenciesConfigMap set, the plugin watches that ConfigMap (one
// namespace-scoped informer, as the model's) for the site's service call
// graph (kubefmt.DependencyGraph under kubefmt.DependenciesConfigMapKey,
// written by the site leader from the agents' flow measurements). The
// graph's services and edges go into the simulator environment the
// snapshot is converted into, and every pod's service (kubefmt.ServiceOf)
// into its sim.Pod, so the policy's dependency features (co-location with
// and RTT to the pod's dependency neighbours) see where each service's
// replicas run. The same ConfigMap's service embeddings
// (kubefmt.EmbeddingsConfigMapKey, optional) give each service's
// partners, which the dep_affinity feature reads when their encoder is
// the model's (the GraphSAGE weights its artifact carries, else
// policy.AffinityEncoder; otherwise dep_affinity is 0:
// policy.Extractor.UsePartnersOf) and they were written with the graph
// (otherwise they are ignored here and the log line says why). When the
// encoder changes (the leader embeds with a newly installed model's
// weights) the embeddings in use before are kept beside the new ones
// (DepGraph.Previous), so the model the scheduler still runs keeps its
// partners until its successor is loaded. A graph or embeddings
// that do not decode are refused together (counted, logged) and the
// last good pair stays; a deleted ConfigMap clears the graph.

var (
	metricDependencyEdges = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      MetricsSubsystem,
		Name:           "dependency_graph_edges",
		Help:           "Service dependency edges in the graph in use (0 without one).",
		StabilityLevel: metrics.ALPHA,
	})
	metricDependencyPartners = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      MetricsSubsystem,
		Name:           "dependency_partners",
		Help:           "Service partners (from the embeddings beside the dependency graph) in use: 0 without embeddings or with embeddings of another graph; a model reads them only when they come from its GraphSAGE weights (their encoder ID).",
		StabilityLevel: metrics.ALPHA,
	})
	metricDependencyUpdates = newFeedUpdates("dependency_graph_updates_total", "Dependency graph")
)

// DepGraph is a dependency graph in the simulator's terms; immutable.
type DepGraph struct {
	Version  uint64 // bumped on every change (package serving's converter's env key)
	Services []string
	Edges    []sim.Dependency
	// Embeddings are the services' embeddings and partners when they
	// were written with this graph (nil otherwise; a model reads the
	// partners only when Encoder is its own: policy.AffinityReader);
	// Encoder is the published encoder ("" without embeddings); Ignored
	// says why published embeddings are not used.
	Embeddings *kubefmt.Embeddings
	Encoder    string
	Ignored    string
	// Previous are the embeddings in use before the last switch of
	// encoder (nil: none): the site leader embeds with the weights of
	// the model its agent installed, possibly before the scheduler has
	// loaded that model, so the model still running reads its own
	// partners from here until its successor arrives. One generation is
	// kept; it goes when the encoder changes again or the embeddings go
	// (or are ignored). It is not checked against the graph: across a
	// change of edges it keeps the partners of the graph it came with.
	Previous *kubefmt.Embeddings
}

// Dependencies holds the graph in use. Safe for concurrent use.
type Dependencies struct {
	cur      atomic.Pointer[DepGraph] // nil: no graph
	versions atomic.Uint64
}

// Current is the graph in use (nil: none).
func (d *Dependencies) Current() *DepGraph {
	if d == nil {
		return nil
	}
	return d.cur.Load()
}

// Set installs g without embeddings (nil clears); it reports whether
// the edges changed.
func (d *Dependencies) Set(g *kubefmt.DependencyGraph) bool { return d.SetWith(g, nil) }

// SetWith installs g (nil clears) and its embeddings (nil: none); it
// reports whether the edges or the partners in use changed.
func (d *Dependencies) SetWith(g *kubefmt.DependencyGraph, emb *kubefmt.Embeddings) bool {
	old := d.cur.Load()
	if g == nil {
		if old == nil {
			return false
		}
		d.cur.Store(nil)
		d.versions.Add(1)
		return true
	}
	var Edges []sim.Dependency
	seen := map[string]bool{}
	for _, e := range g.Edges {
		Edges = append(Edges, sim.Dependency{From: e.From, To: e.To, CallsPerSecond: e.CallsPerSecond})
		seen[e.From], seen[e.To] = true, true
	}
	slices.SortFunc(Edges, func(a, b sim.Dependency) int { return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To)) })
	var encoder, ignored string
	if emb != nil {
		encoder = emb.Encoder
		if !emb.Updated.Equal(g.Updated) {
			// an agent of an older release rewrote the graph and kept
			// the key (the leader's own stale check, agent/site)
			ignored = "written with another graph (updated " + emb.Updated.Format(time.RFC3339) + ")"
		}
		if ignored != "" {
			emb = nil
		}
	}
	var prev *kubefmt.Embeddings
	if old != nil && emb != nil {
		switch {
		case old.Embeddings == nil:
		case old.Embeddings.Encoder != emb.Encoder:
			prev = old.Embeddings
		default:
			prev = old.Previous
		}
	}
	// only the edges and the embeddings matter: a graph rewritten with a
	// new "updated" time keeps the env (and the score caches) as they are
	if old != nil && slices.Equal(old.Edges, Edges) && old.Encoder == encoder && old.Ignored == ignored && sameEmbeddings(old.Embeddings, emb) && sameEmbeddings(old.Previous, prev) {
		return false
	}
	ng := &DepGraph{Version: d.versions.Add(1), Edges: Edges, Embeddings: emb, Encoder: encoder, Ignored: ignored, Previous: prev}
	for s := range seen {
		ng.Services = append(ng.Services, s)
	}
	slices.Sort(ng.Services)
	d.cur.Store(ng)
	return true
}

// sameEmbeddings reports whether a and b (either nil) hold the same
// services, values and partners, whatever their updated times.
func sameEmbeddings(a, b *kubefmt.Embeddings) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Encoder == b.Encoder && a.Dim == b.Dim && slices.EqualFunc(a.Services, b.Services, func(x, y kubefmt.ServiceEmbedding) bool {
		return x.Name == y.Name && x.Scale == y.Scale && x.Values == y.Values && slices.Equal(x.Partners, y.Partners)
	})
}

var (
	_ FeedTarget = (*Dependencies)(nil)
	_ SideTarget = (*Dependencies)(nil)
)

// Install implements FeedTarget: the graph under
// kubefmt.DependenciesConfigMapKey, without embeddings.
func (d *Dependencies) Install(raw []byte) (bool, error) { return d.InstallWith(raw, nil) }

// InstallWith implements SideTarget: the graph and, when side is not
// nil, the embeddings under kubefmt.EmbeddingsConfigMapKey.
func (d *Dependencies) InstallWith(raw, side []byte) (bool, error) {
	g, err := kubefmt.DecodeDependencyGraph(raw)
	if err != nil {
		return false, err
	}
	var emb *kubefmt.Embeddings
	if side != nil {
		if emb, err = kubefmt.DecodeEmbeddings(side); err != nil {
			return false, err
		}
	}
	if !d.SetWith(g, emb) {
		return false, nil
	}
	metricDependencyEdges.Set(float64(len(g.Edges)))
	metricDependencyPartners.Set(float64(d.partners()))
	return true, nil
}

// partners counts the partners in use.
func (d *Dependencies) partners() int {
	n := 0
	if g := d.Current(); g != nil && g.Embeddings != nil {
		for i := range g.Embeddings.Services {
			n += len(g.Embeddings.Services[i].Partners)
		}
	}
	return n
}

// Clear implements FeedTarget.
func (d *Dependencies) Clear() bool {
	if !d.Set(nil) {
		return false
	}
	metricDependencyEdges.Set(0)
	metricDependencyPartners.Set(0)
	return true
}

// InUse implements FeedTarget.
func (d *Dependencies) InUse() []any {
	var Edges int
	var ignored, encoder, previous string
	if g := d.Current(); g != nil {
		Edges, ignored, encoder = len(g.Edges), g.Ignored, g.Encoder
		if g.Previous != nil {
			previous = g.Previous.Encoder
		}
	}
	kv := []any{"edges", Edges, "partners", d.partners()}
	if encoder != "" {
		kv = append(kv, "encoder", encoder)
	}
	if previous != "" {
		kv = append(kv, "previousEncoder", previous)
	}
	if ignored != "" {
		kv = append(kv, "embeddingsIgnored", ignored)
	}
	return kv
}

// StartDependencies watches namespace/name's graph into deps until
// ctx ends (Feed.start).
func StartDependencies(ctx context.Context, client kubernetes.Interface, deps *Dependencies, namespace, name string) (*Feed, func()) {
	f := &Feed{what: "Dependency graph", without: "dependency features are 0", key: kubefmt.DependenciesConfigMapKey, side: kubefmt.EmbeddingsConfigMapKey,
		target: deps, updates: metricDependencyUpdates, namespace: namespace, name: name,
		logger: klog.FromContext(ctx).WithValues("plugin", Owner, "dependencies", namespace+"/"+name)}
	return f, f.start(ctx, client)
}
