package edgeplugin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	kubeconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	kubescheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/edgesched/edgesched/edge-plugin/apis/config"
	configv1 "github.com/edgesched/edgesched/edge-plugin/apis/config/v1"
	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/edge-plugin/serving"
	"github.com/edgesched/edgesched/edge-plugin/sources"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/sim"
)

func TestFilter(t *testing.T) {
	p := newTestPlugin(t, nil, sim.NewTargetWorkload(nil, 0.95))
	t4 := gpuNode("t4", "T4", 2)
	// a pod holding 700 of device 0 and one holding device 1 whole
	holder := func(name, dev string, s sim.PodSpec) *v1.Pod {
		pod := k8sPod(s)
		pod.Name = name
		pod.Annotations[AnnotationGPUDevices] = dev
		return pod
	}
	share700 := holder("h1", "0", sim.PodSpec{Name: "h1", CPU: 1000, Memory: 1024, GPUs: 1, GPUMilli: 700})
	whole := holder("h2", "1", sim.PodSpec{Name: "h2", CPU: 1000, Memory: 1024, GPUs: 1, GPUMilli: 1000})
	cases := []struct {
		name  string
		pod   sim.PodSpec
		node  sim.NodeSpec
		held  []*v1.Pod
		code  fwk.Code
		why   string
		skips bool
	}{
		{name: "cpu pod skips", pod: sim.PodSpec{Name: "a", CPU: 100, Memory: 10}, node: t4, skips: true},
		{name: "fits share", pod: sim.PodSpec{Name: "a", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 300}, node: t4, held: []*v1.Pod{share700, whole}, code: fwk.Success},
		{name: "share does not fit", pod: sim.PodSpec{Name: "a", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 400}, node: t4, held: []*v1.Pod{share700, whole}, code: fwk.Unschedulable, why: ReasonGPUShare},
		{name: "whole gpu fits", pod: sim.PodSpec{Name: "a", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 1000}, node: t4, held: []*v1.Pod{share700}, code: fwk.Success},
		{name: "no whole gpu left", pod: sim.PodSpec{Name: "a", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 1000}, node: t4, held: []*v1.Pod{share700, whole}, code: fwk.Unschedulable, why: ReasonGPUAllocated},
		{name: "too many gpus", pod: sim.PodSpec{Name: "a", CPU: 100, Memory: 10, GPUs: 4, GPUMilli: 1000}, node: t4, code: fwk.UnschedulableAndUnresolvable, why: ReasonGPUAllocated},
		{name: "model accepted", pod: sim.PodSpec{Name: "a", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 500, GPUSpec: []string{"V100M16", "T4"}}, node: t4, code: fwk.Success},
		{name: "model mismatch", pod: sim.PodSpec{Name: "a", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 500, GPUSpec: []string{"A100"}}, node: t4, code: fwk.UnschedulableAndUnresolvable, why: ReasonGPUModel},
		{name: "cpu-only node", pod: sim.PodSpec{Name: "a", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 500}, node: sim.NodeSpec{Name: "c", CPU: 8000, Memory: 8192, Arch: sim.ArchARM64}, code: fwk.UnschedulableAndUnresolvable, why: ReasonNoGPU},
		{name: "unannotated holders are derived", pod: sim.PodSpec{Name: "a", CPU: 100, Memory: 10, GPUs: 2, GPUMilli: 1000}, node: t4,
			held: []*v1.Pod{k8sPod(sim.PodSpec{Name: "x", CPU: 1, Memory: 1, GPUs: 1, GPUMilli: 100})}, code: fwk.Unschedulable, why: ReasonGPUAllocated},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := framework.NewCycleState()
			pod := k8sPod(c.pod)
			ni := nodeInfo(k8sNode(c.node), c.held...)
			_, st := p.PreFilter(context.Background(), cs, pod, []fwk.NodeInfo{ni})
			if c.skips {
				if st.Code() != fwk.Skip {
					t.Fatalf("PreFilter = %v, want Skip", st)
				}
				return
			}
			if !st.IsSuccess() {
				t.Fatalf("PreFilter = %v", st)
			}
			got := p.Filter(context.Background(), cs, pod, ni)
			if got.Code() != c.code || (c.why != "" && got.Message() != c.why) {
				t.Fatalf("Filter = %v (%q), want %v %q", got.Code(), got.Message(), c.code, c.why)
			}
		})
	}
}

func TestPreFilterBadRequest(t *testing.T) {
	p := newTestPlugin(t, nil, sim.NewTargetWorkload(nil, 0.95))
	for _, ann := range []map[string]string{
		{AnnotationGPUMilli: "1500"},
		{AnnotationGPUMilli: "x"},
		{AnnotationGPUModels: "T4"}, // models without a GPU request
	} {
		pod := k8sPod(sim.PodSpec{Name: "a", CPU: 1, Memory: 1})
		for k, v := range ann {
			pod.Annotations[k] = v
		}
		_, st := p.PreFilter(context.Background(), framework.NewCycleState(), pod, nil)
		if st.Code() != fwk.UnschedulableAndUnresolvable {
			t.Errorf("%v: PreFilter = %v, want UnschedulableAndUnresolvable", ann, st)
		}
	}
}

func TestScoreRangeProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := range 20 {
		nodes := randomSnapshot(rng, 5+rng.IntN(60))
		p := newTestPlugin(t, &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, sim.NewTargetWorkload(nil, 0.95))
		if trial%2 == 0 {
			tgt, err := LoadTarget(DefaultTargetWorkload, DefaultTargetThreshold)
			if err != nil {
				t.Fatal(err)
			}
			p = newTestPlugin(t, &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, tgt)
		}
		for k := range 10 {
			ps := sim.PodSpec{Name: fmt.Sprintf("q%d", k), CPU: int64(rng.IntN(8000)), Memory: int64(rng.IntN(16000))}
			if rng.IntN(2) == 0 {
				ps.GPUs, ps.GPUMilli = 1, int64(50+rng.IntN(951))
				if rng.IntN(3) == 0 {
					ps.GPUs, ps.GPUMilli = int(1+rng.IntN(4)), 1000
				}
			}
			scores, _ := runCycle(t, p, k8sPod(ps), nodes)
			top := 0
			for _, s := range scores {
				if s.Score < fwk.MinNodeScore || s.Score > fwk.MaxNodeScore {
					t.Fatalf("score %d of %s out of range", s.Score, s.Name)
				}
				if s.Score == fwk.MaxNodeScore {
					top++
				}
			}
			if len(scores) > 0 && top == 0 {
				t.Fatalf("no node got MaxNodeScore among %d", len(scores))
			}
		}
	}
}

func TestNormalize(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct {
		name string
		raw  []float64
		want []int64
	}{
		// span 2, scale 99/2: (2-1)*49.5 = 49.5 -> 49; the two best 100;
		// NaN lowest
		{"linear", []float64{1, 3, 3, 2, nanF()}, []int64{0, 100, 100, 49, 0}},
		// 2.999 is (2.999-1)*49.5 = 98.95 -> 98, never the best's 100
		{"just below the best", []float64{1, 3, 2.999}, []int64{0, 100, 98}},
		// within the tie tolerance (1e-9 of the best) counts as the best
		{"tie", []float64{3, 3 - 1e-12, 1}, []int64{100, 100, 0}},
		{"all equal", []float64{5, 5, 5}, []int64{100, 100, 100}},
		// an infinite span has no linear scale: the rest score 0
		{"-Inf", []float64{-inf, 1, 2}, []int64{0, 0, 100}},
		{"+Inf best", []float64{inf, 1, inf}, []int64{100, 0, 100}},
		{"only NaN", []float64{nanF(), nanF()}, []int64{0, 0}},
		{"negative", []float64{-4, -2, -3}, []int64{0, 100, 49}},
	} {
		got := serving.Normalize(c.raw)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: serving.Normalize(%v) = %v, want %v", c.name, c.raw, got, c.want)
		}
	}
}

func nanF() float64 { z := 0.0; return z / z }

type panicScorer struct{}

func (panicScorer) Scores([]float32, int, []float32) error { panic("boom") }

// TestNormalizeScoreOrder checks that NormalizeScore fills in the scores
// PreScore computed: Score alone returns 0, the framework's list in
// PreScore's order gets the scores by position, and a list in any other
// order (reversed, or a part of it) gets the same scores by name. The
// reference is scoreOf, which maps names through the view's index, not
// positions.
func TestNormalizeScoreOrder(t *testing.T) {
	ctx := context.Background()
	tgt, err := LoadTarget(DefaultTargetWorkload, DefaultTargetThreshold)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	nodes := randomSnapshot(rng, 40)
	p := newTestPlugin(t, &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, tgt)
	pod := k8sPod(sim.PodSpec{Name: "o", CPU: 1000, Memory: 2048})
	scores, cs := runCycle(t, p, pod, nodes)
	ps := readPreScore(cs)
	if ps.ByPos == nil {
		t.Fatal("the cycle scored by name, not by position")
	}
	distinct := map[int64]bool{}
	for _, s := range scores {
		want, _ := ps.ScoreOf(s.Name)
		if s.Score != want {
			t.Errorf("%s: %d by position, %d by name", s.Name, s.Score, want)
		}
		distinct[s.Score] = true
	}
	if len(distinct) < 3 {
		t.Fatalf("only %d distinct scores: the test cannot tell positions apart", len(distinct))
	}
	for _, ni := range nodes[:3] {
		if s, _ := p.Score(ctx, cs, pod, ni); s != 0 {
			t.Errorf("Score alone = %d, want 0 (NormalizeScore fills it in)", s)
		}
	}
	reversed := slices.Clone(scores)
	slices.Reverse(reversed)
	for name, list := range map[string]fwk.NodeScoreList{
		"reversed": reversed,
		"a part":   slices.Clone(scores[3:9]),
	} {
		for i := range list {
			list[i].Score = 0
		}
		if st := p.NormalizeScore(ctx, cs, pod, list); !st.IsSuccess() {
			t.Fatal(st)
		}
		for _, s := range list {
			if want, _ := ps.ScoreOf(s.Name); s.Score != want {
				t.Errorf("%s: %s scored %d, want %d", name, s.Name, s.Score, want)
			}
		}
	}
}

func TestPanicContained(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	nodes := randomSnapshot(rng, 20)
	p := newTestPlugin(t, &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, sim.NewTargetWorkload(nil, 0.95))
	h := p.Models().Current().Header
	h.Version++
	h.ModelID = "panicking"
	if ok, err := p.Models().InstallUnverified(h, func() policy.Scorer { return panicScorer{} }); !ok || err != nil {
		t.Fatal(ok, err)
	}
	before, _ := plugintest.CounterValue("edgesched_plugin_panics_total", nil)
	fb, _ := plugintest.CounterValue("edgesched_plugin_fallbacks_total", map[string]string{"reason": "panic"})
	scores, _ := runCycle(t, p, k8sPod(sim.PodSpec{Name: "a", CPU: 100, Memory: 100}), nodes)
	for _, s := range scores {
		if s.Score != 0 {
			t.Fatalf("score %d after a panic, want 0", s.Score)
		}
	}
	after, _ := plugintest.CounterValue("edgesched_plugin_panics_total", nil)
	fa, _ := plugintest.CounterValue("edgesched_plugin_fallbacks_total", map[string]string{"reason": "panic"})
	if after != before+1 || fa != fb+1 {
		t.Fatalf("panics %v -> %v, fallbacks %v -> %v; want +1 each", before, after, fb, fa)
	}
}

func TestNoModelScoresNeutral(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 2))
	nodes := randomSnapshot(rng, 10)
	a := Args{ModelPath: "x", ModelKeys: []string{"x"}}
	configv1.SetDefaults_EdgePolicyArgs(&a)
	p := NewWithModels(&fakeHandle{Lister: &fakeLister{Nodes: nodes}}, a, sources.NewModelStore(&quant.Keyring{}), sim.NewTargetWorkload(nil, 0.95))
	scores, _ := runCycle(t, p, k8sPod(sim.PodSpec{Name: "a", CPU: 100, Memory: 100}), nodes)
	for _, s := range scores {
		if s.Score != 0 {
			t.Fatalf("score %d without a model", s.Score)
		}
	}
}

func TestHotSwapRace(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	nodes := randomSnapshot(rng, 30)
	p := newTestPlugin(t, &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, sim.NewTargetWorkload(nil, 0.95))
	s := testSigner(t, 1)
	blobs := make([][]byte, 30)
	for i := range blobs {
		blobs[i] = encodeVersion(t, s, uint64(i+2))
	}
	var stop atomic.Bool
	var cycles atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for k := 0; !stop.Load(); k++ {
				cycles.Add(1)
				pod := k8sPod(sim.PodSpec{Name: fmt.Sprintf("w%d-%d", w, k), CPU: 500, Memory: 512, GPUs: 1, GPUMilli: 250})
				scores, _ := runCycle(t, p, pod, nodes)
				for _, sc := range scores {
					if sc.Score < 0 || sc.Score > fwk.MaxNodeScore {
						t.Errorf("score %d out of range", sc.Score)
					}
				}
			}
		})
	}
	for _, b := range blobs {
		if ok, err := p.Models().Install(b); !ok || err != nil {
			t.Errorf("install: %v %v", ok, err)
		}
		// let a few cycles run on this model before the next swap
		for target := cycles.Load() + 3; cycles.Load() < target; {
			time.Sleep(50 * time.Microsecond)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d scoring cycles across %d swaps", cycles.Load(), len(blobs))
	if v := p.Models().Current().Header.Version; v != 31 {
		t.Fatalf("version %d after swaps, want 31", v)
	}
}

func TestModelRefusals(t *testing.T) {
	s := testSigner(t, 1)
	other := testSigner(t, 99)
	store := sources.NewModelStore(testKeyring(t, s))
	if ok, err := store.Install(encodeVersion(t, s, 5)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	good := store.Current()
	refused := func(reason string) float64 {
		v := plugintest.Counter(t, "edgesched_plugin_model_refusals_total", map[string]string{"reason": reason})
		return v
	}
	tampered := encodeVersion(t, s, 6)
	tampered[len(tampered)-100] ^= 1
	cases := []struct {
		name   string
		raw    []byte
		reason string
		is     error
	}{
		{"untrusted key", encodeVersion(t, other, 6), sources.RefuseSignature, quant.ErrUnknownKey},
		{"tampered", tampered, sources.RefuseSignature, quant.ErrSignature},
		{"older version", encodeVersion(t, s, 4), sources.RefuseRollback, quant.ErrRollback},
		{"garbage", []byte("not a model"), sources.RefuseArtifact, quant.ErrArtifact},
	}
	for _, c := range cases {
		before := refused(c.reason)
		ok, err := store.Install(c.raw)
		if ok || err == nil || !errors.Is(err, c.is) {
			t.Errorf("%s: Install = %v, %v; want refusal wrapping %v", c.name, ok, err, c.is)
		}
		if got := refused(c.reason); got != before+1 {
			t.Errorf("%s: refusals{%s} %v -> %v", c.name, c.reason, before, got)
		}
		if store.Current() != good {
			t.Fatalf("%s: the previous model was replaced", c.name)
		}
	}
	// the same model again is a no-op; a newer one swaps
	if ok, err := store.Install(encodeVersion(t, s, 5)); ok || err != nil {
		t.Fatalf("same model: %v %v", ok, err)
	}
	if ok, err := store.Install(encodeVersion(t, s, 6)); !ok || err != nil {
		t.Fatalf("newer model: %v %v", ok, err)
	}
}

func TestLoadFileAndArgs(t *testing.T) {
	dir := t.TempDir()
	s := testSigner(t, 1)
	_, pub, err := quant.WriteKeyPair(dir, "test", s)
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, dir, "model.esa", encodeVersion(t, s, 3))
	raw := fmt.Sprintf(`{"modelPath":%q,"modelKeys":[%q],"reloadInterval":"2s"}`, path, pub)
	pl, err := New(t.Context(), &runtime.Unknown{Raw: []byte(raw), ContentType: runtime.ContentTypeJSON}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := pl.(*EdgePolicy)
	if m := p.Models().Current(); m == nil || m.Header.Version != 3 {
		t.Fatalf("model not loaded at start: %+v", m)
	}
	// a rewrite with a newer version is picked up by LoadFile
	writeFile(t, dir, "model.esa", encodeVersion(t, s, 4))
	if ok, err := p.Models().LoadFile(path); !ok || err != nil {
		t.Fatalf("reload: %v %v", ok, err)
	}
	for _, bad := range []string{
		`{}`,
		`{"modelPath":"m"}`,
		`{"modelPath":"m","modelKeys":["k"],"reloadInterval":"10ms"}`,
		`{"modelPath":"m","modelKeys":["k"],"targetThreshold":2}`,
		`{"modelPath":"m","modelKeys":["k"],"unknownField":1}`,
		`{"modelPath":"m","modelKeys":["k"],"publicKeys":["k"]}`,
	} {
		if _, err := DecodeArgs(&runtime.Unknown{Raw: []byte(bad)}); !errors.Is(err, ErrArgs) {
			t.Errorf("DecodeArgs(%s) = %v, want ErrArgs", bad, err)
		}
	}
	a, err := DecodeArgs(&runtime.Unknown{Raw: []byte("modelPath: m\nmodelKeys: [k]\n"), ContentType: runtime.ContentTypeYAML})
	if err != nil || a.ReloadInterval.Duration != DefaultReloadInterval || a.TargetWorkload != DefaultTargetWorkload || *a.TargetThreshold != DefaultTargetThreshold {
		t.Fatalf("defaults: %+v %v", a, err)
	}
	// the deprecated publicKeys: read as modelKeys, with a warning
	a, warnings, err := decodeArgs(&runtime.Unknown{Raw: []byte("modelPath: m\npublicKeys: [k]\n"), ContentType: runtime.ContentTypeYAML})
	if err != nil || !slices.Equal(a.ModelKeys, []string{"k"}) || a.PublicKeys != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "use modelKeys") {
		t.Fatalf("publicKeys: %+v %v %v", a, warnings, err)
	}
}

// TestArgsFromKubeScheduler: the args as kube-scheduler hands them to New
// (decoded from a KubeSchedulerConfiguration through its scheme, defaulted,
// converted to the internal type) are validated as the versioned ones:
// the deprecated publicKeys still warns, and a missing key is refused.
func TestArgsFromKubeScheduler(t *testing.T) {
	for _, tc := range []struct {
		name, args string
		warn       bool
		err        string
	}{
		{"modelKeys", "modelPath: m\n      modelKeys: [k]", false, ""},
		{"deprecated publicKeys", "modelPath: m\n      publicKeys: [k]", true, ""},
		{"both names", "modelPath: m\n      modelKeys: [k]\n      publicKeys: [j]", true, "publicKeys: Forbidden"},
		{"no keys", "modelPath: m", false, "modelKeys: Required"},
		{"no args", "", false, "modelPath: Required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: s\n" +
				"  plugins:\n    multiPoint:\n      enabled:\n      - name: EdgePolicy\n"
			if tc.args != "" {
				cfg += "  pluginConfig:\n  - name: EdgePolicy\n    args:\n      " + tc.args + "\n"
			}
			obj, _, err := kubescheme.Codecs.UniversalDecoder().Decode([]byte(cfg), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var args runtime.Object
			for _, pc := range obj.(*kubeconfig.KubeSchedulerConfiguration).Profiles[0].PluginConfig {
				if pc.Name == Name {
					args = pc.Args
				}
			}
			if _, ok := args.(*config.EdgePolicyArgs); !ok {
				t.Fatalf("kube-scheduler handed %T, not the internal args", args)
			}
			a, warnings, err := decodeArgs(args)
			if tc.err != "" {
				if !errors.Is(err, ErrArgs) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want ErrArgs with %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(a.ModelKeys, []string{"k"}) || a.ReloadInterval.Duration != DefaultReloadInterval {
				t.Fatalf("args %+v, err %v", a, err)
			}
			if (len(warnings) > 0) != tc.warn {
				t.Errorf("warnings %q, want a warning: %v", warnings, tc.warn)
			}
		})
	}
}

// TestReserveWithoutPreScore covers the single-feasible-node path (the
// scheduler skips PreScore/Score): Reserve models the node alone.
func TestReserveWithoutPreScore(t *testing.T) {
	spec := gpuNode("only", "T4", 4)
	held := k8sPod(sim.PodSpec{Name: "h", CPU: 1, Memory: 1, GPUs: 1, GPUMilli: 600})
	held.Annotations[AnnotationGPUDevices] = "2"
	ni := nodeInfo(k8sNode(spec), held)
	p := newTestPlugin(t, &fakeHandle{Lister: &fakeLister{Nodes: []fwk.NodeInfo{ni}}}, sim.NewTargetWorkload(nil, 0.95))
	pod := k8sPod(sim.PodSpec{Name: "a", CPU: 100, Memory: 100, GPUs: 1, GPUMilli: 300})
	cs := framework.NewCycleState()
	if st := p.Reserve(context.Background(), cs, pod, "only"); !st.IsSuccess() {
		t.Fatal(st)
	}
	dev, ok := p.core.Reserved(pod.UID, "only")
	if !ok || len(dev) != 1 {
		t.Fatalf("devices %v %v", dev, ok)
	}
	if ann := p.bindAnnotations(context.Background(), cs, pod, "only"); ann[AnnotationGPUDevices] != kubefmt.FormatDevices(dev) {
		t.Fatalf("Bind would write %v for a reserved GPU pod, want devices %v", ann, dev)
	}
	p.Unreserve(context.Background(), cs, pod, "only")
	if ann := p.bindAnnotations(context.Background(), cs, pod, "only"); len(ann) != 0 {
		t.Fatalf("Bind would write %v after Unreserve, want nothing (Skip)", ann)
	}
	// a pod that cannot fit any device is refused at Reserve
	big := k8sPod(sim.PodSpec{Name: "b", CPU: 100, Memory: 100, GPUs: 4, GPUMilli: 1000})
	if st := p.Reserve(context.Background(), framework.NewCycleState(), big, "only"); st.IsSuccess() {
		t.Fatal("Reserve succeeded for a pod that does not fit")
	}
}

// TestFilterFollowsSnapshotChanges checks Filter's lookup of the last
// snapshot's converted nodes (converter.known, by NodeInfo object) against
// the changes a scheduler makes to its snapshot objects between cycles:
// a pod bound in place (the generation moves on), the same object set to
// another node, and a copy of the object (preemption's what-if). Each
// verdict is compared with a fresh plugin's, which has converted nothing
// before and so reads the object as it is now.
func TestFilterFollowsSnapshotChanges(t *testing.T) {
	tgt := sim.NewTargetWorkload(nil, 0.95)
	p := newTestPlugin(t, nil, tgt)
	t4 := nodeInfo(k8sNode(gpuNode("t4", "T4", 1)))
	a10 := nodeInfo(k8sNode(gpuNode("a10", "A10", 2)))
	nodes := []fwk.NodeInfo{t4, a10}
	pod := k8sPod(sim.PodSpec{Name: "p", CPU: 100, Memory: 10, GPUs: 1, GPUMilli: 600, GPUSpec: []string{"T4"}})
	verdict := func(p *EdgePolicy, ni fwk.NodeInfo) string {
		cs := framework.NewCycleState()
		if _, st := p.PreFilter(context.Background(), cs, pod, nodes); !st.IsSuccess() {
			t.Fatalf("PreFilter = %v", st)
		}
		st := p.Filter(context.Background(), cs, pod, ni)
		return fmt.Sprintf("%v %s", st.Code(), st.Message())
	}
	check := func(step string, ni fwk.NodeInfo, want fwk.Code) {
		t.Helper()
		got, fresh := verdict(p, ni), verdict(newTestPlugin(t, nil, tgt), ni)
		if got != fresh || !strings.HasPrefix(got, want.String()) {
			t.Errorf("%s: Filter = %s, a fresh plugin's %s, want %v", step, got, fresh, want)
		}
	}
	view := func() {
		if err := p.core.WithView(nodes, nil, func(*serving.View) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if !p.core.Diagnostics().Known {
			t.Fatal("no known nodes published after a view")
		}
	}
	view()
	check("fresh snapshot", t4, fwk.Success)
	// a pod holding 500 of the T4 bound in place: 600 fits no more
	holder := k8sPod(sim.PodSpec{Name: "h", CPU: 1, Memory: 1, GPUs: 1, GPUMilli: 500})
	holder.Annotations[AnnotationGPUDevices] = "0"
	t4.AddPod(holder)
	check("bound in place, before the next view", t4, fwk.Unschedulable)
	view()
	check("bound in place, after the next view", t4, fwk.Unschedulable)
	// the A10 node's object now holds a T4 node with a free device
	a10.SetNode(k8sNode(gpuNode("t4-b", "T4", 1)))
	check("object holds another node", a10, fwk.Success)
	view()
	check("object holds another node, after the next view", a10, fwk.Success)
	// preemption's what-if: a copy without the holder
	whatIf := t4.Snapshot()
	if err := whatIf.RemovePod(klog.Background(), holder); err != nil {
		t.Fatal(err)
	}
	check("what-if copy", whatIf, fwk.Success)
	check("original after the what-if", t4, fwk.Unschedulable)
}
