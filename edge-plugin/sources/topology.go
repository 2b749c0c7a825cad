package sources

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
		Subsystem:      MetricsSubsystem,
		Name:           "site_topology_carbon_zones",
		Help:           "Carbon zones in the site topology in use (0 without a topology, or with one that lists none).",
		StabilityLevel: metrics.ALPHA,
	})
	metricTopologyUpdates = newFeedUpdates("site_topology_updates_total", "Site topology")
)

// TopoSpec is a site topology in the simulator's terms; immutable.
type TopoSpec struct {
	Version uint64            // bumped on every change (part of package serving's converter's env key)
	enc     string            // canonical encoding: a rewrite with the same content changes nothing
	zones   map[string]string // zone -> carbon zone (as given; "" for none)
	carbon  []sim.CarbonZone
	network *sim.Network // nil: sim.DefaultNetwork
	// timed: some curve has more than one value, so the carbon feature
	// depends on the hour and the simulator's clock must be the wall clock
	Timed bool
}

// Topology holds the site topology in use. Safe for concurrent use;
// install and clear are called one at a time (Feed).
type Topology struct {
	cur      atomic.Pointer[TopoSpec] // nil: none
	versions atomic.Uint64
}

var _ FeedTarget = (*Topology)(nil)

// Current is the topology in use (nil: none).
func (t *Topology) Current() *TopoSpec {
	if t == nil {
		return nil
	}
	return t.cur.Load()
}

// Install implements FeedTarget: the topology under
// kubefmt.TopologyConfigMapKey.
func (t *Topology) Install(raw []byte) (bool, error) {
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
	s := &TopoSpec{Version: t.versions.Add(1), enc: string(enc), zones: make(map[string]string, len(tp.Zones))}
	for _, z := range tp.Zones {
		s.zones[z.Name] = z.CarbonZone
	}
	for _, c := range tp.CarbonZones {
		s.carbon = append(s.carbon, sim.CarbonZone{Name: c.Name, Curve: append([]float64(nil), c.GramsPerKWh...)})
		s.Timed = s.Timed || len(c.GramsPerKWh) > 1
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

// Clear implements FeedTarget.
func (t *Topology) Clear() bool {
	if t.cur.Load() == nil {
		return false
	}
	t.cur.Store(nil)
	t.versions.Add(1)
	metricTopologyZones.Set(0)
	return true
}

// InUse implements FeedTarget.
func (t *Topology) InUse() []any {
	s := t.Current()
	if s == nil {
		return []any{"zones", 0, "carbonZones", 0}
	}
	return []any{"zones", len(s.zones), "carbonZones", len(s.carbon), "hourly", s.Timed}
}

// Apply sets the zones of the environment (the nodes', sorted by name),
// each with the carbon zone the topology gives it, and the topology's
// carbon zones and network (nothing more without a topology). Zones no
// node is in are left out, and so are pairs naming one: they cannot
// change a score, and the RTT table and the dependency features grow
// with the square of the zones. (The environment is compiled again when
// a node joins a new zone.)
func (s *TopoSpec) Apply(cl *sim.Cluster, nodeZones []string) {
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

// StartTopology watches namespace/name's topology into topo until
// ctx ends (Feed.start).
func StartTopology(ctx context.Context, client kubernetes.Interface, topo *Topology, namespace, name string) (*Feed, func()) {
	f := &Feed{what: "Site topology", without: "every zone has the default carbon intensity and RTTs", key: kubefmt.TopologyConfigMapKey,
		target: topo, updates: metricTopologyUpdates, namespace: namespace, name: name,
		logger: klog.FromContext(ctx).WithValues("plugin", Owner, "topology", namespace+"/"+name)}
	return f, f.start(ctx, client)
}

// Carbon is the carbon intensity (gCO2/kWh) of zone's grid at hour (of
// the day, UTC) and whether the topology gives one: the zone must name a
// carbon zone that has a curve. A nil TopoSpec gives none.
func (s *TopoSpec) Carbon(zone string, hour int) (float64, bool) {
	if s == nil {
		return 0, false
	}
	cz, ok := s.zones[zone]
	if !ok || cz == "" {
		return 0, false
	}
	var v float64
	var found bool
	for _, z := range s.carbon {
		if z.Name == cz && len(z.Curve) > 0 {
			v, found = z.Curve[hour%len(z.Curve)], true
		}
	}
	return v, found
}
