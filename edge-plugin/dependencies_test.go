package edgeplugin

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/sim"
)

// featureIndex is the position of a named feature in the schema.
func featureIndex(t *testing.T, name string) int {
	t.Helper()
	i := slices.IndexFunc(policy.FeatureList(), func(f policy.Feature) bool { return f.Name == name })
	if i < 0 {
		t.Fatalf("no feature %s in the schema", name)
	}
	return i
}

// zonedCluster is a plugin on four nodes, a-0, a-1, b-0, b-1 in zones a
// and b, with a replica of service db running on a-0: the nodes' specs
// and NodeInfos (which a test may replace).
func zonedCluster(t *testing.T) (*EdgePolicy, []sim.NodeSpec, []fwk.NodeInfo) {
	t.Helper()
	var specs []sim.NodeSpec
	for _, z := range []string{"a", "b"} {
		for i := range 2 {
			specs = append(specs, sim.NodeSpec{Name: z + "-" + string(rune('0'+i)), CPU: 16000, Memory: 65536, Zone: z, Arch: sim.ArchAMD64})
		}
	}
	db := k8sPod(sim.PodSpec{Name: "db-0", CPU: 1000, Memory: 1024, QoS: sim.QoSBurstable})
	db.Labels = map[string]string{kubefmt.LabelService: "db"}
	var nodes []fwk.NodeInfo
	for i, s := range specs {
		if i == 0 {
			nodes = append(nodes, nodeInfo(k8sNode(s), db))
		} else {
			nodes = append(nodes, nodeInfo(k8sNode(s)))
		}
	}
	target, err := LoadTarget(DefaultTargetWorkload, DefaultTargetThreshold)
	if err != nil {
		t.Fatal(err)
	}
	p := newTestPlugin(t, &fakeHandle{lister: &fakeLister{nodes: nodes}}, target)
	return p, specs, nodes
}

func graphOf(t *testing.T, edges ...kubefmt.DependencyEdge) (*kubefmt.DependencyGraph, []byte) {
	t.Helper()
	g := &kubefmt.DependencyGraph{Version: kubefmt.DependencyGraphVersion, Edges: edges}
	b, err := g.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return g, b
}

// TestDependencyFeatures: four nodes in zones a and b, a replica of
// service db running on a-0. A web pod (web calls db) sees co-location 1
// on zone a's nodes and 0 on zone b's once the graph is in use, 0
// everywhere without it; a pod of a service the graph does not name, and
// a pod without a service, see 0.
func TestDependencyFeatures(t *testing.T) {
	colo := featureIndex(t, "dep_zone_colocation")
	p, specs, nodes := zonedCluster(t)
	pod := func(name, service string) *v1.Pod {
		pd := k8sPod(sim.PodSpec{Name: name, CPU: 500, Memory: 512, QoS: sim.QoSBurstable})
		if service != "" {
			pd.Labels = map[string]string{"app": service}
		}
		return pd
	}
	colocation := func(pd *v1.Pod) map[string]float32 {
		_, cs := runCycle(t, p, pd, nodes)
		names, _, x := scoredCandidates(t, p, cs)
		out := map[string]float32{}
		for j, n := range names {
			out[n] = x[j*policy.NumFeatures+colo]
		}
		return out
	}
	zero := map[string]float32{"a-0": 0, "a-1": 0, "b-0": 0, "b-1": 0}
	same := func(got, want map[string]float32) bool {
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return len(got) == len(want)
	}
	if got := colocation(pod("web-0", "web")); !same(got, zero) {
		t.Fatalf("without a graph: co-location %v, want 0 everywhere", got)
	}
	g, _ := graphOf(t, kubefmt.DependencyEdge{From: "web", To: "db", CallsPerSecond: 10})
	if !p.conv.deps.set(g) || p.conv.deps.set(g) {
		t.Fatal("set: the first install must change the graph, the same edges again must not")
	}
	// a rewrite with a new "updated" time only is no change either
	g2 := *g
	g2.Updated = time.Now()
	if p.conv.deps.set(&g2) {
		t.Fatal("set: a graph differing only in its updated time changed the graph")
	}
	// db's only replica is in zone a: share 1/1 there, 0/1 in zone b
	want := map[string]float32{"a-0": 1, "a-1": 1, "b-0": 0, "b-1": 0}
	if got := colocation(pod("web-1", "web")); !same(got, want) {
		t.Fatalf("with web -> db: co-location %v, want %v", got, want)
	}
	// a second db replica on b-0 (a new NodeInfo generation, as the
	// scheduler's cache makes on a bind): db is now 1/2 in each zone, and
	// the cached scores of the web pods must not hide it
	db2 := k8sPod(sim.PodSpec{Name: "db-1", CPU: 1000, Memory: 1024, QoS: sim.QoSBurstable})
	db2.Labels = map[string]string{kubefmt.LabelService: "db"}
	nodes[2] = nodeInfo(k8sNode(specs[2]), db2)
	half := map[string]float32{"a-0": 0.5, "a-1": 0.5, "b-0": 0.5, "b-1": 0.5}
	if got := colocation(pod("web-1b", "web")); !same(got, half) {
		t.Fatalf("db in both zones: co-location %v, want %v", got, half)
	}
	nodes[2] = nodeInfo(k8sNode(specs[2]))
	if got := colocation(pod("web-1c", "web")); !same(got, want) {
		t.Fatalf("db-1 gone again: co-location %v, want %v", got, want)
	}
	// the edge counts from the callee's side too (db -> web is the same
	// neighbourhood): a db pod has no running web replica, so 0
	if got := colocation(pod("db-1", "db")); !same(got, zero) {
		t.Fatalf("db pod, no web replica running: %v, want 0", got)
	}
	if got := colocation(pod("cache-0", "cache")); !same(got, zero) {
		t.Fatalf("a service outside the graph: %v, want 0", got)
	}
	if got := colocation(pod("plain", "")); !same(got, zero) {
		t.Fatalf("a pod without a service: %v, want 0", got)
	}
	// clearing the graph: back to 0
	if !p.conv.deps.set(nil) {
		t.Fatal("clearing did not change the graph")
	}
	if got := colocation(pod("web-2", "web")); !same(got, zero) {
		t.Fatalf("after clearing: %v, want 0", got)
	}
}

// TestDependencySource: the dependency graph's ConfigMap feed (testFeed).
func TestDependencySource(t *testing.T) {
	_, one := graphOf(t, kubefmt.DependencyEdge{From: "web", To: "db", CallsPerSecond: 10})
	_, two := graphOf(t, kubefmt.DependencyEdge{From: "web", To: "db", CallsPerSecond: 10},
		kubefmt.DependencyEdge{From: "web", To: "cache", CallsPerSecond: 3})
	deps := &dependencies{}
	edges := func() int {
		if g := deps.current(); g != nil {
			return len(g.edges)
		}
		return -1
	}
	testFeed(t, feedCase{
		key: kubefmt.DependenciesConfigMapKey, name: kubefmt.DefaultDependenciesConfigMapName,
		start: func(ctx context.Context, c kubernetes.Interface, ns, name string) (*configMapFeed, func()) {
			return startDependencySource(ctx, c, deps, ns, name)
		},
		first: one, second: two,
		bad: []string{
			`{"version":1,"edges":[{"from":"web","to":"db","callsPerSecond":-1}]}`,
			strings.Replace(string(two), `"version":1`, `"version":1,"extra":true`, 1), // unknown field
		},
		version: func() uint64 {
			if g := deps.current(); g != nil {
				return g.version
			}
			return 0
		},
		isFirst: func() bool {
			g := deps.current()
			return g != nil && len(g.edges) == 1 && slices.Equal(g.services, []string{"db", "web"})
		},
		isSecond: func() bool { return edges() == 2 },
		cleared:  func() bool { return deps.current() == nil },
	})
}

// feedCase is one ConfigMap feed under test: its key and default name,
// how to start it, two good values, malformed ones, and how to tell what
// is in use.
type feedCase struct {
	key, name                  string
	start                      func(ctx context.Context, c kubernetes.Interface, ns, name string) (*configMapFeed, func())
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
