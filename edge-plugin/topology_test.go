package edgeplugin

import (
	"context"
	"math"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/sim"
)

func topologyOf(t testing.TB, tp *kubefmt.Topology) []byte {
	t.Helper()
	tp.Version = kubefmt.TopologyVersion
	b, err := tp.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTopologyFeatures: four nodes in zones a and b, a replica of db on
// a-0 and the graph "web calls db". A web pod's carbon and dependency RTT
// features follow the site topology: the defaults without one, zone a's
// daily curve at the clock's UTC hour and zone b's flat intensity with
// one, the pair's RTT between a and b; the defaults again once it is
// cleared.
func TestTopologyFeatures(t *testing.T) {
	carbonF, rttF := featureIndex(t, "carbon"), featureIndex(t, "dep_rtt")
	p, _, nodes := zonedCluster(t)
	clock := time.Date(2026, 11, 30, 3, 30, 0, 0, time.UTC)
	p.now = func() time.Time { return clock }
	g, _ := graphOf(t, kubefmt.DependencyEdge{From: "web", To: "db", CallsPerSecond: 10})
	p.conv.deps.set(g)

	var seq int
	// features of a fresh web pod on every node: carbon, dep_rtt
	features := func() map[string][2]float32 {
		seq++
		pd := k8sPod(sim.PodSpec{Name: "web-" + string(rune('a'+seq)), CPU: 500, Memory: 512, QoS: sim.QoSBurstable})
		pd.Labels = map[string]string{"app": "web"}
		_, cs := runCycle(t, p, pd, nodes)
		names, _, x := scoredCandidates(t, p, cs)
		out := map[string][2]float32{}
		for j, n := range names {
			out[n] = [2]float32{x[j*policy.NumFeatures+carbonF], x[j*policy.NumFeatures+rttF]}
		}
		return out
	}
	check := func(when string, want map[string][2]float32) {
		t.Helper()
		got := features()
		for n, w := range want {
			g, ok := got[n]
			if !ok || math.Abs(float64(g[0]-w[0])) > 1e-6 || math.Abs(float64(g[1]-w[1])) > 1e-6 {
				t.Fatalf("%s: node %s (carbon, dep_rtt) = %v, want %v (all: %v)", when, n, g, w, got)
			}
		}
	}
	// Without a topology: carbon 475 g/kWh / 1000 everywhere; db's replica
	// is in zone a, so the RTT is the default 0.5 ms inside a and 30 ms
	// from b, / 100.
	def := map[string][2]float32{"a-0": {0.475, 0.005}, "a-1": {0.475, 0.005}, "b-0": {0.475, 0.3}, "b-1": {0.475, 0.3}}
	check("without a topology", def)

	curve := make([]float64, 24)
	for h := range curve {
		curve[h] = float64(100 + 10*h) // hour h of the day (UTC): 100 + 10h g/kWh
	}
	tp := &kubefmt.Topology{
		Zones:       []kubefmt.TopologyZone{{Name: "a", CarbonZone: "north"}, {Name: "b", CarbonZone: "south"}},
		CarbonZones: []kubefmt.CarbonZone{{Name: "north", GramsPerKWh: curve}, {Name: "south", GramsPerKWh: []float64{650}}},
		Network:     &kubefmt.Network{IntraZoneMs: 1, InterZoneMs: 20, Pairs: []kubefmt.ZonePair{{A: "b", B: "a", Ms: 45}}},
	}
	raw := topologyOf(t, tp)
	if changed, err := p.conv.topo.install(raw); !changed || err != nil {
		t.Fatalf("install: changed %v, %v", changed, err)
	}
	// 03:30 UTC: zone a at curve[3] = 130, zone b flat 650; RTT 1 ms
	// inside a, the pair's 45 ms from b (not interZoneMs' 20)
	check("with the topology at 03:30 UTC", map[string][2]float32{"a-0": {0.13, 0.01}, "a-1": {0.13, 0.01}, "b-0": {0.65, 0.45}, "b-1": {0.65, 0.45}})
	// five hours later the cached scores must not hide the new hour:
	// curve[8] = 180
	clock = clock.Add(5 * time.Hour)
	check("at 08:30 UTC", map[string][2]float32{"a-0": {0.18, 0.01}, "b-0": {0.65, 0.45}})

	// the same topology written in another order changes nothing
	tp.Zones[0], tp.Zones[1] = tp.Zones[1], tp.Zones[0]
	if changed, err := p.conv.topo.install(topologyOf(t, tp)); changed || err != nil {
		t.Fatalf("reordered topology: changed %v, %v; want no change", changed, err)
	}
	// a malformed one changes nothing either
	if changed, err := p.conv.topo.install([]byte(`{"version":1,"zones":[{"name":"a","carbonZone":"nowhere"}]}`)); changed || err == nil {
		t.Fatalf("malformed topology: changed %v, %v; want an error", changed, err)
	}
	check("after a refused topology", map[string][2]float32{"a-0": {0.18, 0.01}, "b-0": {0.65, 0.45}})

	if !p.conv.topo.clear() || p.conv.topo.clear() {
		t.Fatal("clear: the first must change the topology, the second must not")
	}
	check("after clearing", def)
}

// The site topology's ConfigMap feed, like the dependency graph's
// (testFeed in dependencies_test.go).
func TestTopologySource(t *testing.T) {
	two := topologyOf(t, &kubefmt.Topology{CarbonZones: []kubefmt.CarbonZone{{Name: "n", GramsPerKWh: []float64{1, 2}}, {Name: "s", GramsPerKWh: []float64{3}}}})
	one := topologyOf(t, &kubefmt.Topology{CarbonZones: []kubefmt.CarbonZone{{Name: "x", GramsPerKWh: []float64{5}}}})
	topo := &topology{}
	carbonZones := func() int {
		if s := topo.current(); s != nil {
			return len(s.carbon)
		}
		return -1
	}
	testFeed(t, feedCase{
		key: kubefmt.TopologyConfigMapKey, name: kubefmt.DefaultTopologyConfigMapName,
		start: func(ctx context.Context, c kubernetes.Interface, ns, name string) (*configMapFeed, func()) {
			return startTopologySource(ctx, c, topo, ns, name)
		},
		first: one, second: two,
		bad: []string{`{"version":1,"carbonZones":[{"name":"n","gramsPerKWh":[]}]}`, `{"version":1,"zone":[]}`},
		version: func() uint64 {
			if s := topo.current(); s != nil {
				return s.version
			}
			return 0
		},
		isFirst:  func() bool { return carbonZones() == 1 },
		isSecond: func() bool { return carbonZones() == 2 },
		cleared:  func() bool { return topo.current() == nil },
	})
}

// TestTopologyApply: the environment gets the nodes' zones only, with
// their carbon zones, and only the pairs between two of them; zones and
// pairs naming zones without nodes are left out (they cannot change a
// score, and the RTT table grows with the square of the zones).
func TestTopologyApply(t *testing.T) {
	topo := &topology{}
	raw := topologyOf(t, &kubefmt.Topology{
		Zones:       []kubefmt.TopologyZone{{Name: "a", CarbonZone: "g"}, {Name: "x", CarbonZone: "g"}},
		CarbonZones: []kubefmt.CarbonZone{{Name: "g", GramsPerKWh: []float64{10}}},
		Network: &kubefmt.Network{IntraZoneMs: 1, InterZoneMs: 2, Pairs: []kubefmt.ZonePair{
			{A: "a", B: "b", Ms: 5}, {A: "a", B: "x", Ms: 6}, {A: "y", B: "z", Ms: 7}}},
	})
	if _, err := topo.install(raw); err != nil {
		t.Fatal(err)
	}
	var cl sim.Cluster
	topo.current().apply(&cl, []string{"a", "b"})
	if len(cl.Zones) != 2 || cl.Zones[0] != (sim.Zone{Name: "a", CarbonZone: "g"}) || cl.Zones[1] != (sim.Zone{Name: "b"}) {
		t.Fatalf("zones %+v, want a (on g) and b", cl.Zones)
	}
	if cl.Network == nil || len(cl.Network.Pairs) != 1 || cl.Network.Pairs[0] != (sim.ZonePair{A: "a", B: "b", Ms: 5}) || cl.Network.InterZoneMs != 2 {
		t.Fatalf("network %+v, want only the a-b pair", cl.Network)
	}
	if len(cl.CarbonZones) != 1 {
		t.Fatalf("carbon zones %+v", cl.CarbonZones)
	}
	// the environment compiles: b, not listed, uses the flat default
	env, err := sim.NewEnv(&sim.Cluster{Name: "t", Zones: cl.Zones, CarbonZones: cl.CarbonZones, Network: cl.Network,
		Nodes: []sim.NodeSpec{{Name: "n", CPU: 1000, Memory: 1024, Zone: "b", Arch: sim.ArchAMD64}}}, &sim.Workload{Name: "w"}, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(env.Zones) != 2 || env.CarbonAt(env.Nodes[0].CarbonZone, 0) != sim.DefaultCarbonIntensity {
		t.Fatalf("env zones %v, carbon of b %v", env.Zones, env.CarbonAt(env.Nodes[0].CarbonZone, 0))
	}
	// without a topology: the nodes' zones, nothing else
	var none *topoSpec
	var bare sim.Cluster
	none.apply(&bare, []string{"a"})
	if len(bare.Zones) != 1 || bare.Zones[0] != (sim.Zone{Name: "a"}) || bare.Network != nil || bare.CarbonZones != nil {
		t.Fatalf("without a topology: %+v", bare)
	}
}
