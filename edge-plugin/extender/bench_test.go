package extender

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/sim"
	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// BenchmarkExtender measures the extender's prioritize and filter verbs
// at 5,000 nodes as a nodeCacheCapable scheduler calls them (node names
// in the request, Nodes and pods from the cluster source, which lists its
// nodes in no fixed order as an informer's store does), per pod, without
// HTTP and JSON.
func BenchmarkExtender(b *testing.B) {
	const n = 5000
	tgt, err := edgeplugin.LoadTarget(edgeplugin.DefaultTargetWorkload, edgeplugin.DefaultTargetThreshold)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(n, 2))
	var nodes []*v1.Node
	var pods []*v1.Pod
	var names []string
	for i, ni := range randomSnapshot(rng, n) {
		node := ni.Node().DeepCopy()
		node.ResourceVersion = fmt.Sprint(i + 1)
		nodes, names = append(nodes, node), append(names, node.Name)
		for _, pi := range ni.GetPods() {
			p := pi.GetPod().DeepCopy()
			p.Spec.NodeName, p.ResourceVersion = node.Name, "1"
			pods = append(pods, p)
		}
	}
	t0 := time.Unix(1e9, 0)
	ext := New(newTestPlugin(b, nil, tgt), NewStaticSource(nodes, pods...), Options{Now: func() time.Time { return t0 }})
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		spec     sim.PodSpec
		inFlight int // pods the bind verb bound that the source does not show yet
	}{
		{"prioritize/cpu-pod", sim.PodSpec{Name: "bench", CPU: 2000, Memory: 4096}, 0},
		{"prioritize/gpu-share-pod", sim.PodSpec{Name: "bench", CPU: 2000, Memory: 4096, GPUs: 1, GPUMilli: 300}, 0},
		{"filter/gpu-share-pod", sim.PodSpec{Name: "bench", CPU: 2000, Memory: 4096, GPUs: 1, GPUMilli: 300}, 0},
		{"prioritize/cpu-pod-200-binding", sim.PodSpec{Name: "bench", CPU: 2000, Memory: 4096}, 200},
	} {
		for i := range c.inFlight {
			bound := k8sPod(sim.PodSpec{Name: fmt.Sprintf("bound-%d", i), CPU: 10, Memory: 10})
			bound.ResourceVersion = "1" // as the scheduler sends it
			ext.assume(bound, names[rng.IntN(n)], nil)
		}
		pod := k8sPod(c.spec)
		args := &extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names}
		call := func() int {
			if strings.HasPrefix(c.name, "filter/") {
				return len(*ext.Filter(ctx, args).NodeNames)
			}
			return len(*ext.Prioritize(ctx, args))
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			call()
			runtime.GC()
			defer plugintest.ReportCPU(b)()
			for b.Loop() {
				call()
			}
			b.ReportMetric(float64(call()), "nodes")
		})
	}
}
