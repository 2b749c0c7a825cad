package edgeplugin

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/edge-plugin/serving"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/sage"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/scenario"
)

// telFixture is two otherwise equal CPU nodes, "a" and "b", each running
// one pod (so the usage model's load is not 0), a plugin with a fake
// clock and a captured log.
type telFixture struct {
	p     *EdgePolicy
	infos []*framework.NodeInfo
	nodes []fwk.NodeInfo
	now   time.Time
	mu    sync.Mutex
	logs  []string
}

var telT0 = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

func newTelFixture(t *testing.T) *telFixture {
	return newTelFixtureOf(t, sim.NodeSpec{CPU: 32000, Memory: 128 << 10, Arch: sim.ArchAMD64}, 8000)
}

// newTelFixtureOf is newTelFixture with nodes a and b of spec (its name
// set), each running a pod of running milli-CPU (0: none).
func newTelFixtureOf(t *testing.T, spec sim.NodeSpec, running int64) *telFixture {
	t.Helper()
	f := &telFixture{now: telT0}
	for _, name := range []string{"a", "b"} {
		spec.Name = name
		n := k8sNode(spec)
		var pods []*v1.Pod
		if running > 0 {
			p := k8sPod(sim.PodSpec{Name: "run-" + name, CPU: running, Memory: 4096, QoS: sim.QoSBurstable})
			p.Annotations[AnnotationCPUUsage] = "0.7" // the same measured use on both (the usage model hashes the name)
			pods = append(pods, p)
		}
		ni := nodeInfo(n, pods...)
		f.infos = append(f.infos, ni)
		f.nodes = append(f.nodes, ni)
	}
	target, err := LoadTarget(DefaultTargetWorkload, DefaultTargetThreshold)
	if err != nil {
		t.Fatal(err)
	}
	f.p = newTestPlugin(t, &fakeHandle{Lister: &fakeLister{Nodes: f.nodes}}, target)
	f.p.core.SetClock(func() time.Time { return f.now })
	f.p.core.SetLogger(funcr.New(func(prefix, args string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.logs = append(f.logs, args)
	}, funcr.Options{Verbosity: 2}))
	return f
}

// setAnnotation replaces node i's Node (a new generation, as the
// scheduler's cache does on an update) with the telemetry annotation set
// to value, or removed when value is "".
func (f *telFixture) setAnnotation(i int, value string) {
	n := f.infos[i].Node().DeepCopy()
	if value == "" {
		delete(n.Annotations, kubefmt.AnnotationTelemetry)
	} else {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[kubefmt.AnnotationTelemetry] = value
	}
	f.infos[i].SetNode(n)
}

func encodeSummary(t *testing.T, cpu float64, at time.Time) string {
	t.Helper()
	s, err := kubefmt.EncodeTelemetry(kubefmt.TelemetrySummary{Time: at, Window: 10 * time.Second, CPU: cpu, Mem: 0.5, Load1: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// cycle runs one scheduling cycle for a small CPU pod and returns the
// normalised scores, the raw scores and the load feature, by node.
func (f *telFixture) cycle(t *testing.T) (norm map[string]int64, raw, load map[string]float32) {
	t.Helper()
	pod := k8sPod(sim.PodSpec{Name: "new", CPU: 2000, Memory: 2048, QoS: sim.QoSLS})
	scores, cs := runCycle(t, f.p, pod, f.nodes)
	norm, raw, load = map[string]int64{}, map[string]float32{}, map[string]float32{}
	for _, s := range scores {
		norm[s.Name] = s.Score
	}
	names, r, x := scoredCandidates(t, f.p, cs)
	if len(names) != 2 {
		t.Fatalf("cycle scored %v", names)
	}
	li := loadFeature(t)
	for j, n := range names {
		raw[n] = r[j]
		load[n] = x[j*policy.NumFeatures+li]
	}
	return norm, raw, load
}

func loadFeature(t *testing.T) int {
	for i, ft := range policy.FeatureList() {
		if ft.Name == "load" {
			return i
		}
	}
	t.Fatal("no load feature")
	return -1
}

// cpuUsed is node name's CPUUsed in the kept state.
func (f *telFixture) cpuUsed(name string) float64 {
	var u float64
	f.p.core.WithLatest(func(v *serving.View) error {
		i, _ := v.Node(name)
		u = v.State().Nodes[i].CPUUsed
		return nil
	})
	return u
}

func fallbacks(t *testing.T, reason string) float64 {
	t.Helper()
	v, err := plugintest.CounterValue("edgesched_plugin_telemetry_fallbacks_total", map[string]string{"reason": reason})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (f *telFixture) logsContaining(s string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, l := range f.logs {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// TestTelemetryFreshChangesLoad: a fresh summary becomes the node's load
// feature and changes the scores (in whichever direction the model
// prefers); without telemetry the two equal nodes score the same.
func TestTelemetryFreshChangesLoad(t *testing.T) {
	f := newTelFixture(t)
	// The shipped model's decision band would hand these two nodes (equal
	// to FGD, less than a band apart) to FGD, and the normalised scores
	// would stay tied: this test is about what telemetry does to the
	// network's scores, so it runs the same network without the band.
	a := *testArtifact(t)
	a.Header.Decision, a.Header.Version = policy.Decision{}, 2
	b, err := a.Encode(testSigner(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.p.Models().Install(b); err != nil {
		t.Fatal(err)
	}
	missing0 := fallbacks(t, "missing")
	norm0, raw0, load0 := f.cycle(t)
	if load0["a"] != load0["b"] || raw0["a"] != raw0["b"] || norm0["a"] != norm0["b"] {
		t.Fatalf("equal nodes differ without telemetry: load %v raw %v norm %v", load0, raw0, norm0)
	}
	if load0["a"] <= 0 {
		t.Fatalf("usage-model load %v: the fixture's running pods should load the nodes", load0["a"])
	}
	if got := fallbacks(t, "missing") - missing0; got != 2 {
		t.Fatalf("missing fallbacks counted %v, want 2 (both nodes, one cycle)", got)
	}
	usedModel := f.cpuUsed("b")

	for _, cpu := range []float64{0.95, 0} {
		f.setAnnotation(1, encodeSummary(t, cpu, f.now.Add(-30*time.Second)))
		missing := fallbacks(t, "missing")
		norm, raw, load := f.cycle(t)
		if math.Abs(float64(load["b"])-cpu) > 1e-6 {
			t.Fatalf("cpu %v: node b's load feature is %v, want the measured utilisation", cpu, load["b"])
		}
		if load["a"] != load0["a"] || raw["a"] != raw0["a"] {
			t.Fatalf("cpu %v: node a without telemetry changed: load %v -> %v, raw %v -> %v", cpu, load0["a"], load["a"], raw0["a"], raw["a"])
		}
		if raw["b"] == raw0["b"] || raw["a"] == raw["b"] || norm["a"] == norm["b"] {
			t.Fatalf("cpu %v: telemetry did not change the scores: raw %v (was %v), norm %v (was %v)", cpu, raw, raw0, norm, norm0)
		}
		if got := fallbacks(t, "missing") - missing; got != 1 {
			t.Fatalf("cpu %v: missing fallbacks counted %v, want 1 (node a only)", cpu, got)
		}
		t.Logf("node b at cpu %.2f: raw a %.4f b %.4f (both %.4f without telemetry), normalised %v", cpu, raw["a"], raw["b"], raw0["a"], norm)
	}

	// Removing the annotation restores the usage model's load bit for bit.
	f.setAnnotation(1, "")
	missing := fallbacks(t, "missing")
	norm, raw, load := f.cycle(t)
	if got := f.cpuUsed("b"); got != usedModel {
		t.Fatalf("CPUUsed after the annotation was removed = %v, want %v (the usage model's)", got, usedModel)
	}
	if load["b"] != load0["b"] || raw["b"] != raw0["b"] || norm["a"] != norm["b"] {
		t.Fatalf("after removal: load %v raw %v norm %v, want as without telemetry (%v, %v)", load, raw, norm, load0, raw0)
	}
	if got := fallbacks(t, "missing") - missing; got != 2 {
		t.Fatalf("missing fallbacks counted %v, want 2", got)
	}
}

// TestTelemetryStale: a summary older than telemetryMaxAge (by the
// injected clock, the node unchanged) falls back to the usage model, is
// counted as stale every cycle and logged once; a newer summary is used
// again.
func TestTelemetryStale(t *testing.T) {
	f := newTelFixture(t)
	_, raw0, load0 := f.cycle(t)
	usedModel := f.cpuUsed("b")
	f.setAnnotation(1, encodeSummary(t, 0.9, f.now))
	if _, _, load := f.cycle(t); math.Abs(float64(load["b"])-0.9) > 1e-6 {
		t.Fatalf("fresh summary: load %v", load["b"])
	}

	f.now = f.now.Add(DefaultTelemetryMaxAge + time.Second) // the node does not change, time passes
	stale := fallbacks(t, "stale")
	for range 3 {
		_, raw, load := f.cycle(t)
		if load["b"] != load0["b"] || raw["b"] != raw0["b"] {
			t.Fatalf("stale summary used: load %v raw %v, want %v %v", load["b"], raw["b"], load0["b"], raw0["b"])
		}
		if got := f.cpuUsed("b"); got != usedModel {
			t.Fatalf("stale: CPUUsed %v, want the usage model's %v", got, usedModel)
		}
	}
	if got := fallbacks(t, "stale") - stale; got != 3 {
		t.Fatalf("stale fallbacks counted %v over 3 cycles, want 3", got)
	}
	if n := f.logsContaining("stale"); n != 1 {
		t.Fatalf("stale logged %d times over 3 cycles, want once:\n%s", n, strings.Join(f.logs, "\n"))
	}

	// The agent catches up: used again, and a later staleness is logged again.
	f.setAnnotation(1, encodeSummary(t, 0.2, f.now))
	if _, _, load := f.cycle(t); math.Abs(float64(load["b"])-0.2) > 1e-6 {
		t.Fatalf("refreshed summary: load %v", load["b"])
	}
	if n := f.logsContaining("usable again"); n != 1 {
		t.Fatalf("recovery logged %d times", n)
	}
	f.now = f.now.Add(time.Hour)
	f.cycle(t)
	if n := f.logsContaining("stale"); n != 2 {
		t.Fatalf("second staleness logged %d times in all, want 2", n)
	}

	// A timestamp far in the future (agent clock wrong) is not trusted.
	f.setAnnotation(1, encodeSummary(t, 0.7, f.now.Add(time.Hour)))
	stale = fallbacks(t, "stale")
	if _, _, load := f.cycle(t); load["b"] != load0["b"] {
		t.Fatalf("future summary used: load %v", load["b"])
	}
	if got := fallbacks(t, "stale") - stale; got != 1 {
		t.Fatalf("future summary counted %v as stale, want 1", got)
	}
}

// TestTelemetryMaxAgeArg: the bound comes from the args.
func TestTelemetryMaxAgeArg(t *testing.T) {
	f := newTelFixture(t)
	f.p.core.SetTelemetryMaxAge(20 * time.Second)
	f.setAnnotation(1, encodeSummary(t, 0.9, f.now.Add(-30*time.Second)))
	stale := fallbacks(t, "stale")
	f.cycle(t)
	if got := fallbacks(t, "stale") - stale; got != 1 {
		t.Fatalf("30 s old summary with a 20 s bound: stale counted %v, want 1", got)
	}
	for _, c := range []struct {
		in string
		ok bool
	}{{"", true}, {"2m", true}, {"10s", true}, {"1h", true}, {"9s", false}, {"2h", false}, {"-1m", false}, {"soon", false}} {
		raw := `{"modelPath":"m","modelKeys":["k"]}`
		if c.in != "" {
			raw = `{"modelPath":"m","modelKeys":["k"],"telemetryMaxAge":"` + c.in + `"}`
		}
		if _, err := DecodeArgs(&runtime.Unknown{Raw: []byte(raw)}); (err == nil) != c.ok {
			t.Errorf("telemetryMaxAge %q: DecodeArgs = %v, want ok=%v", c.in, err, c.ok)
		}
	}
	a, err := DecodeArgs(nil)
	if err == nil {
		t.Fatal("args without a model source or keys accepted")
	}
	a, err = DecodeArgs(&Args{ModelPath: "m", ModelKeys: []string{"k"}})
	if err != nil {
		t.Fatal(err)
	}
	if d := settingsOf(a).telMaxAge; d != DefaultTelemetryMaxAge || a.TelemetryMaxAge.Duration != 2*time.Minute {
		t.Errorf("default telemetryMaxAge = %v (%v)", d, a.TelemetryMaxAge)
	}
}

// TestTelemetryMalformed: annotations Decode refuses fall back, are
// counted as malformed and logged once per transition.
func TestTelemetryMalformed(t *testing.T) {
	f := newTelFixture(t)
	_, raw0, load0 := f.cycle(t)
	usedModel := f.cpuUsed("b")
	ok := encodeSummary(t, 0.9, f.now)
	for _, bad := range []string{
		"garbage",
		strings.Replace(ok, `"cpu":0.9`, `"cpu":90`, 1), // percent, not a share
		strings.Replace(ok, `"v":1`, `"v":2`, 1),
		strings.Replace(ok, `"cpu":0.9`, `"cpu":0.9,"extra":1`, 1),
		" ",
	} {
		f.setAnnotation(1, ok) // fresh first, so the fallback has something to undo
		if _, _, load := f.cycle(t); math.Abs(float64(load["b"])-0.9) > 1e-6 {
			t.Fatalf("fresh summary: load %v", load["b"])
		}
		f.setAnnotation(1, bad)
		malformed, logged := fallbacks(t, "malformed"), f.logsContaining("malformed")
		for range 2 {
			_, raw, load := f.cycle(t)
			if load["b"] != load0["b"] || raw["b"] != raw0["b"] || f.cpuUsed("b") != usedModel {
				t.Fatalf("%q: load %v raw %v, want the usage model's %v %v", bad, load["b"], raw["b"], load0["b"], raw0["b"])
			}
		}
		if got := fallbacks(t, "malformed") - malformed; got != 2 {
			t.Fatalf("%q: malformed counted %v over 2 cycles, want 2", bad, got)
		}
		if got := f.logsContaining("malformed") - logged; got != 1 {
			t.Fatalf("%q: malformed logged %d times, want once", bad, got)
		}
	}
}

// TestTelemetryIncremental: pods bound and removed on a node with fresh
// telemetry leave its load at the measured value, and the fallback after
// that is exactly the usage model of the pods then running (as a State
// built from scratch has it).
func TestTelemetryIncremental(t *testing.T) {
	f := newTelFixture(t)
	f.setAnnotation(1, encodeSummary(t, 0.5, f.now))
	f.cycle(t)
	extra := k8sPod(sim.PodSpec{Name: "extra", CPU: 6000, Memory: 1024, QoS: sim.QoSBurstable})
	f.infos[1].AddPod(extra)
	if _, _, load := f.cycle(t); math.Abs(float64(load["b"])-0.5) > 1e-6 {
		t.Fatalf("after a binding: load %v, want the measured 0.5", load["b"])
	}
	f.setAnnotation(1, "")
	f.cycle(t)
	got := f.cpuUsed("b")

	// Reference: a fresh plugin that never saw telemetry, same pods.
	g := newTelFixture(t)
	g.infos[1].AddPod(extra)
	g.cycle(t)
	if want := g.cpuUsed("b"); got != want {
		t.Fatalf("CPUUsed after the fallback = %v, a state built from scratch has %v", got, want)
	}
}

// edgeArtifact quantizes a shipped edge model with calibration rows from
// the first 3,000 pods of one retail-stores workload (deterministic:
// fixed seeds).
func edgeArtifact(t testing.TB, name string) *quant.Artifact { return edgeArtifactWith(t, name, nil) }

// edgeArtifactWith is edgeArtifact of the model carrying the GraphSAGE
// weights sw (nil: none; its partners in calibration are theirs).
func edgeArtifactWith(t testing.TB, name string, sw *policy.SageWeights) *quant.Artifact {
	t.Helper()
	m, err := models.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	m.Sage = sw
	seed := uint64(1)
	l, err := scenario.LoadWith("builtin:retail-stores", scenario.Options{Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	w := *l.Workload
	w.Pods = w.Pods[:min(len(w.Pods), 3000)]
	env, err := sage.NewEnvWith(l.Cluster, &w, sw)
	if err != nil {
		t.Fatal(err)
	}
	rc := engine.DefaultRunConfig(engine.Replay)
	rc.Seed = 9001
	rows, _, err := quant.CollectRows(context.Background(), env, m.Float(), []engine.RunConfig{rc}, 20000, 9001)
	if err != nil {
		t.Fatal(err)
	}
	a, err := quant.Quantize(m.Float(), rows, quant.DefaultCalibration(), quant.Info{Version: 1, Created: time.Unix(1_800_000_000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// installEdgeModel installs the shipped model name in p, quantized
// (edgeArtifact) and signed as version.
func installEdgeModel(t testing.TB, p *EdgePolicy, name string, version uint64) {
	t.Helper()
	installArtifact(t, p, *edgeArtifact(t, name), version)
}

// installArtifact installs a copy of artifact a in p, signed as version.
func installArtifact(t testing.TB, p *EdgePolicy, a quant.Artifact, version uint64) {
	t.Helper()
	a.Header.Version = version
	raw, err := a.Encode(testSigner(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Models().Install(raw); err != nil {
		t.Fatal(err)
	}
}

func encodeMeasured(t *testing.T, cpu, runqUs float64, at time.Time) string {
	t.Helper()
	s, err := kubefmt.EncodeTelemetry(kubefmt.TelemetrySummary{Time: at, Window: 10 * time.Second, CPU: cpu, Mem: 0.5, Load1: 1, RunQueueP99Us: &runqUs})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTelemetryPrefersCoolNode is issue 18's telemetry check in the
// plugin: two nodes with equal requests, both with fresh agent
// annotations, node a idle (12% CPU, 40 µs run queue) and node b busy
// (95% CPU, 20 ms run queue). The shipped models that read telemetry
// (edge-loaded, edge-sage), int8 as the plugin serves it, must score node a higher,
// raw and normalised.
func TestTelemetryPrefersCoolNode(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: quantizes a model on a scenario replay")
	}
	for i, name := range []string{"edge-loaded", "edge-sage"} {
		f := newTelFixture(t)
		installEdgeModel(t, f.p, name, uint64(2+i))
		f.setAnnotation(0, encodeMeasured(t, 0.12, 40, f.now.Add(-20*time.Second)))
		f.setAnnotation(1, encodeMeasured(t, 0.95, 20_000, f.now.Add(-20*time.Second)))
		norm, raw, _ := f.cycle(t)
		t.Logf("%s: raw a %.4f b %.4f, normalised %v", name, raw["a"], raw["b"], norm)
		if !(raw["a"] > raw["b"]) || !(norm["a"] > norm["b"]) {
			t.Errorf("%s: the busy node b scores %v (raw %.4f), the idle node a %v (raw %.4f): want a higher", name, norm["b"], raw["b"], norm["a"], raw["a"])
		}
	}
}

// TestPluginCPUCap: the shipped edge-loaded's decision rule (a CPU cap of
// 0.8, policy.Decision.CPUCap) in the plugin, int8 as it serves it. Node
// b holds 28 of its 32 CPUs in requests, so the 2-CPU pod would bring it
// to 94% (over the cap) and node a to 31%; b reports an idle CPU and a
// short run queue and a a busy one (85%, under the rule's busy cap of
// 0.9: TestPluginBusyCap), so the network alone prefers b. With
// the rule node a scores higher; with the rule dropped from the same
// artifact, b does: the cap, not the network, moved the choice.
func TestPluginCPUCap(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: quantizes a model on a scenario replay")
	}
	m, err := models.Load("edge-loaded")
	if err != nil {
		t.Fatal(err)
	}
	if m.Decision.CPUCap != 0.8 || m.Decision.BusyCap != 0.9 {
		t.Fatalf("edge-loaded's rule is %+v: this test expects the CPU cap of 0.8 and a busy cap of 0.9", m.Decision)
	}
	capped := edgeArtifact(t, "edge-loaded") // quantized once for both runs
	for _, rule := range []bool{true, false} {
		f := newTelFixture(t)
		f.infos[1].AddPod(k8sPod(sim.PodSpec{Name: "big-b", CPU: 20000, Memory: 4096, QoS: sim.QoSBurstable}))
		a := *capped
		if !rule {
			a.Header.Decision = policy.Decision{}
		}
		installArtifact(t, f.p, a, 2)
		f.setAnnotation(0, encodeMeasured(t, 0.85, 15_000, f.now.Add(-20*time.Second))) // under the busy cap
		f.setAnnotation(1, encodeMeasured(t, 0.1, 40, f.now.Add(-20*time.Second)))
		norm, rawScores, _ := f.cycle(t)
		t.Logf("rule %v: raw a %.4f b %.4f, normalised %v", rule, rawScores["a"], rawScores["b"], norm)
		if rule && !(norm["a"] > norm["b"]) {
			t.Errorf("with the cap: node b (over it) scores %d, node a %d: want a higher", norm["b"], norm["a"])
		}
		if !rule && !(norm["b"] > norm["a"]) {
			t.Errorf("without the rule: node a scores %d, node b %d: the network must prefer b for this test to show the cap", norm["a"], norm["b"])
		}
	}
}

// TestPluginBusyCap: a busy cap (policy.Decision.BusyCap) in the plugin,
// int8 as it serves it, reading the agent's annotation. The model is the
// shipped edge, which reads no telemetry, so its network alone ranks the
// nodes by their requests: node b holds 20 of its 32 CPUs in requests
// (the 2-CPU pod brings it to 69%, under a CPU cap of 0.8), node a 8,
// and the network packs onto b whatever b reports. With a busy cap of
// 0.9 in the same artifact's rule and b reporting cpu 0.95, node a scores
// higher; with b reporting 0.85 (the step below 0.9), b wins again: the
// annotation, through the cap, moved the choice.
func TestPluginBusyCap(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: quantizes a model on a scenario replay")
	}
	base := edgeArtifact(t, "edge")
	for _, tc := range []struct {
		name string
		rule policy.Decision
		bCPU float64 // node b's measured CPU share (a's: 0.3)
		want string  // the node that scores higher
	}{
		{"network alone", policy.Decision{}, 0.95, "b"},
		{"busy cap", policy.Decision{BusyCap: 0.9}, 0.95, "a"},
		{"busy cap and CPU cap", policy.Decision{CPUCap: 0.8, BusyCap: 0.9}, 0.95, "a"},
		{"under the busy cap", policy.Decision{CPUCap: 0.8, BusyCap: 0.9}, 0.85, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTelFixture(t)
			f.infos[1].AddPod(k8sPod(sim.PodSpec{Name: "mid-b", CPU: 12000, Memory: 4096, QoS: sim.QoSBurstable}))
			a := *base
			a.Header.Decision = tc.rule
			installArtifact(t, f.p, a, 2)
			f.setAnnotation(0, encodeMeasured(t, 0.3, 40, f.now.Add(-20*time.Second)))
			f.setAnnotation(1, encodeMeasured(t, tc.bCPU, 40, f.now.Add(-20*time.Second)))
			norm, raw, _ := f.cycle(t)
			t.Logf("raw a %.4f b %.4f, normalised %v", raw["a"], raw["b"], norm)
			other := map[string]string{"a": "b", "b": "a"}[tc.want]
			if !(norm[tc.want] > norm[other]) {
				t.Errorf("node %s scores %d, node %s %d: want %s higher", other, norm[other], tc.want, norm[tc.want], tc.want)
			}
		})
	}
}
