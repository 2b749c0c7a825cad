package edgeplugin

import (
	"maps"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
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
	p := newTestPlugin(t, &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, target)
	return p, specs, nodes
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
	g, _ := plugintest.GraphOf(t, kubefmt.DependencyEdge{From: "web", To: "db", CallsPerSecond: 10})
	if !p.core.Dependencies().Set(g) || p.core.Dependencies().Set(g) {
		t.Fatal("set: the first install must change the graph, the same edges again must not")
	}
	// a rewrite with a new "updated" time only is no change either
	g2 := *g
	g2.Updated = time.Now()
	if p.core.Dependencies().Set(&g2) {
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
	if !p.core.Dependencies().Set(nil) {
		t.Fatal("clearing did not change the graph")
	}
	if got := colocation(pod("web-2", "web")); !same(got, zero) {
		t.Fatalf("after clearing: %v, want 0", got)
	}
}

// TestAffinityFromEmbeddings: the dependency ConfigMap's embeddings give
// web's partners (api one call away, db two); with db's only replica on
// a-0 and no api pod, a web pod's dep_affinity is 1 on zone a's nodes
// and 0 on zone b's (db's share of its replicas there). Embeddings of
// another encoder than the schema's, of another graph, or none, leave it 0; embeddings that
// do not decode refuse the ConfigMap and keep what is in use.
func TestAffinityFromEmbeddings(t *testing.T) {
	aff := featureIndex(t, "dep_affinity")
	p, _, nodes := zonedCluster(t)
	n := 0
	affinity := func() map[string]float32 {
		n++
		pd := k8sPod(sim.PodSpec{Name: "web-" + string(rune('a'+n)), CPU: 500, Memory: 512, QoS: sim.QoSBurstable})
		pd.Labels = map[string]string{"app": "web"}
		_, cs := runCycle(t, p, pd, nodes)
		names, _, x := scoredCandidates(t, p, cs)
		out := map[string]float32{}
		for j, nm := range names {
			out[nm] = x[j*policy.NumFeatures+aff]
		}
		return out
	}
	_, graph := plugintest.GraphOf(t, kubefmt.DependencyEdge{From: "web", To: "api", CallsPerSecond: 10}, kubefmt.DependencyEdge{From: "api", To: "db", CallsPerSecond: 30})
	embeddingsAt := func(encoder string, updated time.Time) []byte {
		e := &kubefmt.Embeddings{Version: kubefmt.EmbeddingsVersion, Encoder: encoder, Dim: 2, Updated: updated}
		for _, s := range []string{"api", "db", "web"} {
			se := kubefmt.QuantizeEmbedding(s, []float32{1, 0})
			if s == "web" {
				se.Partners = []kubefmt.Partner{{Service: "api", P: 200}, {Service: "db", P: 100}}
			}
			e.Services = append(e.Services, se)
		}
		b, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	embeddings := func(encoder string) []byte { return embeddingsAt(encoder, time.Time{}) }
	deps := p.core.Dependencies()
	zero := map[string]float32{"a-0": 0, "a-1": 0, "b-0": 0, "b-1": 0}
	want := map[string]float32{"a-0": 1, "a-1": 1, "b-0": 0, "b-1": 0}
	for _, c := range []struct {
		name    string
		side    []byte
		changed bool
		want    map[string]float32
	}{
		{"the graph alone", nil, true, zero},
		{"the schema's encoder", embeddings(policy.AffinityEncoder), true, want},
		{"the same again", embeddings(policy.AffinityEncoder), false, want},
		// the model's partners stay beside another encoder's
		// (DepGraph.Previous, TestPartnersThroughASwitchOfWeights) until
		// the encoder changes once more
		{"another encoder", embeddings("sage-0123456789abcdef"), true, want},
		{"a third encoder", embeddings("sage-fedcba9876543210"), true, zero},
		{"written with another graph", embeddingsAt(policy.AffinityEncoder, time.Unix(1_800_000_000, 0)), true, zero},
		{"the schema's encoder again", embeddings(policy.AffinityEncoder), true, want},
	} {
		changed, err := deps.InstallWith(graph, c.side)
		if err != nil || changed != c.changed {
			t.Fatalf("%s: changed %v, %v; want %v", c.name, changed, err, c.changed)
		}
		if got := affinity(); !maps.Equal(got, c.want) {
			t.Fatalf("%s: dep_affinity %v, want %v", c.name, got, c.want)
		}
	}
	if _, err := deps.InstallWith(graph, []byte(`{"version":2}`)); err == nil {
		t.Fatal("embeddings that do not decode were installed")
	}
	if got := affinity(); !maps.Equal(got, want) {
		t.Fatalf("after refused embeddings: dep_affinity %v, want the last good %v", got, want)
	}
}

// TestEdgeSageFollowsPartners: web calls api, api calls db; db's only
// replica runs on a-0 (zone a), no api pod runs. For a web pod, a-1 and
// b-0 differ only by zone. The shipped one-hop model (edge-loaded) sees
// no placed neighbour of web and cannot tell them apart; edge-sage, int8
// as the plugin serves it, reads db two calls away through the partners
// the leader publishes (sage.Publish over the graph) and must score a-1,
// db's zone, higher.
func TestEdgeSageFollowsPartners(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: quantizes two models on a scenario replay")
	}
	edges := []kubefmt.DependencyEdge{{From: "web", To: "api", CallsPerSecond: 10}, {From: "api", To: "db", CallsPerSecond: 30}}
	_, graph := plugintest.GraphOf(t, edges...)
	emb, err := plugintest.EmbeddingsOf(t, edges...).Encode()
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"edge-loaded", "edge-sage"} {
		p, _, nodes := zonedCluster(t)
		installEdgeModel(t, p, name, uint64(2+i))
		score := webScores(t, p, nodes, graph, emb)
		t.Logf("%s: raw scores %v", name, score)
		switch name {
		case "edge-loaded":
			if score["a-1"] != score["b-0"] {
				t.Errorf("edge-loaded tells a-1 (%v) from b-0 (%v) without a placed neighbour", score["a-1"], score["b-0"])
			}
		case "edge-sage":
			if !(score["a-1"] > score["b-0"]) {
				t.Errorf("edge-sage scores a-1, db's zone, %v, not above b-0's %v", score["a-1"], score["b-0"])
			}
		}
	}
}

// TestModelReadsItsOwnPartners: a model that carries GraphSAGE weights
// of its own (a federated round trained them; edge-sage's network with a
// moved decoder here) reads partners published under their ID, the ones
// its site leader publishes, and none of another encoder: the shipped
// pair's partners leave its dep_affinity at 0 (zones scored alike).
func TestModelReadsItsOwnPartners(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: quantizes a model on a scenario replay")
	}
	own := policy.DefaultSage()
	own.Decoder[0] += 0.01
	raw, edges, graph := edgeSageWith(t, own)
	for _, tc := range []struct {
		name    string
		weights *policy.SageWeights
		follows bool
	}{{"the shipped pair's partners", policy.DefaultSage(), false}, {"partners of its own weights", own, true}} {
		p, _, nodes := zonedCluster(t)
		if _, err := p.Models().Install(raw); err != nil {
			t.Fatal(err)
		}
		emb, err := plugintest.EmbeddingsWith(t, tc.weights, edges...).Encode()
		if err != nil {
			t.Fatal(err)
		}
		score := webScores(t, p, nodes, graph, emb)
		t.Logf("%s: raw scores %v", tc.name, score)
		if got := score["a-1"] > score["b-0"]; got != tc.follows || (!tc.follows && score["a-1"] != score["b-0"]) {
			t.Errorf("%s: a-1 (db's zone) %v, b-0 %v; want a-1 above: %v, else equal", tc.name, score["a-1"], score["b-0"], tc.follows)
		}
	}
}

// TestPartnersThroughASwitchOfWeights: the site leader embeds with the
// weights of the model its agent installed, possibly before the scheduler
// has loaded that model. The model still running keeps reading its own
// partners (DepGraph.Previous) until the encoder changes once more.
// The model is edge-sage with a moved decoder (own), as in
// TestModelReadsItsOwnPartners: its own partners pull web towards db's
// zone (a-1 above b-0); partners of any other weights leave the zones
// alike (a-1 == b-0).
func TestPartnersThroughASwitchOfWeights(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: quantizes a model on a scenario replay")
	}
	own := policy.DefaultSage()
	own.Decoder[0] += 0.01
	third := policy.DefaultSage()
	third.Decoder[0] -= 0.01
	raw, edges, graph := edgeSageWith(t, own)
	p, _, nodes := zonedCluster(t)
	if _, err := p.Models().Install(raw); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name     string
		weights  *policy.SageWeights
		previous string // DepGraph.Previous's encoder afterwards
		follows  bool
	}{
		{"the model's own weights", own, "", true},
		{"the leader switched to the shipped pair", policy.DefaultSage(), own.ID(), true},
		{"republished alike", policy.DefaultSage(), own.ID(), true},
		{"switched once more", third, policy.AffinityEncoder, false},
		{"back to the model's own", own, third.ID(), true},
	} {
		emb, err := plugintest.EmbeddingsWith(t, step.weights, edges...).Encode()
		if err != nil {
			t.Fatal(err)
		}
		score := webScores(t, p, nodes, graph, emb)
		g := p.core.Dependencies().Current()
		var prev string
		if g.Previous != nil {
			prev = g.Previous.Encoder
		}
		if g.Encoder != step.weights.ID() || prev != step.previous {
			t.Errorf("%s: encoder %s, previous %q; want %s, %q", step.name, g.Encoder, prev, step.weights.ID(), step.previous)
		}
		if got := score["a-1"] > score["b-0"]; got != step.follows || (!step.follows && score["a-1"] != score["b-0"]) {
			t.Errorf("%s: a-1 (db's zone) %v, b-0 %v; want a-1 above: %v, else equal", step.name, score["a-1"], score["b-0"], step.follows)
		}
	}
	// embeddings gone: nothing is kept
	if _, err := p.core.Dependencies().InstallWith(graph, nil); err != nil {
		t.Fatal(err)
	}
	if g := p.core.Dependencies().Current(); g.Embeddings != nil || g.Previous != nil {
		t.Errorf("without embeddings: current %v, previous %v; want none", g.Embeddings != nil, g.Previous != nil)
	}
}

// edgeSageWith is edge-sage carrying the GraphSAGE weights w, int8, signed
// as version 2 (above the cluster's own model), and the web -> api -> db
// graph the tests place web pods by: its edges and ConfigMap encoding.
func edgeSageWith(t *testing.T, w *policy.SageWeights) (raw []byte, edges []kubefmt.DependencyEdge, graph []byte) {
	t.Helper()
	a := edgeArtifactWith(t, "edge-sage", w)
	if a.AffinityEncoder() != w.ID() {
		t.Fatalf("the artifact's GraphSAGE weights are %s, want %s", a.AffinityEncoder(), w.ID())
	}
	a.Header.Version = 2
	raw, err := a.Encode(testSigner(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	edges = []kubefmt.DependencyEdge{{From: "web", To: "api", CallsPerSecond: 10}, {From: "api", To: "db", CallsPerSecond: 30}}
	_, graph = plugintest.GraphOf(t, edges...)
	return raw, edges, graph
}

// webScores installs graph and its embeddings emb in p and returns the
// raw scores of a web pod on nodes, by node name.
func webScores(t *testing.T, p *EdgePolicy, nodes []fwk.NodeInfo, graph, emb []byte) map[string]float32 {
	t.Helper()
	if _, err := p.core.Dependencies().InstallWith(graph, emb); err != nil {
		t.Fatal(err)
	}
	pd := k8sPod(sim.PodSpec{Name: "web-0", CPU: 500, Memory: 512, QoS: sim.QoSBurstable})
	pd.Labels = map[string]string{"app": "web"}
	_, cs := runCycle(t, p, pd, nodes)
	names, raws, _ := scoredCandidates(t, p, cs)
	score := map[string]float32{}
	for j, n := range names {
		score[n] = raws[j]
	}
	return score
}
