package edgeplugin

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/policy"
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
	p := newTestPlugin(t, &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, tgt)
	hits0, _ := plugintest.CounterValue("edgesched_plugin_score_cache_total", map[string]string{"result": "hit"})
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
		q := newTestPlugin(t, &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, tgt)
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
	hits, _ := plugintest.CounterValue("edgesched_plugin_score_cache_total", map[string]string{"result": "hit"})
	// 40 cycles of up to 60 candidates; every cycle but a pod's first
	// with its key re-scores only the bound node: well over 200 hits.
	if hits-hits0 < 200 {
		t.Fatalf("only %v cache hits: the stream did not exercise the cache", hits-hits0)
	}
	t.Logf("%v cache hits over 40 cycles", hits-hits0)
}

// TestScoreCacheTelemetrySteps moves every node's measured run queue by
// many telemetry steps (20 µs to 20 ms) while its CPU use and its pods stay
// the same. A model whose int8 network reads no telemetry feature (the
// test model, quantized from the shipped "default") scores the same
// whatever the steps, so the second cycle must be served from the cache
// entirely; a scorer that cannot tell what it reads (installed without
// its network) must be re-scored on every node. Both must give the
// scores a fresh plugin computes.
func TestScoreCacheTelemetrySteps(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opaque    bool // install a scorer without its int8 net
		wantHits  float64
		wantMiss  float64
		telemetry bool // the model reads telemetry, as the view must then assume
	}{
		{name: "int8 net without telemetry inputs", wantHits: 2, wantMiss: 0},
		{name: "scorer that cannot tell", opaque: true, wantHits: 0, wantMiss: 2, telemetry: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTelFixture(t)
			if tc.opaque {
				net := testNet(t)
				h := testArtifact(t).Header
				h.Version = 2
				if _, err := f.p.Models().InstallUnverified(h, func() policy.Scorer { return net.Scorer() }); err != nil {
					t.Fatal(err)
				}
			}
			if got := f.p.Models().Current().ReadsTelemetry(); got != tc.telemetry {
				t.Fatalf("model reads telemetry: %v, want %v", got, tc.telemetry)
			}
			// the shipped default model leaves the architecture shares out
			// too; a scorer that cannot tell is assumed to read them
			if got := f.p.Models().Current().ReadsArch(); got != tc.telemetry {
				t.Fatalf("model reads the architecture shares: %v, want %v", got, tc.telemetry)
			}
			if got := f.p.Models().Current().ReadsEmission(); got != tc.telemetry {
				t.Fatalf("model reads emission: %v, want %v", got, tc.telemetry)
			}
			for i := range f.infos {
				f.setAnnotation(i, encodeMeasured(t, 0.4, 20, f.now.Add(-10*time.Second)))
			}
			f.cycle(t)
			for i := range f.infos {
				f.setAnnotation(i, encodeMeasured(t, 0.4, 20_000, f.now.Add(-5*time.Second)))
			}
			hits0, _ := plugintest.CounterValue("edgesched_plugin_score_cache_total", map[string]string{"result": "hit"})
			miss0, _ := plugintest.CounterValue("edgesched_plugin_score_cache_total", map[string]string{"result": "miss"})
			norm, raw, _ := f.cycle(t)
			hits, _ := plugintest.CounterValue("edgesched_plugin_score_cache_total", map[string]string{"result": "hit"})
			miss, _ := plugintest.CounterValue("edgesched_plugin_score_cache_total", map[string]string{"result": "miss"})
			if hits-hits0 != tc.wantHits || miss-miss0 != tc.wantMiss {
				t.Errorf("second cycle: %v hits and %v misses, want %v and %v", hits-hits0, miss-miss0, tc.wantHits, tc.wantMiss)
			}
			// a fresh plugin on the same nodes and model computes the same
			g := &telFixture{now: f.now, infos: f.infos, nodes: f.nodes}
			g.p = newTestPluginWith(t, &fakeHandle{Lister: &fakeLister{Nodes: f.nodes}}, f.p.core.Target(), f.p.Models())
			g.p.core.SetClock(func() time.Time { return g.now })
			wantNorm, wantRaw, _ := g.cycle(t)
			if fmt.Sprint(norm, raw) != fmt.Sprint(wantNorm, wantRaw) {
				t.Errorf("cached scores %v %v, fresh %v %v", norm, raw, wantNorm, wantRaw)
			}
		})
	}
}

// TestScoreCacheManyShapes scores 100 distinct pod shapes twice over on an
// unchanged snapshot: the second pass must be served from the cache
// entirely (the first version kept 32 keys and started over on the 33rd,
// so it missed every node of every pod here).
func TestScoreCacheManyShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	tgt, err := LoadTarget(DefaultTargetWorkload, DefaultTargetThreshold)
	if err != nil {
		t.Fatal(err)
	}
	nodes := randomSnapshot(rng, 40)
	p := newTestPlugin(t, &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, tgt)
	var pods []sim.PodSpec
	for i := range 100 {
		pods = append(pods, sim.PodSpec{Name: fmt.Sprintf("shape-%d", i), CPU: int64(100 * (1 + i)), Memory: 512})
	}
	for _, ps := range pods {
		runCycle(t, p, k8sPod(ps), nodes)
	}
	hits0, _ := plugintest.CounterValue("edgesched_plugin_score_cache_total", map[string]string{"result": "hit"})
	miss0, _ := plugintest.CounterValue("edgesched_plugin_score_cache_total", map[string]string{"result": "miss"})
	for _, ps := range pods {
		runCycle(t, p, k8sPod(ps), nodes)
	}
	hits, _ := plugintest.CounterValue("edgesched_plugin_score_cache_total", map[string]string{"result": "hit"})
	miss, _ := plugintest.CounterValue("edgesched_plugin_score_cache_total", map[string]string{"result": "miss"})
	if miss != miss0 || hits == hits0 {
		t.Errorf("second pass over 100 shapes: %v hits, %v misses; want only hits", hits-hits0, miss-miss0)
	}
}
