package edgeplugin

import (
	"context"
	"sync/atomic"

	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
)

// Site topology (docs/edge-plugin.md, "Site topology"): with
// topologyConfigMap set, the plugin watches that ConfigMap for the site's
// zones, their carbon zones with hourly intensity curves, and the RTTs
// between zones (kubefmt.Topology under kubefmt.TopologyConfigMapKey,
// written by an operator). They go into the simulator environment the
// snapshot is converted into, so the policy's carbon feature is the
// intensity of the node's grid at the current hour and its dependency RTT
// feature uses the site's real RTTs. A topology that does not decode is
// refused (counted, logged) and the last good one stays; a deleted
// ConfigMap restores the defaults (every zone at
// sim.DefaultCarbonIntensity, sim.DefaultNetwork's RTTs).

var (
	metricTopologyZones = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "site_topology_carbon_zones",
		Help:           "Carbon zones in the site topology in use (0 without a topology, or with one that lists none).",
		StabilityLevel: metrics.ALPHA,
	})
	metricTopologyUpdates = newFeedUpdates("site_topology_updates_total", "Site topology")
)

// topoSpec is a site topology in the simulator's terms; immutable.
type topoSpec struct {
	version uint64            // bumped on every change (part of the converter's env key)
	enc     string            // canonical encoding: a rewrite with the same content changes nothing
	zones   map[string]string // zone -> carbon zone (as given; "" for none)
	carbon  []sim.CarbonZone
	network *sim.Network // nil: sim.DefaultNetwork
	// timed: some curve has more than one value, so the carbon feature
	// depends on the hour and the simulator's clock must be the wall clock
	timed bool
}

// topology holds the site topology in use. Safe for concurrent use;
// install and clear are called one at a time (configMapFeed).
type topology struct {
	cur     atomic.Pointer[topoSpec] // nil: none
	version atomic.Uint64
}

var _ feedTarget = (*topology)(nil)

// current is the topology in use (nil: none).
func (t *topology) current() *topoSpec {
	if t == nil {
		return nil
	}
	return t.cur.Load()
}

// install implements feedTarget: the topology under
// kubefmt.TopologyConfigMapKey.
func (t *topology) install(raw []byte) (bool, error) {
	tp, err := kubefmt.DecodeTopology(raw)
	if err != nil {
		return false, err
	}
	enc, err := tp.Encode()
	if err != nil {
		return false, err
	}
	if old := t.cur.Load(); old != nil && old.enc == string(enc) {
		return false, nil
	}
	s := &topoSpec{version: t.version.Add(1), enc: string(enc), zones: make(map[string]string, len(tp.Zones))}
	for _, z := range tp.Zones {
		s.zones[z.Name] = z.CarbonZone
	}
	for _, c := range tp.CarbonZones {
		s.carbon = append(s.carbon, sim.CarbonZone{Name: c.Name, Curve: append([]float64(nil), c.GramsPerKWh...)})
		s.timed = s.timed || len(c.GramsPerKWh) > 1
	}
	if nw := tp.Network; nw != nil {
		s.network = &sim.Network{IntraZoneMs: nw.IntraZoneMs, InterZoneMs: nw.InterZoneMs}
		for _, p := range nw.Pairs {
			s.network.Pairs = append(s.network.Pairs, sim.ZonePair{A: p.A, B: p.B, Ms: p.Ms})
		}
	}
	t.cur.Store(s)
	metricTopologyZones.Set(float64(len(s.carbon)))
	return true, nil
}

// clear implements feedTarget.
func (t *topology) clear() bool {
	if t.cur.Load() == nil {
		return false
	}
	t.cur.Store(nil)
	t.version.Add(1)
	metricTopologyZones.Set(0)
	return true
}

// inUse implements feedTarget.
func (t *topology) inUse() []any {
	s := t.current()
	if s == nil {
		return []any{"zones", 0, "carbonZones", 0}
	}
	return []any{"zones", len(s.zones), "carbonZones", len(s.carbon), "hourly", s.timed}
}

// apply sets the zones of the environment (the nodes', sorted by name),
// each with the carbon zone the topology gives it, and the topology's
// carbon zones and network (nothing more without a topology). Zones no
// node is in are left out, and so are pairs naming one: they cannot
// change a score, and the RTT table and the dependency features grow
// with the square of the zones. (The environment is compiled again when
// a node joins a new zone.)
func (s *topoSpec) apply(cl *sim.Cluster, nodeZones []string) {
	has := make(map[string]bool, len(nodeZones))
	for _, z := range nodeZones {
		has[z] = true
		var cz string
		if s != nil {
			cz = s.zones[z]
		}
		cl.Zones = append(cl.Zones, sim.Zone{Name: z, CarbonZone: cz})
	}
	if s == nil {
		return
	}
	cl.CarbonZones = s.carbon
	if s.network != nil {
		nw := sim.Network{IntraZoneMs: s.network.IntraZoneMs, InterZoneMs: s.network.InterZoneMs}
		for _, p := range s.network.Pairs {
			if has[p.A] && has[p.B] {
				nw.Pairs = append(nw.Pairs, p)
			}
		}
		cl.Network = &nw
	}
}

// startTopologySource watches namespace/name's topology into topo until
// ctx ends (configMapFeed.start).
func startTopologySource(ctx context.Context, client kubernetes.Interface, topo *topology, namespace, name string) (*configMapFeed, func()) {
	f := &configMapFeed{what: "Site topology", without: "every zone has the default carbon intensity and RTTs", key: kubefmt.TopologyConfigMapKey,
		target: topo, updates: metricTopologyUpdates, namespace: namespace, name: name,
		logger: klog.FromContext(ctx).WithValues("plugin", Name, "topology", namespace+"/"+name)}
	return f, f.start(ctx, client)
}
