package edgeplugin

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/edgesched/edgesched/edge-plugin/conventions"
	"github.com/edgesched/edgesched/sim"
)

// Service dependencies (docs/edge-plugin.md, "Service dependencies"):
// with dependenciesConfigMap set, the plugin watches that ConfigMap (one
// namespace-scoped informer, as the model's) for the site's service call
// graph (conventions.DependencyGraph under conventions.DependenciesConfigMapKey,
// written by the site leader from the agents' flow measurements). The
// graph's services and edges go into the simulator environment the
// snapshot is converted into, and every pod's service (conventions.ServiceOf)
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
	metricDependencyUpdates = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "dependency_graph_updates_total",
		Help:           "Dependency graph ConfigMap changes by result: applied, refused (malformed; the last good graph stays), cleared (ConfigMap deleted or key removed).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
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
func (d *dependencies) set(g *conventions.DependencyGraph) bool {
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

// dependencySource feeds one ConfigMap's graph into a dependencies.
type dependencySource struct {
	deps                *dependencies
	namespace, name     string
	logger              klog.Logger
	mu                  sync.Mutex // serialises apply and deleted
	lastRefusedResource string     // resourceVersion last refused (logged once)
}

// startDependencySource watches namespace/name until ctx ends, waiting
// (at most configMapSyncTimeout) for the first list so a graph present at
// start is in use before the first cycle. The returned function blocks
// until the watch has stopped after ctx ended.
func startDependencySource(ctx context.Context, client kubernetes.Interface, deps *dependencies, namespace, name string) (*dependencySource, func()) {
	s := &dependencySource{deps: deps, namespace: namespace, name: name,
		logger: klog.FromContext(ctx).WithValues("plugin", Name, "dependencies", namespace+"/"+name)}
	w := watchConfigMap(ctx, client, namespace, name, s.apply, s.deleted, s.logger)
	sctx, cancel := context.WithTimeout(ctx, configMapSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), w.synced) {
		s.logger.Error(sctx.Err(), "The dependency graph ConfigMap is not listed yet (RBAC: get/list/watch on it?); watching in the background, dependency features are 0 until a graph loads")
		return s, w.wait
	}
	if cm, err := w.get(); err == nil {
		s.apply(cm)
	} else {
		s.logger.Info("No dependency graph ConfigMap yet: dependency features are 0 until one is created")
	}
	return s, w.wait
}

// apply decodes the ConfigMap's graph and installs it; a malformed one
// is refused and the last good graph stays.
func (s *dependencySource) apply(obj any) {
	cm, ok := obj.(*v1.ConfigMap)
	if !ok || cm.Namespace != s.namespace || cm.Name != s.name {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, ok := cm.Data[conventions.DependenciesConfigMapKey]
	if !ok {
		if b, bok := cm.BinaryData[conventions.DependenciesConfigMapKey]; bok {
			raw, ok = string(b), true
		}
	}
	if !ok {
		if s.deps.set(nil) {
			metricDependencyUpdates.WithLabelValues("cleared").Inc()
			metricDependencyEdges.Set(0)
			s.logger.Info("Dependency graph ConfigMap has no graph key: dependency features are 0", "key", conventions.DependenciesConfigMapKey)
		}
		return
	}
	g, err := conventions.DecodeDependencyGraph([]byte(raw))
	if err != nil {
		if cm.ResourceVersion != s.lastRefusedResource {
			s.lastRefusedResource = cm.ResourceVersion
			metricDependencyUpdates.WithLabelValues("refused").Inc()
			kept := 0
			if c := s.deps.current(); c != nil {
				kept = len(c.edges)
			}
			s.logger.Error(err, "Dependency graph refused: keeping the last good one", "resourceVersion", cm.ResourceVersion, "keptEdges", kept)
		}
		return
	}
	if s.deps.set(g) {
		metricDependencyUpdates.WithLabelValues("applied").Inc()
		metricDependencyEdges.Set(float64(len(g.Edges)))
		s.logger.V(2).Info("Dependency graph applied", "edges", len(g.Edges), "updated", g.Updated.Format(time.RFC3339), "resourceVersion", cm.ResourceVersion)
	}
}

// deleted clears the graph: the site no longer publishes one.
func (s *dependencySource) deleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if cm, ok := obj.(*v1.ConfigMap); ok && (cm.Namespace != s.namespace || cm.Name != s.name) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deps.set(nil) {
		metricDependencyUpdates.WithLabelValues("cleared").Inc()
		metricDependencyEdges.Set(0)
		s.logger.Info("Dependency graph ConfigMap deleted: dependency features are 0")
	}
}
