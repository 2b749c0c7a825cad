package edgeplugin

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
		Subsystem:      metricsSubsystem,
		Name:           "dependency_graph_edges",
		Help:           "Service dependency edges in the graph in use (0 without one).",
		StabilityLevel: metrics.ALPHA,
	})
	metricDependencyUpdates = newFeedUpdates("dependency_graph_updates_total", "Dependency graph")
)

// depGraph is a dependency graph in the simulator's terms; immutable.
type depGraph struct {
	version  uint64 // bumped on every change (the converter's env key)
	services []string
	edges    []sim.Dependency
}

// dependencies holds the graph in use. Safe for concurrent use.
type dependencies struct {
	cur     atomic.Pointer[depGraph] // nil: no graph
	version atomic.Uint64
}

// current is the graph in use (nil: none).
func (d *dependencies) current() *depGraph {
	if d == nil {
		return nil
	}
	return d.cur.Load()
}

// set installs g (nil clears); it reports whether the edges changed.
func (d *dependencies) set(g *kubefmt.DependencyGraph) bool {
	old := d.cur.Load()
	if g == nil {
		if old == nil {
			return false
		}
		d.cur.Store(nil)
		d.version.Add(1)
		return true
	}
	var edges []sim.Dependency
	set := map[string]bool{}
	for _, e := range g.Edges {
		edges = append(edges, sim.Dependency{From: e.From, To: e.To, CallsPerSecond: e.CallsPerSecond})
		set[e.From], set[e.To] = true, true
	}
	slices.SortFunc(edges, func(a, b sim.Dependency) int { return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To)) })
	// only the edges matter: a graph rewritten with a new "updated" time
	// keeps the env (and the score caches) as they are
	if old != nil && slices.Equal(old.edges, edges) {
		return false
	}
	ng := &depGraph{version: d.version.Add(1), edges: edges}
	for s := range set {
		ng.services = append(ng.services, s)
	}
	slices.Sort(ng.services)
	d.cur.Store(ng)
	return true
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

var _ feedTarget = (*dependencies)(nil)

// install implements feedTarget: the graph under
// kubefmt.DependenciesConfigMapKey.
func (d *dependencies) install(raw []byte) (bool, error) {
	g, err := kubefmt.DecodeDependencyGraph(raw)
	if err != nil {
		return false, err
	}
	if !d.set(g) {
		return false, nil
	}
	metricDependencyEdges.Set(float64(len(g.Edges)))
	return true, nil
}

// clear implements feedTarget.
func (d *dependencies) clear() bool {
	if !d.set(nil) {
		return false
	}
	metricDependencyEdges.Set(0)
	return true
}

// inUse implements feedTarget.
func (d *dependencies) inUse() []any {
	var edges int
	if g := d.current(); g != nil {
		edges = len(g.edges)
	}
	return []any{"edges", edges}
}

// startDependencySource watches namespace/name's graph into deps until
// ctx ends (configMapFeed.start).
func startDependencySource(ctx context.Context, client kubernetes.Interface, deps *dependencies, namespace, name string) (*configMapFeed, func()) {
	f := &configMapFeed{what: "Dependency graph", without: "dependency features are 0", key: kubefmt.DependenciesConfigMapKey,
		target: deps, updates: metricDependencyUpdates, namespace: namespace, name: name,
		logger: klog.FromContext(ctx).WithValues("plugin", Name, "dependencies", namespace+"/"+name)}
	return f, f.start(ctx, client)
}
