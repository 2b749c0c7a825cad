package edgeplugin

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/edge-plugin/serving"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
)

// BenchmarkCycle measures one pod's PreScore (snapshot conversion,
// features, int8 policy over every node) plus Score for every node, per
// node. cpu-pod and gpu-share-pod run on an unchanged snapshot (node
// conversions, the environment and every node's score come from the
// caches); after-bind binds a pod to another node before each cycle, as a
// scheduler does between two cycles (that node is converted again and
// re-scored: one feature extraction and forward pass); convert-only is the
// snapshot conversion alone. cpu-pod-10pct passes a tenth of the nodes as
// candidates, a different tenth every cycle, as kube-scheduler does at
// 5,000 nodes (percentageOfNodesToScore's adaptive default: 10%, from a
// start index that moves on every cycle). The plugin runs with the shipped
// scan period (nodeScanEvery). A cycle ends with NormalizeScore, as the
// framework's does (it copies the scores PreScore computed); then, not
// timed, Reserve and Unreserve on the best node.
//
// ns/op includes the benchmark's own work between cycles (after-bind's
// AddPod); cycle-ms is PreScore, every Score call and NormalizeScore
// alone, the figure
// issue 27's goal (0.3 ms at 5,000 nodes) is about.
func BenchmarkCycle(b *testing.B) {
	tgt, err := LoadTarget(DefaultTargetWorkload, DefaultTargetThreshold)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{100, 1000, 5000} {
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		nodes := randomSnapshot(rng, n)
		p := newTestPlugin(b, &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, tgt)
		p.core.SetScanEvery(nodeScanEvery)
		for _, phase := range []string{"cpu-pod", "cpu-pod-10pct", "gpu-share-pod", "after-bind", "convert-only"} {
			pod := k8sPod(sim.PodSpec{Name: "bench", CPU: 2000, Memory: 4096})
			if phase == "gpu-share-pod" {
				pod = k8sPod(sim.PodSpec{Name: "bench", CPU: 2000, Memory: 4096, GPUs: 1, GPUMilli: 300})
			}
			feasible := feasibleNodes(p, pod, nodes)
			b.Run(fmt.Sprintf("nodes=%d/%s", n, phase), func(b *testing.B) {
				panics, _ := plugintest.CounterValue("edgesched_plugin_panics_total", nil)
				defer func() {
					if after, _ := plugintest.CounterValue("edgesched_plugin_panics_total", nil); after != panics {
						b.Fatalf("%v panics during the benchmark", after-panics)
					}
				}()
				b.ReportAllocs()
				// One cycle before the clock starts: a process's first
				// cycle builds the environment, the view and the scores
				// (hundreds of ms at 5,000 nodes), which would otherwise
				// be spread over the first phase's measured cycles.
				list := nameList(feasible)
				scoreCycle(b, p, pod, feasible, list)
				// and the setup's garbage (5,000 NodeInfo objects and their
				// pods) collected before the clock starts, not by the
				// measured cycles' collections
				runtime.GC()
				defer plugintest.ReportCPU(b)()
				bound, start := 0, 0
				var inCycle time.Duration
				for b.Loop() {
					if phase == "after-bind" {
						// bind a small pod to the next node (the snapshot
						// object changes in place, its generation moves on)
						ni := feasible[bound%len(feasible)].(*framework.NodeInfo)
						ni.AddPod(k8sPod(sim.PodSpec{Name: fmt.Sprintf("bound-%d", bound), CPU: 1, Memory: 1}))
						bound++
					}
					if phase == "convert-only" {
						if err := p.core.WithView(nodes, nil, func(*serving.View) error { return nil }); err != nil {
							b.Fatal(err)
						}
						continue
					}
					cands, cl := feasible, list
					if phase == "cpu-pod-10pct" {
						k := max(1, len(feasible)/10)
						cands, cl = feasible[start:start+k], list[start:start+k]
						if start += k; start+k > len(feasible) {
							start = 0
						}
					}
					inCycle += scoreCycle(b, p, pod, cands, cl)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/node")
				if phase != "convert-only" {
					b.ReportMetric(inCycle.Seconds()*1000/float64(b.N), "cycle-ms")
				}
				b.ReportMetric(float64(len(feasible)), "feasible")
				if phase == "cpu-pod-10pct" {
					b.ReportMetric(float64(max(1, len(feasible)/10)), "candidates")
				}
			})
		}
	}
}

// BenchmarkShapes measures a stream of pods drawn from many distinct pod
// shapes (every field the score cache keys on: requests, GPU share, QoS,
// priority), as a real cluster's workload is (the built-in retail fleet
// alone has 958 shapes). Before each cycle a small pod is bound to the
// next node, as a scheduler does between two cycles. Shapes are drawn
// uniformly at random from a fixed, seeded set, so the stream's reuse
// distance is about the number of shapes. It reports the score cache's
// hit rate over the measured cycles (hit-rate, from the plugin's own
// counters) and pods/s of PreScore+Score.
func BenchmarkShapes(b *testing.B) {
	tgt, err := LoadTarget(DefaultTargetWorkload, DefaultTargetThreshold)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ nodes, shapes int }{{1000, 1000}, {5000, 1000}, {5000, 32}} {
		b.Run(fmt.Sprintf("nodes=%d/shapes=%d", tc.nodes, tc.shapes), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(uint64(tc.nodes), 27))
			nodes := randomSnapshot(rng, tc.nodes)
			p := newTestPlugin(b, &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, tgt)
			qos := []sim.QoS{sim.QoSLS, sim.QoSBurstable, sim.QoSBE}
			seen := map[shapeKey]bool{}
			var pods []*v1.Pod
			for len(pods) < tc.shapes {
				ps := sim.PodSpec{Name: fmt.Sprintf("shape-%d", len(pods)), CPU: int64(100 * (1 + rng.IntN(40))),
					Memory: int64(256 * (1 + rng.IntN(32))), QoS: qos[rng.IntN(len(qos))], Priority: int32(rng.IntN(4) * 100)}
				if rng.IntN(3) == 0 {
					ps.GPUs, ps.GPUMilli = 1, int64(100*(1+rng.IntN(9)))
				}
				pod := k8sPod(ps)
				sp, err := simPod(pod)
				if err != nil {
					b.Fatal(err)
				}
				if k := (shapeKey{sp.CPU, sp.Mem, sp.GPUs, sp.GPUMilli, sp.QoS, sp.Priority}); !seen[k] {
					seen[k] = true
					pods = append(pods, pod)
				}
			}
			list := nameList(nodes)
			cycle := func(pod *v1.Pod) {
				scoreCycle(b, p, pod, nodes, list)
			}
			// warm up: every shape once, so the measured cycles see the
			// steady state (a cache that keeps them all hits)
			for _, pod := range pods {
				cycle(pod)
			}
			hits0, _ := plugintest.CounterValue("edgesched_plugin_score_cache_total", map[string]string{"result": "hit"})
			miss0, _ := plugintest.CounterValue("edgesched_plugin_score_cache_total", map[string]string{"result": "miss"})
			bound := 0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				ni := nodes[bound%len(nodes)].(*framework.NodeInfo)
				ni.AddPod(k8sPod(sim.PodSpec{Name: fmt.Sprintf("bound-%d", bound), CPU: 1, Memory: 1}))
				bound++
				cycle(pods[rng.IntN(len(pods))])
			}
			hits, _ := plugintest.CounterValue("edgesched_plugin_score_cache_total", map[string]string{"result": "hit"})
			miss, _ := plugintest.CounterValue("edgesched_plugin_score_cache_total", map[string]string{"result": "miss"})
			if h, m := hits-hits0, miss-miss0; h+m > 0 {
				b.ReportMetric(h/(h+m), "hit-rate")
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pods/s")
		})
	}
}

// BenchmarkCycleTelemetry is BenchmarkCycle's cpu-pod at 5,000 nodes where
// every node carries a fresh agent telemetry annotation (the fleet the
// scale harness runs), with and without a bind before each cycle.
func BenchmarkCycleTelemetry(b *testing.B) {
	tgt, err := LoadTarget(DefaultTargetWorkload, DefaultTargetThreshold)
	if err != nil {
		b.Fatal(err)
	}
	const n = 5000
	rng := rand.New(rand.NewPCG(n, 1))
	nodes := randomSnapshot(rng, n)
	now := time.Now()
	for i, ni := range nodes {
		node := ni.Node().DeepCopy()
		runq := float64(20 + i%5000)
		s, err := kubefmt.EncodeTelemetry(kubefmt.TelemetrySummary{Time: now, Window: 10 * time.Second, CPU: float64(5+i%90) / 100, Mem: 0.5, Load1: 1, RunQueueP99Us: &runq})
		if err != nil {
			b.Fatal(err)
		}
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[kubefmt.AnnotationTelemetry] = s
		ni.(*framework.NodeInfo).SetNode(node)
	}
	p := newTestPlugin(b, &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, tgt)
	p.core.SetClock(func() time.Time { return now })
	pod := k8sPod(sim.PodSpec{Name: "bench", CPU: 2000, Memory: 4096})
	for _, phase := range []string{"cpu-pod", "after-bind"} {
		b.Run(fmt.Sprintf("nodes=%d/%s", n, phase), func(b *testing.B) {
			b.ReportAllocs()
			list := nameList(nodes)
			scoreCycle(b, p, pod, nodes, list) // the first cycle, not timed (BenchmarkCycle)
			runtime.GC()
			defer plugintest.ReportCPU(b)()
			bound := 0
			for b.Loop() {
				if phase == "after-bind" {
					ni := nodes[bound%len(nodes)].(*framework.NodeInfo)
					ni.AddPod(k8sPod(sim.PodSpec{Name: fmt.Sprintf("bound-%d", bound), CPU: 1, Memory: 1}))
					bound++
				}
				scoreCycle(b, p, pod, nodes, list)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/node")
		})
	}
}

// scoreCycle runs one pod's PreScore on nodes and Score on each of them.
func scoreCycle(b *testing.B, p *EdgePolicy, pod *v1.Pod, nodes []fwk.NodeInfo, list fwk.NodeScoreList) time.Duration {
	ctx := context.Background()
	cs := framework.NewCycleState()
	t0 := time.Now()
	if st := p.PreScore(ctx, cs, pod, nodes); !st.IsSuccess() {
		b.Fatal(st)
	}
	for i, ni := range nodes {
		s, st := p.Score(ctx, cs, pod, ni)
		if !st.IsSuccess() {
			b.Fatal(st)
		}
		list[i].Score = s
	}
	if st := p.NormalizeScore(ctx, cs, pod, list); !st.IsSuccess() {
		b.Fatal(st)
	}
	d := time.Since(t0)
	// then Reserve on the best node, as the scheduler does (it keeps the
	// explanation and releases the cycle's buffers), and Unreserve, so
	// that the next cycle sees the same cluster
	best := 0
	for i := range list {
		if list[i].Score > list[best].Score {
			best = i
		}
	}
	if st := p.Reserve(ctx, cs, pod, list[best].Name); !st.IsSuccess() {
		b.Fatal(st)
	}
	p.Unreserve(ctx, cs, pod, list[best].Name)
	return d
}

// nameList is the framework's score list for nodes before Score fills it
// in (RunScorePlugins reads each node's name itself; the benchmarks do it
// once, outside the timed cycles).
func nameList(nodes []fwk.NodeInfo) fwk.NodeScoreList {
	list := make(fwk.NodeScoreList, len(nodes))
	for i, ni := range nodes {
		list[i].Name = ni.Node().Name
	}
	return list
}

// BenchmarkFilter measures one pod's PreFilter plus Filter on every node
// of a 5,000-node snapshot, per node (the scheduler runs Filter on every
// node until enough are feasible, on parallel goroutines). The snapshot
// is unchanged between pods, so node conversions come from the converter's
// cache, as for all but the few nodes a binding or a telemetry refresh
// changed since the last cycle.
func BenchmarkFilter(b *testing.B) {
	const n = 5000
	tgt, err := LoadTarget(DefaultTargetWorkload, DefaultTargetThreshold)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(n, 1))
	nodes := randomSnapshot(rng, n)
	p := newTestPlugin(b, &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, tgt)
	for _, c := range []struct {
		name string
		spec sim.PodSpec
	}{
		{"gpu-share", sim.PodSpec{Name: "bench", CPU: 2000, Memory: 4096, GPUs: 1, GPUMilli: 300}},
		{"two-gpus", sim.PodSpec{Name: "bench", CPU: 8000, Memory: 16384, GPUs: 2, GPUMilli: sim.MilliGPU}},
		{"gpu-models", sim.PodSpec{Name: "bench", CPU: 2000, Memory: 4096, GPUs: 1, GPUMilli: sim.MilliGPU, GPUSpec: []string{"V100M16", "P100"}}},
	} {
		pod := k8sPod(c.spec)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			filterAll(b, p, pod, nodes) // converts every node once
			// and a PreScore's view of the snapshot, as the cycle before
			// this pod's leaves it
			if err := p.core.WithView(nodes, nil, func(*serving.View) error { return nil }); err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			defer plugintest.ReportCPU(b)()
			feasible := 0
			for b.Loop() {
				feasible = filterAll(b, p, pod, nodes)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/node")
			b.ReportMetric(float64(feasible), "feasible")
		})
	}
}

// filterAll runs PreFilter and Filter on every node and returns how many
// passed.
func filterAll(b *testing.B, p *EdgePolicy, pod *v1.Pod, nodes []fwk.NodeInfo) int {
	ctx := context.Background()
	cs := framework.NewCycleState()
	if _, st := p.PreFilter(ctx, cs, pod, nodes); !st.IsSuccess() {
		b.Fatal(st)
	}
	ok := 0
	for _, ni := range nodes {
		if p.Filter(ctx, cs, pod, ni).IsSuccess() {
			ok++
		}
	}
	return ok
}

// BenchmarkReserve measures Reserve after a cycle at 5,000 nodes: the
// explanation's input (the chosen node's features and the baseline of
// up to explainBaselineNodes candidates) and, for GPU pods, the device
// choice. Reserve runs on the scheduling cycle's path, like PreScore.
func BenchmarkReserve(b *testing.B) {
	const n = 5000
	tgt, err := LoadTarget(DefaultTargetWorkload, DefaultTargetThreshold)
	if err != nil {
		b.Fatal(err)
	}
	nodes := randomSnapshot(rand.New(rand.NewPCG(n, 1)), n)
	p := newTestPlugin(b, &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, tgt)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		spec sim.PodSpec
	}{
		{"cpu-pod", sim.PodSpec{Name: "bench", CPU: 2000, Memory: 4096}},
		{"gpu-share-pod", sim.PodSpec{Name: "bench", CPU: 2000, Memory: 4096, GPUs: 1, GPUMilli: 300}},
	} {
		pod := k8sPod(c.spec)
		feasible := feasibleNodes(p, pod, nodes)
		best, cs, _ := explainedCycle(b, p, pod, feasible)
		runtime.GC()
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			defer plugintest.ReportCPU(b)()
			for b.Loop() {
				if st := p.Reserve(ctx, cs, pod, best); !st.IsSuccess() {
					b.Fatal(st)
				}
				p.Unreserve(ctx, cs, pod, best)
			}
		})
	}
}

// feasibleNodes is the nodes pod fits, as upstream filters and ours would
// leave them.
func feasibleNodes(p *EdgePolicy, pod *v1.Pod, nodes []fwk.NodeInfo) []fwk.NodeInfo {
	ctx := context.Background()
	var feasible []fwk.NodeInfo
	cs := framework.NewCycleState()
	_, st := p.PreFilter(ctx, cs, pod, nodes)
	for _, ni := range nodes {
		if fitsCPUMem(pod, ni) && (st.Code() == fwk.Skip || p.Filter(ctx, cs, pod, ni).IsSuccess()) {
			feasible = append(feasible, ni)
		}
	}
	return feasible
}

// shapeKey is what tells the benchmark's pod shapes apart (the fields
// it draws; the score cache keys on these and more).
type shapeKey struct {
	cpu, mem int64
	gpus     int32
	milli    int64
	qos      sim.QoS
	priority int32
}

// BenchmarkCycleDependencies is issue 19's lookup cost in the Score
// pass: 1,000 nodes in 10 zones running pods of 60 services (a random
// call tree plus 30 calls), the site leader's graph and embeddings with
// partners installed, and one pod's PreScore, Score on every node and
// NormalizeScore per cycle, after a pod of another service was bound (so
// the placement of the pod's neighbours changed and every node is
// scored again, the worst case). edge-loaded reads the one-hop
// dependency features, edge-sage dep_affinity from the partners
// instead; "no-partners" is edge-sage with embeddings of another
// encoder (dep_affinity 0). ns/node compares them in one run.
func BenchmarkCycleDependencies(b *testing.B) {
	tgt, err := LoadTarget(DefaultTargetWorkload, DefaultTargetThreshold)
	if err != nil {
		b.Fatal(err)
	}
	const n, services, zones = 1000, 60, 10
	rng := rand.New(rand.NewPCG(19, 1))
	svc := func(i int) string { return fmt.Sprintf("svc-%02d", i) }
	var edges []kubefmt.DependencyEdge
	for i := 1; i < services; i++ {
		edges = append(edges, kubefmt.DependencyEdge{From: svc(rng.IntN(i)), To: svc(i), CallsPerSecond: float64(1 + rng.IntN(100))})
	}
	for len(edges) < services-1+30 {
		a, c := rng.IntN(services), rng.IntN(services)
		if a < c && !slices.ContainsFunc(edges, func(e kubefmt.DependencyEdge) bool { return e.From == svc(a) && e.To == svc(c) }) {
			edges = append(edges, kubefmt.DependencyEdge{From: svc(a), To: svc(c), CallsPerSecond: float64(1 + rng.IntN(100))})
		}
	}
	_, graph := plugintest.GraphOf(b, edges...)
	pub := plugintest.EmbeddingsOf(b, edges...)
	withPartners, err := pub.Encode()
	if err != nil {
		b.Fatal(err)
	}
	pub.Encoder = "sage-0123456789abcdef"
	otherEncoder, err := pub.Encode()
	if err != nil {
		b.Fatal(err)
	}
	servicePod := func(name string, s int) *v1.Pod {
		p := k8sPod(sim.PodSpec{Name: name, CPU: int64(100 + rng.IntN(1000)), Memory: 512, QoS: sim.QoSBurstable})
		p.Labels = map[string]string{kubefmt.LabelService: svc(s)}
		return p
	}
	var nodes []fwk.NodeInfo
	for i := range n {
		spec := sim.NodeSpec{Name: fmt.Sprintf("n%04d", i), CPU: 16000, Memory: 65536, Arch: sim.ArchAMD64, Zone: fmt.Sprintf("z%d", i%zones)}
		var pods []*v1.Pod
		for j := range rng.IntN(4) {
			pods = append(pods, servicePod(fmt.Sprintf("%s-p%d", spec.Name, j), rng.IntN(services)))
		}
		nodes = append(nodes, nodeInfo(k8sNode(spec), pods...))
	}
	for i, c := range []struct {
		name, model string
		side        []byte
	}{
		{"edge-loaded", "edge-loaded", withPartners},
		{"edge-sage", "edge-sage", withPartners},
		{"edge-sage/no-partners", "edge-sage", otherEncoder},
	} {
		p := newTestPlugin(b, &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, tgt)
		installEdgeModel(b, p, c.model, uint64(2+i))
		if _, err := p.core.Dependencies().InstallWith(graph, c.side); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("nodes=%d/%s", n, c.name), func(b *testing.B) {
			b.ReportAllocs()
			list := nameList(nodes)
			scoreCycle(b, p, servicePod("bench-0", 0), nodes, list)
			runtime.GC()
			bound := 0
			for b.Loop() {
				b.StopTimer()
				ni := nodes[bound%len(nodes)].(*framework.NodeInfo)
				ni.AddPod(servicePod(fmt.Sprintf("bound-%d-%d", i, bound), bound%services))
				bound++
				b.StartTimer()
				scoreCycle(b, p, servicePod(fmt.Sprintf("bench-%d", bound), (bound*7)%services), nodes, list)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/node")
		})
	}
}
