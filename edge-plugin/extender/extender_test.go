package extender

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/internal/testutil/metricstest"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/openb"
)

// post sends v (or raw bytes) to the extender and returns status and body.
func post(t testing.TB, url string, v any) (int, []byte) {
	t.Helper()
	b, ok := v.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

func nodeList(nodes ...*v1.Node) *v1.NodeList {
	l := &v1.NodeList{}
	for _, n := range nodes {
		l.Items = append(l.Items, *n)
	}
	return l
}

func onNode(p *v1.Pod, node string) *v1.Pod {
	p = p.DeepCopy()
	p.Spec.NodeName = node
	return p
}

// verbCall POSTs args to the extender's verb and decodes a 200 reply.
func verbCall[T any](t testing.TB, srv *httptest.Server, verb string, args any) *T {
	t.Helper()
	code, body := post(t, srv.URL+"/"+verb, args)
	if code != http.StatusOK {
		t.Fatalf("%s: %d %s", verb, code, body)
	}
	res := new(T)
	if err := json.Unmarshal(body, res); err != nil {
		t.Fatalf("%s reply %s: %v", verb, body, err)
	}
	return res
}

func filterCall(t testing.TB, srv *httptest.Server, args *extenderv1.ExtenderArgs) *extenderv1.ExtenderFilterResult {
	t.Helper()
	return verbCall[extenderv1.ExtenderFilterResult](t, srv, "filter", args)
}

func prioritizeCall(t testing.TB, srv *httptest.Server, args *extenderv1.ExtenderArgs) extenderv1.HostPriorityList {
	t.Helper()
	return *verbCall[extenderv1.HostPriorityList](t, srv, "prioritize", args)
}

func TestExtenderFilter(t *testing.T) {
	p := newTestPlugin(t, nil, sim.NewTargetWorkload(nil, 0.95))
	t4, t4free, a100 := k8sNode(gpuNode("t4", "T4", 2)), k8sNode(gpuNode("t4free", "T4", 1)), k8sNode(gpuNode("a100", "A100", 4))
	cpu := k8sNode(sim.NodeSpec{Name: "cpu", CPU: 8000, Memory: 8192, Arch: sim.ArchAMD64})
	share700 := k8sPod(sim.PodSpec{Name: "h1", CPU: 1000, Memory: 1024, GPUs: 1, GPUMilli: 700})
	share700.Annotations[kubefmt.AnnotationGPUDevices] = "0"
	whole := k8sPod(sim.PodSpec{Name: "h2", CPU: 1000, Memory: 1024, GPUs: 1, GPUMilli: 1000})
	whole.Annotations[kubefmt.AnnotationGPUDevices] = "1"
	src := NewStaticSource([]*v1.Node{t4, t4free, a100, cpu}, onNode(share700, "t4"), onNode(whole, "t4"))
	srv := httptest.NewServer(New(p, src, Options{}))
	defer srv.Close()

	pod := k8sPod(sim.PodSpec{Name: "a", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 400, GPUSpec: []string{"T4"}})
	res := filterCall(t, srv, &extenderv1.ExtenderArgs{Pod: pod, Nodes: nodeList(t4, t4free, a100, cpu)})
	if res.Error != "" || res.Nodes == nil || res.NodeNames != nil {
		t.Fatalf("reply: %+v", res)
	}
	var kept []string
	for _, n := range res.Nodes.Items {
		kept = append(kept, n.Name)
	}
	if !slices.Equal(kept, []string{"t4free"}) {
		t.Fatalf("kept %v, want [t4free]", kept)
	}
	if got := res.FailedNodes["t4"]; got != edgeplugin.ReasonGPUShare {
		t.Errorf("t4: FailedNodes %q, want %q (%+v)", got, edgeplugin.ReasonGPUShare, res)
	}
	if got := res.FailedAndUnresolvableNodes["a100"]; got != edgeplugin.ReasonGPUModel {
		t.Errorf("a100: FailedAndUnresolvableNodes %q, want %q", got, edgeplugin.ReasonGPUModel)
	}
	if got := res.FailedAndUnresolvableNodes["cpu"]; got != edgeplugin.ReasonNoGPU {
		t.Errorf("cpu: FailedAndUnresolvableNodes %q, want %q", got, edgeplugin.ReasonNoGPU)
	}

	// nodeCacheCapable form: names in, names out; unknown names fail.
	names := []string{"t4", "t4free", "ghost"}
	res = filterCall(t, srv, &extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names})
	if res.NodeNames == nil || !slices.Equal(*res.NodeNames, []string{"t4free"}) || res.Nodes != nil {
		t.Fatalf("names reply: %+v", res)
	}
	if res.FailedNodes["ghost"] != ReasonNodeUnknown || res.FailedNodes["t4"] != edgeplugin.ReasonGPUShare {
		t.Fatalf("names reply failures: %+v", res.FailedNodes)
	}

	// A CPU pod: edgeplugin.EdgePolicy checks nothing, every node passes.
	res = filterCall(t, srv, &extenderv1.ExtenderArgs{Pod: k8sPod(sim.PodSpec{Name: "c", CPU: 1, Memory: 1}), Nodes: nodeList(t4, cpu)})
	if len(res.Nodes.Items) != 2 || len(res.FailedNodes)+len(res.FailedAndUnresolvableNodes) != 0 {
		t.Fatalf("cpu pod: %+v", res)
	}

	// A malformed GPU request: unresolvable everywhere, with the reason.
	bad := k8sPod(sim.PodSpec{Name: "b", CPU: 1, Memory: 1})
	bad.Annotations[kubefmt.AnnotationGPUMilli] = "1500"
	res = filterCall(t, srv, &extenderv1.ExtenderArgs{Pod: bad, Nodes: nodeList(t4, cpu)})
	if len(res.Nodes.Items) != 0 || !strings.Contains(res.FailedAndUnresolvableNodes["t4"], kubefmt.AnnotationGPUMilli) {
		t.Fatalf("malformed request: %+v", res)
	}
}

func TestExtenderNotSyncedAndPanics(t *testing.T) {
	p := newTestPlugin(t, nil, sim.NewTargetWorkload(nil, 0.95))
	t4 := k8sNode(gpuNode("t4", "T4", 2))
	src := NewStaticSource([]*v1.Node{t4})
	src.NotSynced = true
	srv := httptest.NewServer(New(p, src, Options{}))
	defer srv.Close()
	gpuPod := k8sPod(sim.PodSpec{Name: "a", CPU: 1, Memory: 1, GPUs: 1, GPUMilli: 300})
	if res := filterCall(t, srv, &extenderv1.ExtenderArgs{Pod: gpuPod, Nodes: nodeList(t4)}); !strings.Contains(res.Error, "not synced") {
		t.Fatalf("GPU pod before sync: %+v, want an error result", res)
	}
	if res := filterCall(t, srv, &extenderv1.ExtenderArgs{Pod: k8sPod(sim.PodSpec{Name: "c", CPU: 1, Memory: 1}), Nodes: nodeList(t4)}); res.Error != "" || len(res.Nodes.Items) != 1 {
		t.Fatalf("CPU pod before sync: %+v", res)
	}
	if code, _ := post(t, srv.URL+"/prioritize", &extenderv1.ExtenderArgs{Pod: gpuPod, Nodes: nodeList(t4)}); code != http.StatusServiceUnavailable {
		t.Fatalf("prioritize before sync: %d, want 503", code)
	}

	// A panic in the request path: an error result / 500, counted.
	psrv := httptest.NewServer(New(p, panicSource{src}, Options{}))
	defer psrv.Close()
	before, _ := plugintest.CounterValue("edgesched_plugin_panics_total", nil)
	if res := filterCall(t, psrv, &extenderv1.ExtenderArgs{Pod: gpuPod, Nodes: nodeList(t4)}); !strings.Contains(res.Error, "panic") {
		t.Fatalf("filter panic: %+v", res)
	}
	if code, body := post(t, psrv.URL+"/prioritize", &extenderv1.ExtenderArgs{Pod: gpuPod, Nodes: nodeList(t4)}); code != http.StatusInternalServerError {
		t.Fatalf("prioritize panic: %d %s", code, body)
	}
	after, _ := plugintest.CounterValue("edgesched_plugin_panics_total", nil)
	if after != before+2 {
		t.Fatalf("panics %v -> %v, want +2", before, after)
	}
	n, _ := testutil.GetCounterMetricValue(metricExtRequests.WithLabelValues("filter", extPanic))
	if n < 1 {
		t.Fatalf("requests_total{filter,panic} = %v", n)
	}
}

type panicSource struct{ *StaticSource }

func (panicSource) Synced() bool                { return true }
func (panicSource) PodsOnNode(string) []*v1.Pod { panic("source exploded") }

func TestExtenderBadRequests(t *testing.T) {
	p := newTestPlugin(t, nil, sim.NewTargetWorkload(nil, 0.95))
	srv := httptest.NewServer(New(p, NewStaticSource(nil), Options{Prefix: "edgesched/", MaxBodyBytes: 4096}))
	defer srv.Close()
	pod := `{"metadata":{"name":"a"}}`
	for _, c := range []struct {
		name, body, want string
	}{
		{"empty", ``, "empty request body"},
		{"malformed", `{"Pod":`, "malformed JSON"},
		{"not an object", `[1,2]`, "malformed JSON"},
		{"trailing", `{"Pod":` + pod + `,"NodeNames":[]} {}`, "trailing data"},
		{"unknown field", `{"Pod":` + pod + `,"NodeNames":[],"Extra":1}`, `unknown field "Extra"`},
		{"null", `null`, "null"},
		{"no pod", `{"NodeNames":["a"]}`, "Pod is missing"},
		{"no nodes", `{"Pod":` + pod + `}`, "neither Nodes nor NodeNames"},
		{"both", `{"Pod":` + pod + `,"NodeNames":[],"Nodes":{"items":[]}}`, "both Nodes and NodeNames"},
		{"wrong type", `{"Pod":` + pod + `,"NodeNames":"a"}`, "decoding ExtenderArgs"},
		{"duplicate node", `{"Pod":` + pod + `,"NodeNames":["a","a"]}`, `"a" is listed twice`},
		{"nameless node", `{"Pod":` + pod + `,"Nodes":{"items":[{}]}}`, "node 0 has no name"},
		{"oversized", `{"Pod":` + pod + `,"NodeNames":["` + strings.Repeat("x", 5000) + `"]}`, "exceeds the limit of 4096 bytes"},
	} {
		for _, verb := range []string{"filter", "prioritize"} {
			code, body := post(t, srv.URL+"/edgesched/"+verb, []byte(c.body))
			if code != http.StatusBadRequest || !strings.Contains(string(body), c.want) || !strings.Contains(string(body), verb) {
				t.Errorf("%s %s: %d %q, want 400 naming %q", c.name, verb, code, body, c.want)
			}
		}
	}
	resp, err := http.Get(srv.URL + "/edgesched/filter")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET filter: %d, want 405", resp.StatusCode)
	}
	resp, err = http.Post(srv.URL+"/edgesched/filter", "text/plain", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "content type") {
		t.Fatalf("text/plain: %d %s", resp.StatusCode, body)
	}
}

func TestExtenderPriority(t *testing.T) {
	for s, want := range map[int64]int64{100: 10, 150: 10, 99: 9, 98: 8, 50: 4, 11: 1, 10: 0, 0: 0, -3: 0} {
		if got := extenderPriority(s); got != want {
			t.Errorf("extenderPriority(%d) = %d, want %d", s, got, want)
		}
	}
	for s := int64(0); s < 100; s++ {
		if extenderPriority(s) > extenderPriority(s+1) {
			t.Fatalf("not monotone at %d", s)
		}
	}
}

// TestExtenderPrioritize: scores in [0, 10], the plugin's best node gets
// 10, and the NodeInfo cache is reused for unchanged objects.
func TestExtenderPrioritize(t *testing.T) {
	cl, err := openbCluster(24)
	if err != nil {
		t.Fatal(err)
	}
	target, err := edgeplugin.LoadTarget(edgeplugin.DefaultTargetWorkload, edgeplugin.DefaultTargetThreshold)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*v1.Node
	lister := &fakeLister{}
	for i, s := range cl.Nodes {
		n := k8sNode(s)
		n.ResourceVersion = fmt.Sprint(i + 1)
		nodes = append(nodes, n)
		lister.Nodes = append(lister.Nodes, nodeInfo(n))
	}
	plugin := newTestPlugin(t, &fakeHandle{Lister: lister}, target)
	ext := New(newTestPlugin(t, nil, target), NewStaticSource(nodes), Options{})
	srv := httptest.NewServer(ext)
	defer srv.Close()
	for k, ps := range []sim.PodSpec{
		{Name: "share", CPU: 2000, Memory: 4096, GPUs: 1, GPUMilli: 350},
		{Name: "whole", CPU: 8000, Memory: 16384, GPUs: 2, GPUMilli: 1000},
		{Name: "cpu", CPU: 4000, Memory: 8192},
	} {
		pod := k8sPod(ps)
		scores, _ := runCycle(t, plugin, pod, lister.Nodes)
		var feasible []*v1.Node
		best := map[string]bool{}
		for _, s := range scores {
			feasible = append(feasible, lister.Nodes[slices.IndexFunc(lister.Nodes, func(ni fwk.NodeInfo) bool { return ni.Node().Name == s.Name })].Node())
			if s.Score == fwk.MaxNodeScore {
				best[s.Name] = true
			}
		}
		if len(best) == 0 {
			t.Fatalf("%s: the plugin scored no node best: %v", ps.Name, scores)
		}
		got := prioritizeCall(t, srv, &extenderv1.ExtenderArgs{Pod: pod, Nodes: nodeList(feasible...)})
		if len(got) != len(feasible) {
			t.Fatalf("%s: %d priorities for %d nodes", ps.Name, len(got), len(feasible))
		}
		for _, hp := range got {
			if hp.Score < extenderv1.MinExtenderPriority || hp.Score > extenderv1.MaxExtenderPriority {
				t.Fatalf("%s: %s scored %d, out of [0, 10]", ps.Name, hp.Host, hp.Score)
			}
			if best[hp.Host] != (hp.Score == extenderv1.MaxExtenderPriority) {
				t.Fatalf("%s: %s scored %d by the extender; plugin's best set %v", ps.Name, hp.Host, hp.Score, best)
			}
		}
		if k == 0 {
			ni := ext.infos(nodes[:1], "")[0]
			if again := ext.infos(nodes[:1], ""); again[0] != ni {
				t.Fatal("NodeInfo of an unchanged node was rebuilt")
			}
		}
	}
}

// TestExtenderParity replays openb pods through the plugin (PreFilter,
// Filter, PreScore, Score, NormalizeScore, Reserve) and, over HTTP, the
// extender (filter, prioritize) on the same cluster: the extender's filter
// keeps exactly the nodes the plugin's Filter accepts, and its top
// priority set is exactly the plugin's tied-best set (so it contains the
// node the plugin picks). Each pod is then bound where the plugin put it,
// with the devices Reserve chose, in both views.
func TestExtenderParity(t *testing.T) {
	cl, err := openbCluster(40)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := openb.LoadPods("openb:default", nil)
	if err != nil {
		t.Fatal(err)
	}
	target, err := edgeplugin.LoadTarget(edgeplugin.DefaultTargetWorkload, edgeplugin.DefaultTargetThreshold)
	if err != nil {
		t.Fatal(err)
	}
	infos := make([]*framework.NodeInfo, len(cl.Nodes))
	index := map[string]int{}
	lister := &fakeLister{}
	var nodes []*v1.Node
	for i, s := range cl.Nodes {
		n := k8sNode(s)
		nodes = append(nodes, n)
		infos[i] = nodeInfo(n)
		index[n.Name] = i
		lister.Nodes = append(lister.Nodes, infos[i])
	}
	plugin := newTestPlugin(t, &fakeHandle{Lister: lister}, target)
	src := NewStaticSource(nodes)
	srv := httptest.NewServer(New(newTestPlugin(t, nil, target), src, Options{}))
	defer srv.Close()
	ctx := context.Background()
	decisions, ties, gpuPods := 0, 0, 0
	for i, ps := range pl.Pods[:100] {
		ps.Name = fmt.Sprintf("p%03d", i)
		pod := k8sPod(ps)
		if ps.GPUs > 0 {
			gpuPods++
		}
		// Filter parity on every node (the plugin's Filter, then CPU/memory
		// standing in for the upstream plugins, as the scheduler would).
		cs := framework.NewCycleState()
		_, pst := plugin.PreFilter(ctx, cs, pod, nil)
		res := filterCall(t, srv, &extenderv1.ExtenderArgs{Pod: pod, Nodes: nodeList(nodes...)})
		passed := map[string]bool{}
		for _, n := range res.Nodes.Items {
			passed[n.Name] = true
		}
		for _, ni := range lister.Nodes {
			want := pst.IsSkip() || (pst.IsSuccess() && plugin.Filter(ctx, cs, pod, ni).IsSuccess())
			if passed[ni.Node().Name] != want {
				t.Fatalf("pod %s: extender filter on %s = %v, plugin %v (%+v)", ps.Name, ni.Node().Name, passed[ni.Node().Name], want, res)
			}
		}
		scores, cycle := runCycle(t, plugin, pod, lister.Nodes)
		if len(scores) == 0 {
			continue // unschedulable here: nothing to compare
		}
		var feasible []*v1.Node
		best, pick := map[string]bool{}, ""
		for _, s := range scores {
			feasible = append(feasible, nodes[index[s.Name]])
			if s.Score == fwk.MaxNodeScore {
				best[s.Name] = true
				if pick == "" {
					pick = s.Name
				}
			}
		}
		top := map[string]bool{}
		for _, hp := range prioritizeCall(t, srv, &extenderv1.ExtenderArgs{Pod: pod, Nodes: nodeList(feasible...)}) {
			if hp.Score == extenderv1.MaxExtenderPriority {
				top[hp.Host] = true
			}
		}
		if !top[pick] || len(top) != len(best) {
			t.Fatalf("pod %s: extender's top set %v, plugin's best %v (pick %s)", ps.Name, top, best, pick)
		}
		if len(best) > 1 {
			ties++
		}
		decisions++
		if st := plugin.Reserve(ctx, cycle, pod, pick); !st.IsSuccess() {
			t.Fatalf("Reserve: %v", st)
		}
		if dev, ok := plugin.Core().Reserved(pod.UID, pick); ok {
			pod.Annotations[kubefmt.AnnotationGPUDevices] = kubefmt.FormatDevices(dev) // what Bind records
		}
		infos[index[pick]].AddPod(pod)
		src.AddPod(onNode(pod, pick))
	}
	t.Logf("%d decisions agree (%d GPU pods, %d with tied best nodes)", decisions, gpuPods, ties)
	if decisions < 60 {
		t.Fatalf("only %d decisions compared", decisions)
	}
}

// TestStartExtenderServer starts the real server (model and key files,
// an injected source) on a free port, calls it, and shuts it down.
func TestStartExtenderServer(t *testing.T) {
	dir := t.TempDir()
	s := testSigner(t, 1)
	_, pub, err := quant.WriteKeyPair(dir, "test", s)
	if err != nil {
		t.Fatal(err)
	}
	model := writeFile(t, dir, "model.esa", encodeVersion(t, s, 2))
	t4 := k8sNode(gpuNode("t4", "T4", 2))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	srv, err := Start(klog.NewContext(ctx, klog.Background()), Config{
		Listen: "127.0.0.1:0", Args: edgeplugin.Args{ModelPath: model, ModelKeys: []string{pub}, TargetWorkload: edgeplugin.DefaultTargetWorkload},
		Source: NewStaticSource([]*v1.Node{t4}), Options: Options{Prefix: "/edgesched"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.URL(), "http://127.0.0.1:") || !strings.HasSuffix(srv.URL(), "/edgesched") {
		t.Fatalf("URL %s", srv.URL())
	}
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ok", "/metrics": "edgesched_plugin_model_version"} {
		resp, err := http.Get("http://" + srv.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Fatalf("%s: %d %.200s", path, resp.StatusCode, b)
		}
	}
	code, body := post(t, srv.URL()+"/prioritize", &extenderv1.ExtenderArgs{Pod: k8sPod(sim.PodSpec{Name: "a", CPU: 1, Memory: 1, GPUs: 1, GPUMilli: 500}), Nodes: nodeList(t4)})
	if code != 200 || !strings.Contains(string(body), `"Host":"t4","Score":10`) {
		t.Fatalf("prioritize: %d %s", code, body)
	}
	resp, err := http.Get("http://" + srv.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `edgesched_extender_requests_total{result="ok",verb="prioritize"}`) {
		t.Fatalf("metrics lack the extender's requests")
	}
	metricstest.CheckProcessMetricsText(t, string(b), "edge-scheduler")
	cancel()
	select {
	case <-srv.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop")
	}
	if err := srv.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if _, err := http.Get("http://" + srv.Addr() + "/healthz"); err == nil {
		t.Fatal("still serving after shutdown")
	}
}

// TestK3sExtenderConfig loads the shipped K3s configurations the way
// kube-scheduler does and validates them: k3s-extender.yaml filters and
// binds the GPU pods only, k3s-extender-policy.yaml every pod (a policy's
// required rules apply to pods without GPUs too).
func TestK3sExtenderConfig(t *testing.T) {
	for file, allPods := range map[string]bool{"k3s-extender.yaml": false, "k3s-extender-policy.yaml": true} {
		t.Run(file, func(t *testing.T) {
			cfg, err := options.LoadConfigFromFile(klog.Background(), filepath.Join("..", "..", "deploy", "edge-scheduler", file))
			if err != nil {
				t.Fatal(err)
			}
			if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
				t.Fatal(err)
			}
			if len(cfg.Extenders) == 0 {
				t.Fatal("no extenders")
			}
			filter, prio, bind := false, false, false
			for _, e := range cfg.Extenders {
				if !e.NodeCacheCapable {
					t.Errorf("extender %s: nodeCacheCapable must be true (the extender reads Nodes from its cache; full Node objects cost the scheduler 100+ ms a pod at 5,000 nodes)", e.URLPrefix)
				}
				filter = filter || e.FilterVerb == "filter"
				prio = prio || e.PrioritizeVerb == "prioritize"
				if e.BindVerb == "bind" {
					// the binder is the filtering entry: without a
					// policy the one that manages the GPU resources (the
					// scheduler hands it exactly the GPU pods), with one
					// the entry interested in every pod, not ignorable
					bind = e.FilterVerb == "filter" && (len(e.ManagedResources) == 0) == allPods && (!allPods || !e.Ignorable)
				}
			}
			if !filter || !prio || !bind {
				t.Fatalf("extenders lack a verb (filter, prioritize, and bind on the filtering entry, for every pod: %v): %+v", allPods, cfg.Extenders)
			}
		})
	}
}

// TestExtenderKeepsNodeInfos: the NodeInfos the extender builds from its
// source are kept across requests while their objects are unchanged, so
// the converter's caches hit: a filter request that names a few nodes (the
// scheduler sends the ones it found feasible) must not forget the others',
// and a prioritize of the whole cluster reuses every one; a node whose
// object changed gets a new one. The source lists nodes in no fixed order,
// as an informer does.
func TestExtenderKeepsNodeInfos(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var nodes []*v1.Node
	var names []string
	for i, ni := range randomSnapshot(rng, 300) {
		n := ni.Node().DeepCopy()
		n.ResourceVersion = fmt.Sprint(i + 1)
		nodes, names = append(nodes, n), append(names, n.Name)
	}
	src := NewStaticSource(nodes)
	ext := New(newTestPlugin(t, nil, sim.NewTargetWorkload(nil, 0.95)), src, Options{})
	ctx := context.Background()
	cpuPod := k8sPod(sim.PodSpec{Name: "p", CPU: 100, Memory: 10})
	gpuPod := k8sPod(sim.PodSpec{Name: "g", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 500})
	ext.Prioritize(ctx, &extenderv1.ExtenderArgs{Pod: cpuPod, NodeNames: &names})
	before := map[string]*framework.NodeInfo{}
	for name, c := range ext.cache {
		before[name] = c.ni
	}
	if len(before) != len(nodes) {
		t.Fatalf("%d NodeInfos cached after a prioritize of %d nodes", len(before), len(nodes))
	}
	few := names[:10]
	ext.Filter(ctx, &extenderv1.ExtenderArgs{Pod: gpuPod, NodeNames: &few})
	changed := nodes[42].DeepCopy()
	changed.ResourceVersion = "changed"
	src.SetNode(changed)
	ext.Prioritize(ctx, &extenderv1.ExtenderArgs{Pod: cpuPod, NodeNames: &names})
	for name, ni := range before {
		c, ok := ext.cache[name]
		switch {
		case !ok:
			t.Errorf("node %s: NodeInfo forgotten", name)
		case name == changed.Name && c.ni == ni:
			t.Errorf("node %s changed: its NodeInfo was kept", name)
		case name != changed.Name && c.ni != ni:
			t.Errorf("node %s unchanged: its NodeInfo was built again", name)
		}
	}
}
