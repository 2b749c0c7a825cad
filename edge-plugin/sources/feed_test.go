package sources

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// TestDependencySource: the dependency graph's ConfigMap feed (testFeed).
func TestDependencySource(t *testing.T) {
	_, one := plugintest.GraphOf(t, kubefmt.DependencyEdge{From: "web", To: "db", CallsPerSecond: 10})
	_, two := plugintest.GraphOf(t, kubefmt.DependencyEdge{From: "web", To: "db", CallsPerSecond: 10},
		kubefmt.DependencyEdge{From: "web", To: "cache", CallsPerSecond: 3})
	deps := &Dependencies{}
	edges := func() int {
		if g := deps.Current(); g != nil {
			return len(g.Edges)
		}
		return -1
	}
	testFeed(t, feedCase{
		key: kubefmt.DependenciesConfigMapKey, name: kubefmt.DefaultDependenciesConfigMapName,
		start: func(ctx context.Context, c kubernetes.Interface, ns, name string) (*Feed, func()) {
			return StartDependencies(ctx, c, deps, ns, name)
		},
		first: one, second: two,
		bad: []string{
			`{"version":1,"edges":[{"from":"web","to":"db","callsPerSecond":-1}]}`,
			strings.Replace(string(two), `"version":1`, `"version":1,"extra":true`, 1), // unknown field
		},
		version: func() uint64 {
			if g := deps.Current(); g != nil {
				return g.Version
			}
			return 0
		},
		isFirst: func() bool {
			g := deps.Current()
			return g != nil && len(g.Edges) == 1 && slices.Equal(g.Services, []string{"db", "web"})
		},
		isSecond: func() bool { return edges() == 2 },
		cleared:  func() bool { return deps.Current() == nil },
	})
}

// feedCase is one ConfigMap feed under test: its key and default name,
// how to start it, two good values, malformed ones, and how to tell what
// is in use.
type feedCase struct {
	key, name                  string
	start                      func(ctx context.Context, c kubernetes.Interface, ns, name string) (*Feed, func())
	first, second              []byte
	bad                        []string
	version                    func() uint64 // of the value in use
	isFirst, isSecond, cleared func() bool
}

// testFeed runs a feed on client-go's fake clientset: it installs the
// value present at start, follows an update, keeps the last good value
// (same version) when malformed ones arrive, takes the next good one, and
// clears it when its key or the ConfigMap goes.
func testFeed(t *testing.T, fc feedCase) {
	t.Helper()
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "edgesched-system", Name: fc.name},
		Data: map[string]string{fc.key: string(fc.first)}}
	client := fake.NewClientset(cm)
	ctx, cancel := context.WithCancel(context.Background())
	src, wait := fc.start(ctx, client, "edgesched-system", fc.name)
	defer func() { cancel(); wait() }()
	if !fc.isFirst() {
		t.Fatal("the value present at start is not in use")
	}
	cms := client.CoreV1().ConfigMaps("edgesched-system")
	update := func(data string) string {
		t.Helper()
		c := cm.DeepCopy()
		c.Data[fc.key] = data
		up, err := cms.Update(ctx, c, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return up.ResourceVersion
	}
	refused := func() string {
		src.mu.Lock()
		defer src.mu.Unlock()
		return src.lastRefusedResource
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out after 10s waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	update(string(fc.second))
	waitFor("the updated value", fc.isSecond)
	v := fc.version()
	for _, bad := range fc.bad {
		rv := update(bad)
		waitFor("the refusal of resourceVersion "+rv, func() bool { return refused() == rv })
		if !fc.isSecond() || fc.version() != v {
			t.Fatalf("after the malformed value %.60s: version %d, want the second value (version %d) kept", bad, fc.version(), v)
		}
	}
	update(string(fc.first))
	waitFor("the next good value", fc.isFirst)
	// the key removed (the ConfigMap kept): cleared; back: in use again
	noKey := cm.DeepCopy()
	delete(noKey.Data, fc.key)
	noKey.Data["other"] = "x"
	if _, err := cms.Update(ctx, noKey, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the value cleared with its key", fc.cleared)
	update(string(fc.first))
	waitFor("the value back with its key", fc.isFirst)
	if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the value cleared", fc.cleared)
}

// The site topology's ConfigMap feed, like the dependency graph's
// (testFeed).
func TestTopologySource(t *testing.T) {
	two := plugintest.TopologyOf(t, &kubefmt.Topology{CarbonZones: []kubefmt.CarbonZone{{Name: "n", GramsPerKWh: []float64{1, 2}}, {Name: "s", GramsPerKWh: []float64{3}}}})
	one := plugintest.TopologyOf(t, &kubefmt.Topology{CarbonZones: []kubefmt.CarbonZone{{Name: "x", GramsPerKWh: []float64{5}}}})
	topo := &Topology{}
	carbonZones := func() int {
		if s := topo.Current(); s != nil {
			return len(s.carbon)
		}
		return -1
	}
	testFeed(t, feedCase{
		key: kubefmt.TopologyConfigMapKey, name: kubefmt.DefaultTopologyConfigMapName,
		start: func(ctx context.Context, c kubernetes.Interface, ns, name string) (*Feed, func()) {
			return StartTopology(ctx, c, topo, ns, name)
		},
		first: one, second: two,
		bad: []string{`{"version":1,"carbonZones":[{"name":"n","gramsPerKWh":[]}]}`, `{"version":1,"zone":[]}`},
		version: func() uint64 {
			if s := topo.Current(); s != nil {
				return s.Version
			}
			return 0
		},
		isFirst:  func() bool { return carbonZones() == 1 },
		isSecond: func() bool { return carbonZones() == 2 },
		cleared:  func() bool { return topo.Current() == nil },
	})
}

// TestTopologyApply: the environment gets the nodes' zones only, with
// their carbon zones, and only the pairs between two of them; zones and
// pairs naming zones without nodes are left out (they cannot change a
// score, and the RTT table grows with the square of the zones).
func TestTopologyApply(t *testing.T) {
	topo := &Topology{}
	raw := plugintest.TopologyOf(t, &kubefmt.Topology{
		Zones:       []kubefmt.TopologyZone{{Name: "a", CarbonZone: "g"}, {Name: "x", CarbonZone: "g"}},
		CarbonZones: []kubefmt.CarbonZone{{Name: "g", GramsPerKWh: []float64{10}}},
		Network: &kubefmt.Network{IntraZoneMs: 1, InterZoneMs: 2, Pairs: []kubefmt.ZonePair{
			{A: "a", B: "b", Ms: 5}, {A: "a", B: "x", Ms: 6}, {A: "y", B: "z", Ms: 7}}},
	})
	if _, err := topo.Install(raw); err != nil {
		t.Fatal(err)
	}
	var cl sim.Cluster
	topo.Current().Apply(&cl, []string{"a", "b"})
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
	var none *TopoSpec
	var bare sim.Cluster
	none.Apply(&bare, []string{"a"})
	if len(bare.Zones) != 1 || bare.Zones[0] != (sim.Zone{Name: "a"}) || bare.Network != nil || bare.CarbonZones != nil {
		t.Fatalf("without a topology: %+v", bare)
	}
}
