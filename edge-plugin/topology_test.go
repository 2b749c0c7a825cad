package edgeplugin

import (
	"math"
	"testing"
	"time"

	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/sim"
)

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
	p.core.SetClock(func() time.Time { return clock })
	g, _ := plugintest.GraphOf(t, kubefmt.DependencyEdge{From: "web", To: "db", CallsPerSecond: 10})
	p.core.Dependencies().Set(g)

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
	raw := plugintest.TopologyOf(t, tp)
	if changed, err := p.core.Topology().Install(raw); !changed || err != nil {
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
	if changed, err := p.core.Topology().Install(plugintest.TopologyOf(t, tp)); changed || err != nil {
		t.Fatalf("reordered topology: changed %v, %v; want no change", changed, err)
	}
	// a malformed one changes nothing either
	if changed, err := p.core.Topology().Install([]byte(`{"version":1,"zones":[{"name":"a","carbonZone":"nowhere"}]}`)); changed || err == nil {
		t.Fatalf("malformed topology: changed %v, %v; want an error", changed, err)
	}
	check("after a refused topology", map[string][2]float32{"a-0": {0.18, 0.01}, "b-0": {0.65, 0.45}})

	if !p.core.Topology().Clear() || p.core.Topology().Clear() {
		t.Fatal("clear: the first must change the topology, the second must not")
	}
	check("after clearing", def)
}
