package edgeplugin

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/edgesched/edgesched/sim"
)

// BenchmarkCycle measures one pod's PreScore (snapshot conversion,
// features, int8 policy over every node) plus Score for every node, per
// node. cpu-pod and gpu-share-pod run on an unchanged snapshot (node
// conversions, the environment and every node's score come from the
// caches); after-bind binds a pod to another node before each cycle, as a
// scheduler does between two cycles (that node is converted again and
// re-scored: one feature extraction and forward pass); convert-only is the
// snapshot conversion alone.
func BenchmarkCycle(b *testing.B) {
	tgt, err := LoadTarget(DefaultTargetWorkload, DefaultTargetThreshold)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{100, 1000, 5000} {
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		nodes := randomSnapshot(rng, n)
		p := newTestPlugin(b, &fakeHandle{lister: &fakeLister{nodes: nodes}}, tgt)
		ctx := context.Background()
		for _, phase := range []string{"cpu-pod", "gpu-share-pod", "after-bind", "convert-only"} {
			pod := k8sPod(sim.PodSpec{Name: "bench", CPU: 2000, Memory: 4096})
			if phase == "gpu-share-pod" {
				pod = k8sPod(sim.PodSpec{Name: "bench", CPU: 2000, Memory: 4096, GPUs: 1, GPUMilli: 300})
			}
			// the feasible nodes, as upstream filters and ours would leave them
			var feasible []fwk.NodeInfo
			cs0 := framework.NewCycleState()
			_, st0 := p.PreFilter(ctx, cs0, pod, nodes)
			for _, ni := range nodes {
				if fitsCPUMem(pod, ni) && (st0.Code() == fwk.Skip || p.Filter(ctx, cs0, pod, ni).IsSuccess()) {
					feasible = append(feasible, ni)
				}
			}
			b.Run(fmt.Sprintf("nodes=%d/%s", n, phase), func(b *testing.B) {
				panics, _ := testutil.GetCounterMetricValue(metricPanics)
				defer func() {
					if after, _ := testutil.GetCounterMetricValue(metricPanics); after != panics {
						b.Fatalf("%v panics during the benchmark", after-panics)
					}
				}()
				b.ReportAllocs()
				bound := 0
				for b.Loop() {
					if phase == "after-bind" {
						// bind a small pod to the next node (the snapshot
						// object changes in place, its generation moves on)
						ni := feasible[bound%len(feasible)].(*framework.NodeInfo)
						ni.AddPod(k8sPod(sim.PodSpec{Name: fmt.Sprintf("bound-%d", bound), CPU: 1, Memory: 1}))
						bound++
					}
					if phase == "convert-only" {
						if err := p.conv.withView(nodes, func(*view) error { return nil }); err != nil {
							b.Fatal(err)
						}
						continue
					}
					cs := framework.NewCycleState()
					if st := p.PreScore(ctx, cs, pod, feasible); !st.IsSuccess() {
						b.Fatal(st)
					}
					for _, ni := range feasible {
						if _, st := p.Score(ctx, cs, pod, ni); !st.IsSuccess() {
							b.Fatal(st)
						}
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/node")
				b.ReportMetric(float64(len(feasible)), "feasible")
			})
		}
	}
}
