package edgeplugin

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/edgesched/edgesched/edge-plugin/conventions"
	"github.com/edgesched/edgesched/sim"
)

// A valid topology whose pairs name zones no node (and no zone entry) has.
func TestRVScratchPairZones(t *testing.T) {
	pairs, _ := strconv.Atoi(os.Getenv("RV_PAIRS"))
	tp := &conventions.Topology{Version: 1, Network: &conventions.Network{IntraZoneMs: 1, InterZoneMs: 2}}
	for i := range pairs {
		tp.Network.Pairs = append(tp.Network.Pairs, conventions.ZonePair{A: fmt.Sprintf("p%05d", i), B: fmt.Sprintf("q%05d", i), Ms: 1})
	}
	raw, err := tp.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conventions.DecodeTopology(raw); err != nil {
		t.Fatal(err)
	}
	p, _, nodes := zonedCluster(t)
	g, _ := graphOf(t, conventions.DependencyEdge{From: "web", To: "db", CallsPerSecond: 10})
	p.conv.deps.set(g)
	if _, err := p.conv.topo.install(raw); err != nil {
		t.Fatal(err)
	}
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	for i := range 3 {
		pd := k8sPod(sim.PodSpec{Name: fmt.Sprintf("web-%d", i), CPU: int64(500 + 100*i), Memory: 512, QoS: sim.QoSBurstable})
		pd.Labels = map[string]string{"app": "web"}
		start := time.Now()
		runCycle(t, p, pd, nodes)
		t.Logf("cycle %d: %v", i, time.Since(start))
	}
	runtime.ReadMemStats(&ms1)
	t.Logf("encoded %d bytes, %d pairs; env zones %d; TotalAlloc %.0f MiB, HeapInuse %.0f MiB",
		len(raw), pairs, len(p.conv.env.Zones), float64(ms1.TotalAlloc-ms0.TotalAlloc)/(1<<20), float64(ms1.HeapInuse)/(1<<20))
}
