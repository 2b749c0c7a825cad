package edgeplugin

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	fwk "k8s.io/kube-scheduler/framework"

	configv1 "github.com/edgesched/edgesched/edge-plugin/apis/config/v1"
	"github.com/edgesched/edgesched/edge-plugin/explain"
	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/edge-plugin/sources"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/sim"
)

var updateGolden = flag.Bool("update-explain-golden", false, "rewrite internal/edgectl/testdata/explained-pod.json")

// goldenPod is the explained pod edgectl's tests read.
var goldenPod = filepath.Join("..", "internal", "edgectl", "testdata", "explained-pod.json")

// explainedCycle runs a scheduling cycle up to Reserve on the best node and
// returns that node, the cycle state and the explanation input Reserve
// kept.
func explainedCycle(t testing.TB, p *EdgePolicy, pod *v1.Pod, nodes []fwk.NodeInfo) (string, fwk.CycleState, *explain.Input) {
	t.Helper()
	scores, cs := runCycle(t, p, pod, nodes)
	best, in := reserveBest(t, p, pod, cs, scores)
	return best, cs, in
}

// reserveBest runs Reserve on the best node of a cycle's scores (after
// it, the cycle's per-node scores are released) and returns that node and
// the explanation input Reserve kept.
func reserveBest(t testing.TB, p *EdgePolicy, pod *v1.Pod, cs fwk.CycleState, scores fwk.NodeScoreList) (string, *explain.Input) {
	t.Helper()
	best := ""
	for _, s := range scores {
		if s.Score == fwk.MaxNodeScore {
			best = s.Name
			break
		}
	}
	if best == "" {
		t.Fatalf("no scored node (%d candidates)", len(scores))
	}
	if st := p.Reserve(context.Background(), cs, pod, best); !st.IsSuccess() {
		t.Fatalf("Reserve: %v", st)
	}
	in := readExplain(cs)
	if in == nil || in.Node != best {
		t.Fatalf("Reserve kept no explanation input for %s: %+v", best, in)
	}
	if ps := readPreScore(cs); ps.Cand != nil || ps.Raw != nil || ps.ByNode != nil || ps.ByPos != nil {
		t.Fatalf("Reserve kept the cycle's per-node scores")
	}
	return best, in
}

// TestExplainInt8Model checks the explanations of the real int8 model:
// efficiency, v(N) equal to the score PreScore computed, the pod and
// dependency groups as dummies, and agreement with the permutation
// definition.
func TestExplainInt8Model(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	tgt, err := LoadTarget(DefaultTargetWorkload, DefaultTargetThreshold)
	if err != nil {
		t.Fatal(err)
	}
	nonzero := 0
	for trial := range 6 {
		nodes := randomSnapshot(rng, 10+rng.IntN(40))
		p := newTestPlugin(t, &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, tgt)
		ps := sim.PodSpec{Name: "e", CPU: int64(100 + rng.IntN(4000)), Memory: int64(100 + rng.IntN(8000))}
		if trial%2 == 1 {
			ps.GPUs, ps.GPUMilli = 1, int64(100+rng.IntN(800))
		}
		pod := k8sPod(ps)
		scores, cs := runCycle(t, p, pod, nodes)
		names, raw, x := scoredCandidates(t, p, cs) // before Reserve releases them
		node, in := reserveBest(t, p, pod, cs, scores)
		j := slices.Index(names, node)
		if want := scores[slices.IndexFunc(scores, func(s fwk.NodeScore) bool { return s.Name == node })].Score; in.Norm != want {
			t.Fatalf("explanation kept normalised score %d, the cycle's %d", in.Norm, want)
		}
		e, err := explain.Explain(in, time.Unix(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		if e.Score != math.Round(float64(raw[j])*1e6)/1e6 || in.Raw != raw[j] {
			t.Fatalf("explained score %v (kept %v), PreScore's %v", e.Score, in.Raw, raw[j])
		}
		sum := e.Rest
		for _, g := range e.Groups {
			sum += g.Attribution
		}
		if d := math.Abs(sum - (e.Score - e.Baseline)); d > 1e-5 {
			t.Fatalf("efficiency: attributions sum to %v, score - baseline = %v", sum, e.Score-e.Baseline)
		}
		// the row is the node's features and the baseline the mean of all
		// candidates' (at most 49 here, under explainBaselineNodes)
		F := policy.NumFeatures
		if !slices.Equal(in.Row, x[j*F:(j+1)*F]) {
			t.Fatalf("kept row %v, node's features %v", in.Row, x[j*F:(j+1)*F])
		}
		base := make([]float32, F)
		for f := range F {
			var s float64
			for r := range len(names) {
				s += float64(x[r*F+f])
			}
			base[f] = float32(s / float64(len(names)))
		}
		if !slices.Equal(in.Base, base) || e.BaselineNodes != len(names) || e.Candidates != len(names) {
			t.Fatalf("baseline %v over %d of %d, want %v over all %d", in.Base, e.BaselineNodes, e.Candidates, base, len(names))
		}
		// exact values against the permutation definition
		sc := in.Model.GetScorer()
		phi, _, _, err := explain.ShapleyGroups(sc, in.Row, base, explain.GroupIndices())
		if err != nil {
			t.Fatal(err)
		}
		ref := plugintest.PermutationShapley(t, sc, in.Row, base, explain.GroupIndices())
		for i := range phi {
			if math.Abs(phi[i]-ref[i]) > 1e-5*max(1, math.Abs(ref[i])) {
				t.Fatalf("group %s: %v, permutations %v", explain.FeatureGroups()[i].Name, phi[i], ref[i])
			}
			if phi[i] != 0 {
				nonzero++
			}
		}
		if phi[0] != 0 || phi[len(phi)-1] != 0 {
			t.Fatalf("pod group %v, dependencies %v: want exactly 0 (dummies)", phi[0], phi[len(phi)-1])
		}
		t.Logf("%s on %s of %d: score %.4f baseline %.4f %v rest %.4g", ps.Name, node, e.Candidates, e.Score, e.Baseline, e.Groups, e.Rest)
	}
	if nonzero == 0 {
		t.Fatal("every attribution is 0")
	}
}

// clientHandle adds a (fake) client to fakeHandle, without an API cacher
// (SchedulerAsyncAPICalls off).
type clientHandle struct {
	*fakeHandle
	cs kubernetes.Interface
}

func (h *clientHandle) ClientSet() kubernetes.Interface { return h.cs }
func (h *clientHandle) APICacher() fwk.APICacher        { return nil }

// bindingClient is a fake clientset whose pods/binding does what
// kube-apiserver's BindingREST does (the fake's own create of a
// subresource stores nothing for a Binding): it refuses a missing pod,
// another UID or a bound pod, sets spec.nodeName and merges the Binding's
// annotations into the pod. It counts bindings and every other write.
type bindingClient struct {
	*fake.Clientset
	bindings, otherWrites int
}

func newBindingClient() *bindingClient {
	c := &bindingClient{Clientset: fake.NewClientset()}
	c.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "get", "list", "watch":
			return false, nil, nil
		}
		if ca, ok := a.(k8stesting.CreateAction); ok && a.GetSubresource() == "binding" {
			c.bindings++
			b := ca.GetObject().(*v1.Binding)
			obj, err := c.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), b.Namespace, b.Name, metav1.GetOptions{})
			if err != nil {
				return true, nil, err
			}
			pod := obj.(*v1.Pod).DeepCopy()
			if b.UID != "" && b.UID != pod.UID {
				return true, nil, apierrors.NewConflict(v1.Resource("pods/binding"), b.Name, errors.New("UID mismatch"))
			}
			if pod.Spec.NodeName != "" {
				return true, nil, apierrors.NewConflict(v1.Resource("pods/binding"), b.Name, errors.New("already assigned"))
			}
			pod.Spec.NodeName = b.Target.Name
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			maps.Copy(pod.Annotations, b.Annotations)
			return true, nil, c.Tracker().Update(v1.SchemeGroupVersion.WithResource("pods"), pod, pod.Namespace, metav1.UpdateOptions{})
		}
		if a.GetVerb() != "create" || a.GetSubresource() != "" {
			c.otherWrites++
		}
		return false, nil, nil
	})
	return c
}

func TestBindWritesAnnotations(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	nodes := randomSnapshot(rng, 30)
	client := newBindingClient()
	h := &clientHandle{fakeHandle: &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, cs: client}
	p := newTestPlugin(t, h, sim.NewTargetWorkload(nil, 0.95))
	ctx := context.Background()
	for i, c := range []struct {
		spec sim.PodSpec
		gpu  bool
	}{
		{sim.PodSpec{Name: "cpu", CPU: 500, Memory: 512}, false},
		{sim.PodSpec{Name: "share", CPU: 500, Memory: 512, GPUs: 1, GPUMilli: 300}, true},
	} {
		pod := k8sPod(c.spec)
		if _, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		node, cs, _ := explainedCycle(t, p, pod, nodes)
		if st := p.Reserve(ctx, cs, pod, node); !st.IsSuccess() {
			t.Fatal(st)
		}
		if st := p.Bind(ctx, cs, pod, node); !st.IsSuccess() {
			t.Fatalf("%s: Bind = %v", c.spec.Name, st)
		}
		// one binding per pod (plus the refused rebinding below of the
		// previous pod), nothing else
		if client.bindings != 2*i+1 || client.otherWrites != 0 {
			t.Fatalf("%s: %d bindings and %d other writes, want %d and 0", c.spec.Name, client.bindings, client.otherWrites, 2*i+1)
		}
		got, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.NodeName != node {
			t.Fatalf("%s: bound to %q, want %s", c.spec.Name, got.Spec.NodeName, node)
		}
		e, err := ParseExplanation(got.Annotations[AnnotationExplanation])
		if err != nil {
			t.Fatalf("%s: %v (annotations %v)", c.spec.Name, err, got.Annotations)
		}
		if e.Node != node || e.ModelVersion != 1 || e.ModelID != p.Models().Current().Header.ModelID || e.NormalizedScore != fwk.MaxNodeScore || len(e.Groups) == 0 || len(e.Groups) > explain.ExplainTopK {
			t.Fatalf("%s: explanation %+v", c.spec.Name, e)
		}
		if _, has := got.Annotations[AnnotationGPUDevices]; has != c.gpu {
			t.Fatalf("%s: gpu-devices present %v, want %v", c.spec.Name, has, c.gpu)
		}
		if c.gpu {
			dev, _ := p.core.Reserved(pod.UID, node)
			if got.Annotations[AnnotationGPUDevices] != kubefmt.FormatDevices(dev) {
				t.Fatalf("%s: gpu-devices %q, reserved %v", c.spec.Name, got.Annotations[AnnotationGPUDevices], dev)
			}
		}
		if n := len(got.Annotations[AnnotationExplanation]); n > 1024 {
			t.Errorf("annotation of %d bytes", n)
		}
		// a second binding of the same pod is refused, and Bind says so
		if st := p.Bind(ctx, cs, pod, node); st.IsSuccess() || st.IsSkip() {
			t.Fatalf("%s: rebinding a bound pod = %v, want an error", c.spec.Name, st)
		}
	}
	// a pod the API server does not know: the binding fails (whether or
	// not it carries devices), as DefaultBinder's would
	before := client.bindings
	for _, spec := range []sim.PodSpec{
		{Name: "ghost", CPU: 500, Memory: 512},
		{Name: "ghost-gpu", CPU: 500, Memory: 512, GPUs: 1, GPUMilli: 200},
	} {
		ghost := k8sPod(spec)
		node, cs, _ := explainedCycle(t, p, ghost, nodes)
		if st := p.Reserve(ctx, cs, ghost, node); !st.IsSuccess() {
			t.Fatal(st)
		}
		if st := p.Bind(ctx, cs, ghost, node); st.IsSuccess() || st.IsSkip() {
			t.Fatalf("%s: Bind of a missing pod = %v, want an error", spec.Name, st)
		}
	}
	if client.bindings != before+2 || client.otherWrites != 0 {
		t.Fatalf("%d bindings and %d other writes after the ghosts", client.bindings-before, client.otherWrites)
	}
}

// TestBindSkipsWithoutAnnotations: a pod EdgePolicy has nothing to record
// about (a CPU pod on a cycle without a model) is left to DefaultBinder
// without any API call.
func TestBindSkipsWithoutAnnotations(t *testing.T) {
	nodes := randomSnapshot(rand.New(rand.NewPCG(5, 5)), 10)
	client := newBindingClient()
	a := Args{ModelPath: "x", ModelKeys: []string{"x"}}
	configv1.SetDefaults_EdgePolicyArgs(&a)
	q := NewWithModels(&clientHandle{fakeHandle: &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, cs: client}, a, sources.NewModelStore(&quant.Keyring{}), sim.NewTargetWorkload(nil, 0.95))
	pod := k8sPod(sim.PodSpec{Name: "b", CPU: 100, Memory: 100})
	_, cs := runCycle(t, q, pod, nodes)
	if st := q.Bind(context.Background(), cs, pod, nodes[0].Node().Name); st.Code() != fwk.Skip {
		t.Fatalf("Bind without a model = %v, want Skip", st)
	}
	if client.bindings != 0 || client.otherWrites != 0 || len(client.Actions()) != 0 {
		t.Fatalf("Skip made API calls: %v", client.Actions())
	}
}

func TestExplainPanicContained(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 1))
	nodes := randomSnapshot(rng, 10)
	p := newTestPlugin(t, &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, sim.NewTargetWorkload(nil, 0.95))
	node, cs, good := explainedCycle(t, p, k8sPod(sim.PodSpec{Name: "a", CPU: 100, Memory: 100}), nodes)
	bad := *good
	bad.Model = sources.NewModel(good.Model.Header, func() policy.Scorer { return panicScorer{} })
	cs.Write(explainKey, &explainState{&bad})
	before, _ := plugintest.CounterValue("edgesched_plugin_panics_total", nil)
	if s := p.explanationAnnotation(context.Background(), cs, node); s != "" {
		t.Fatalf("explanation %q from a panicking scorer", s)
	}
	if after, _ := plugintest.CounterValue("edgesched_plugin_panics_total", nil); after != before+1 {
		t.Fatalf("panics %v -> %v", before, after)
	}
	// a cycle that fell back (no model) has nothing to explain (Bind
	// then skips: TestBindSkipsWithoutAnnotations)
	a := Args{ModelPath: "x", ModelKeys: []string{"x"}}
	configv1.SetDefaults_EdgePolicyArgs(&a)
	q := NewWithModels(&fakeHandle{Lister: &fakeLister{Nodes: nodes}}, a, sources.NewModelStore(&quant.Keyring{}), sim.NewTargetWorkload(nil, 0.95))
	pod := k8sPod(sim.PodSpec{Name: "b", CPU: 100, Memory: 100})
	_, cs = runCycle(t, q, pod, nodes)
	if ann := q.bindAnnotations(context.Background(), cs, pod, node); len(ann) != 0 {
		t.Fatalf("annotations without a model: %v", ann)
	}
}

// TestExplainedPodGolden keeps edgectl's test input a real explanation:
// with -update-explain-golden it rewrites the file from a Bind through
// a fake API server; otherwise it checks the file still parses.
func TestExplainedPodGolden(t *testing.T) {
	if !*updateGolden {
		b, err := os.ReadFile(goldenPod)
		if err != nil {
			t.Fatal(err)
		}
		var pod v1.Pod
		if err := json.Unmarshal(b, &pod); err != nil {
			t.Fatal(err)
		}
		e, err := ParseExplanation(pod.Annotations[AnnotationExplanation])
		if err != nil {
			t.Fatal(err)
		}
		sum := e.Rest
		for _, g := range e.Groups {
			sum += g.Attribution
		}
		if math.Abs(sum-(e.Score-e.Baseline)) > 1e-5 {
			t.Fatalf("golden explanation is not efficient: %+v", e)
		}
		return
	}
	tgt, err := LoadTarget(DefaultTargetWorkload, DefaultTargetThreshold)
	if err != nil {
		t.Fatal(err)
	}
	nodes := randomSnapshot(rand.New(rand.NewPCG(2026, 7)), 40)
	client := newBindingClient()
	p := newTestPlugin(t, &clientHandle{fakeHandle: &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, cs: client}, tgt)
	p.core.SetClock(func() time.Time { return time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC) })
	pod := k8sPod(sim.PodSpec{Name: "inference-7f9c", CPU: 2000, Memory: 4096, GPUs: 1, GPUMilli: 400, QoS: sim.QoSLS})
	pod.Namespace = "vision"
	ctx := context.Background()
	if _, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node, cs, _ := explainedCycle(t, p, pod, nodes)
	if st := p.Reserve(ctx, cs, pod, node); !st.IsSuccess() {
		t.Fatal(st)
	}
	if st := p.Bind(ctx, cs, pod, node); !st.IsSuccess() {
		t.Fatal(st)
	}
	got, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.NodeName = node
	got.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	got.ResourceVersion, got.ManagedFields = "", nil
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(goldenPod, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkExplain measures one explanation in Bind (2^G batched forward
// passes of the int8 model; the features were kept by Reserve) for a pod
// scored on 100 and 1000 random nodes.
func BenchmarkExplain(b *testing.B) {
	for _, n := range []int{100, 1000} {
		nodes := randomSnapshot(rand.New(rand.NewPCG(uint64(n), 9)), n)
		p := newTestPlugin(b, &fakeHandle{Lister: &fakeLister{Nodes: nodes}}, sim.NewTargetWorkload(nil, 0.95))
		_, _, in := explainedCycle(b, p, k8sPod(sim.PodSpec{Name: "bench", CPU: 2000, Memory: 4096, GPUs: 1, GPUMilli: 300}), nodes)
		b.Run("nodes="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := explain.Explain(in, time.Time{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(int(1)<<len(explain.FeatureGroups())), "passes")
		})
	}
}
