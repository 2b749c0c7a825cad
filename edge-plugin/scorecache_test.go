package edgeplugin

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"k8s.io/component-base/metrics/testutil"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/edgesched/edgesched/sim"
)

// TestScoreCacheMatchesFresh runs a stream of pods (CPU pods and GPU
// shares, with QoS classes, priorities and repeats, so that pods share a
// request but differ in features) through one plugin, binding each to its
// best node as a scheduler would, and after every cycle scores the same
// pod with a new plugin (empty caches) on the same snapshot: the raw and
// the normalised scores of every node must be identical, and the stream
// must have been served mostly from the cache (else it tested nothing).
func TestScoreCacheMatchesFresh(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 4))
	tgt, err := LoadTarget(DefaultTargetWorkload, DefaultTargetThreshold)
	if err != nil {
		t.Fatal(err)
	}
	nodes := randomSnapshot(rng, 60)
	p := newTestPlugin(t, &fakeHandle{lister: &fakeLister{nodes: nodes}}, tgt)
	hits0, _ := testutil.GetCounterMetricValue(metricScoreCache.WithLabelValues("hit"))
	qos := []sim.QoS{sim.QoSLS, sim.QoSBurstable, sim.QoSBE}
	var prev sim.PodSpec
	for step := range 40 {
		ps := sim.PodSpec{Name: fmt.Sprintf("s%d", step), CPU: int64(500 * (1 + rng.IntN(3))), Memory: 1024,
			QoS: qos[rng.IntN(len(qos))], Priority: int32(rng.IntN(3) * 500)}
		if rng.IntN(3) == 0 {
			ps.GPUs, ps.GPUMilli = 1, int64(250*(1+rng.IntN(3)))
		}
		if step%5 == 4 { // the same pod again, nothing else changed but a bind
			ps = prev
			ps.Name = fmt.Sprintf("s%d", step)
		}
		prev = ps
		pod := k8sPod(ps)
		got, cs := runCycle(t, p, pod, nodes)
		q := newTestPlugin(t, &fakeHandle{lister: &fakeLister{nodes: nodes}}, tgt)
		want, qcs := runCycle(t, q, pod, nodes)
		gotNames, gotRaw, _ := scoredCandidates(t, p, cs)
		wantNames, wantRaw, _ := scoredCandidates(t, q, qcs)
		if fmt.Sprint(gotNames) != fmt.Sprint(wantNames) || fmt.Sprint(gotRaw) != fmt.Sprint(wantRaw) {
			t.Fatalf("step %d (%+v): cached raw scores\n%v %v\nfresh\n%v %v", step, ps, gotNames, gotRaw, wantNames, wantRaw)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("step %d: normalised scores %v, fresh %v", step, got, want)
		}
		best := ""
		for _, s := range got {
			if s.Score == 100 {
				best = s.Name
				break
			}
		}
		for _, ni := range nodes {
			if ni.Node().Name == best {
				bound := pod.DeepCopy()
				bound.Spec.NodeName = best
				ni.(*framework.NodeInfo).AddPod(bound)
			}
		}
	}
	hits, _ := testutil.GetCounterMetricValue(metricScoreCache.WithLabelValues("hit"))
	// 40 cycles of up to 60 candidates; every cycle but a pod's first
	// with its key re-scores only the bound node: well over 200 hits.
	if hits-hits0 < 200 {
		t.Fatalf("only %v cache hits: the stream did not exercise the cache", hits-hits0)
	}
	t.Logf("%v cache hits over 40 cycles", hits-hits0)
}
