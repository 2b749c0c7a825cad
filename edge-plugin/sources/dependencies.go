package sources

import (
	"cmp"
	"context"
	"slices"
	"sync/atomic"

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
// replicas run. A graph that does not decode is refused (counted, logged)
// and the last good graph stays; a deleted ConfigMap clears the graph.

var (
	metricDependencyEdges = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      MetricsSubsystem,
		Name:           "dependency_graph_edges",
		Help:           "Service dependency edges in the graph in use (0 without one).",
		StabilityLevel: metrics.ALPHA,
	})
	metricDependencyUpdates = newFeedUpdates("dependency_graph_updates_total", "Dependency graph")
)

// DepGraph is a dependency graph in the simulator's terms; immutable.
type DepGraph struct {
	Version  uint64 // bumped on every change (package serving's converter's env key)
	Services []string
	Edges    []sim.Dependency
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

// Set installs g (nil clears); it reports whether the edges changed.
func (d *Dependencies) Set(g *kubefmt.DependencyGraph) bool {
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
	// only the edges matter: a graph rewritten with a new "updated" time
	// keeps the env (and the score caches) as they are
	if old != nil && slices.Equal(old.Edges, Edges) {
		return false
	}
	ng := &DepGraph{Version: d.versions.Add(1), Edges: Edges}
	for s := range seen {
		ng.Services = append(ng.Services, s)
	}
	slices.Sort(ng.Services)
	d.cur.Store(ng)
	return true
}

var _ FeedTarget = (*Dependencies)(nil)

// Install implements FeedTarget: the graph under
// kubefmt.DependenciesConfigMapKey.
func (d *Dependencies) Install(raw []byte) (bool, error) {
	g, err := kubefmt.DecodeDependencyGraph(raw)
	if err != nil {
		return false, err
	}
	if !d.Set(g) {
		return false, nil
	}
	metricDependencyEdges.Set(float64(len(g.Edges)))
	return true, nil
}

// Clear implements FeedTarget.
func (d *Dependencies) Clear() bool {
	if !d.Set(nil) {
		return false
	}
	metricDependencyEdges.Set(0)
	return true
}

// InUse implements FeedTarget.
func (d *Dependencies) InUse() []any {
	var Edges int
	if g := d.Current(); g != nil {
		Edges = len(g.Edges)
	}
	return []any{"edges", Edges}
}

// StartDependencies watches namespace/name's graph into deps until
// ctx ends (Feed.start).
func StartDependencies(ctx context.Context, client kubernetes.Interface, deps *Dependencies, namespace, name string) (*Feed, func()) {
	f := &Feed{what: "Dependency graph", without: "dependency features are 0", key: kubefmt.DependenciesConfigMapKey,
		target: deps, updates: metricDependencyUpdates, namespace: namespace, name: name,
		logger: klog.FromContext(ctx).WithValues("plugin", Owner, "dependencies", namespace+"/"+name)}
	return f, f.start(ctx, client)
}
