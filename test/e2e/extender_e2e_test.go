//go:build unix

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"sigs.k8s.io/yaml"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/int8net"
	"github.com/edgesched/edgesched/sim"
)

// This file runs `edge-scheduler extender` (EdgePolicy over the HTTP
// extender protocol) behind the STOCK kube-scheduler configured from
// deploy/edge-scheduler/k3s-extender.yaml, against kine + kube-apiserver,
// and checks every binding against the simulator's int8 policy, as
// edgescheduler_test.go does for the plugin.
//
// What differs from the plugin, and how the test accounts for it:
//
//   - GPU pods (they request a managed resource) are bound by the extender
//     (bindVerb), which records the devices the policy picks in the
//     edgesched.io/gpu-devices annotation, as the plugin's Bind does: the
//     test compares them with the simulator's device choice, and the
//     reference state uses the recorded devices (simReference.state, as
//     for the plugin). CPU pods are bound by the scheduler, without one.
//   - The extender learns of the scheduler's bindings through its informer
//     (of its own at once). Before each
//     pod is created the test asks the extender itself (POST /prioritize,
//     and /filter for GPU pods, with the pod about to be created and the
//     simulator's feasible nodes) and polls, with a deadline, until its
//     tied-best set equals the simulator's for the current bindings and
//     its filter keeps every simulator-feasible node: only then has the
//     extender observed the previous bindings (or they do not change its
//     answer), and the pod is created.
//   - Pods asking for a share with the edgesched.io/gpu-milli annotation
//     alone are left out: they request no managed resource, so the filter
//     extender is never called for them and the stock scheduler checks no
//     per-device fit; the simulator's feasible set is then not the
//     scheduler's and parity is not well defined.

const (
	extNodes = 32
	extPods  = 36
	// extPrefix is the URL path of the shipped k3s-extender.yaml's urlPrefix.
	extPrefix = "/edgesched"
	extLabel  = "app=edge-e2e"
)

// extShapes are edgeShapes without annotation-only shares.
func extShapes() []edgeShape {
	return slices.DeleteFunc(slices.Clone(edgeShapes), func(s edgeShape) bool { return s.annoMilli != "" })
}

// quantizeModel quantizes one shipped model (models.Load(name)) with
// calibration rows from a deterministic openb run on cl, as
// quantizeShipped does for both.
func quantizeModel(cl *sim.Cluster, name string, version uint64) (*quant.Artifact, error) {
	envs, err := calibrationEnvs(cl, name)
	if err != nil {
		return nil, err
	}
	return quantizeIn(envs, name, quant.Info{Version: version, Created: time.Unix(1_800_000_000+int64(version), 0)})
}

// signedModel is a model file signed by a trusted key, and that key.
type signedModel struct {
	net       *int8net.Net
	modelPath string // the signed .esa
	pubPath   string // the trusted public key, alone in keyDir
	keyDir    string
}

// writeSignedModel signs a (version 1) with the test signer into dir.
func writeSignedModel(t testing.TB, dir string, a *quant.Artifact) signedModel {
	t.Helper()
	net, err := int8net.New(a)
	if err != nil {
		t.Fatal(err)
	}
	signer := e2eSigner(t, 1)
	keyDir := trustedKeyDir(t, dir, signer)
	sm := signedModel{net: net, modelPath: filepath.Join(dir, "model", "policy.esa"),
		pubPath: filepath.Join(keyDir, "coordinator.pub"), keyDir: keyDir}
	writeAtomic(t, sm.modelPath, signedWithVersion(t, a, signer, 1))
	return sm
}

// edgeCluster is a control plane with registered openb nodes, the target
// workload and the shipped default model quantized (version 1).
type edgeCluster = openbCluster[*quant.Artifact]

// startEdgeCluster starts the control plane and registers n openb nodes
// (startOpenbCluster) while the default model is quantized and the target
// workload loaded.
func startEdgeCluster(ctx context.Context, t testing.TB, n int) *edgeCluster {
	t.Helper()
	return startOpenbCluster(ctx, t, n, func(cl *sim.Cluster) (*quant.Artifact, error) { return quantizeModel(cl, "default", 1) })
}

// startExtender runs `edge-scheduler extender` on a free loopback port
// (with extra flags after the usual ones) and waits until /readyz answers
// "ok" (informers synced, model loaded). It returns the process and its
// base URL (http://127.0.0.1:PORT).
func startExtender(t testing.TB, cp *ControlPlane, bin string, sm signedModel, extra ...string) (*Process, string) {
	t.Helper()
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second}
	for attempt := 1; ; attempt++ {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		name := "edge-extender"
		if attempt > 1 {
			name += "-" + strconv.Itoa(attempt)
		}
		args := append([]string{"extender",
			"--listen", addr, "--kubeconfig", kubeconfig, "--model", sm.modelPath, "--model-keys", sm.pubPath,
			"--prefix", extPrefix, "--target-workload", edgeTarget, "--target-threshold", strconv.FormatFloat(edgeThreshold, 'g', -1, 64),
			"--v", "2"}, extra...)
		p, err := StartProcess(t, cp.Dir, name, cp.opts.StopGrace, bin, args...)
		if err != nil {
			t.Fatal(err)
		}
		base := "http://" + addr
		start := time.Now()
		err = waitFor(ctx, p, name+" /readyz", func(ctx context.Context) (bool, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
			if err != nil {
				return false, err
			}
			resp, err := hc.Do(req)
			if err != nil {
				return false, nil
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			// "ok (no model: ...)" would mean the signed model was refused.
			return resp.StatusCode == http.StatusOK && strings.TrimSpace(string(b)) == "ok", nil
		})
		if err == nil {
			t.Logf("e2e: %s ready at %s in %s", name, base, time.Since(start).Round(time.Millisecond))
			return p, base
		}
		p.Stop()
		// The extender reports a failed bind as "listen: ... address already in use".
		if !errors.Is(err, errAddrInUse) || attempt == 3 || ctx.Err() != nil {
			t.Fatalf("e2e: %s did not become ready: %v", name, err)
		}
		t.Logf("e2e: %v; retrying with another port", err)
	}
}

// k3sExtenderConfig rewrites deploy/edge-scheduler/k3s-extender.yaml for
// the test: its kubeconfig, leader election off, and every extender's
// urlPrefix pointed at base (the shipped path kept). Everything else
// (profile, disabled scorers, verbs, managed resources, weights,
// ignorable, nodeCacheCapable) is the shipped file's.
func k3sExtenderConfig(t testing.TB, dir, kubeconfig, base string) string {
	t.Helper()
	return k3sExtenderConfigFile(t, dir, "k3s-extender.yaml", kubeconfig, base)
}

// k3sExtenderConfigFile is k3sExtenderConfig for another shipped file of
// deploy/edge-scheduler (k3s-extender-policy.yaml), written to dir/file.
func k3sExtenderConfigFile(t testing.TB, dir, file, kubeconfig, base string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, file))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	cfg["clientConnection"] = map[string]any{"kubeconfig": kubeconfig}
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	profiles, _ := cfg["profiles"].([]any)
	if len(profiles) != 1 || profiles[0].(map[string]any)["schedulerName"] != corev1.DefaultSchedulerName {
		t.Fatalf("%s: want one profile %s, got %v", file, corev1.DefaultSchedulerName, profiles)
	}
	exts, _ := cfg["extenders"].([]any)
	if len(exts) == 0 {
		t.Fatalf("%s: no extenders", file)
	}
	verbs := map[string]bool{}
	for _, e := range exts {
		m := e.(map[string]any)
		u, _ := m["urlPrefix"].(string)
		i := strings.Index(strings.TrimPrefix(u, "http://"), "/")
		if !strings.HasPrefix(u, "http://") || i < 0 || strings.TrimPrefix(u, "http://")[i:] != extPrefix {
			t.Fatalf("%s: urlPrefix %q: want http://HOST:PORT%s", file, u, extPrefix)
		}
		m["urlPrefix"] = base + extPrefix
		for _, v := range []string{"filterVerb", "prioritizeVerb", "bindVerb"} {
			if s, ok := m[v].(string); ok {
				verbs[s] = true
			}
		}
	}
	if !verbs["filter"] || !verbs["prioritize"] || !verbs["bind"] {
		t.Fatalf("%s: verbs %v, want filter, prioritize and bind", file, verbs)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, file)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// extenderCall POSTs args to base+extPrefix+"/"+verb and decodes the reply into out.
func extenderCall(ctx context.Context, base, verb string, args *extenderv1.ExtenderArgs, out any) error {
	b, err := json.Marshal(args)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+extPrefix+"/"+verb, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", verb, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, out)
}

// extenderView asks the extender about probe (the pod about to be created)
// with the given nodes: the nodes its filter keeps (GPU pods only; others
// are not filtered) and its tied-best set (MaxExtenderPriority).
// Successful calls are counted in nFilter and nPrio.
func extenderView(ctx context.Context, base string, probe *corev1.Pod, nodes []corev1.Node, gpu bool, nFilter, nPrio *int) (kept, best []string, err error) {
	args := &extenderv1.ExtenderArgs{Pod: probe, Nodes: &corev1.NodeList{Items: nodes}}
	if gpu {
		var fr extenderv1.ExtenderFilterResult
		if err := extenderCall(ctx, base, "filter", args, &fr); err != nil {
			return nil, nil, err
		}
		*nFilter++
		if fr.Error != "" {
			return nil, nil, errors.New(fr.Error)
		}
		if fr.Nodes != nil {
			for _, n := range fr.Nodes.Items {
				kept = append(kept, n.Name)
			}
		}
	}
	var hp extenderv1.HostPriorityList
	if err := extenderCall(ctx, base, "prioritize", args, &hp); err != nil {
		return nil, nil, err
	}
	*nPrio++
	for _, h := range hp {
		if h.Score == extenderv1.MaxExtenderPriority {
			best = append(best, h.Host)
		}
	}
	slices.Sort(kept)
	slices.Sort(best)
	return kept, best, nil
}

// TestExtenderModeMatchesPlugin runs the stock kube-scheduler configured
// from deploy/edge-scheduler/k3s-extender.yaml with `edge-scheduler
// extender` against kine + kube-apiserver and 32 openb nodes, and checks
// that every pod (CPU, whole GPUs and GPU shares requesting the extended
// resources, some restricted to GPU models) binds, fits, and lands on a
// node in the simulator's tied-best set for the int8 policy given the
// pods already bound: the choices the plugin would make.
func TestExtenderModeMatchesPlugin(t *testing.T) {
	began := time.Now()
	bins := Build(t, KinePkg, APIServerPkg, SchedulerPkg, "github.com/edgesched/edgesched/cmd/edge-scheduler")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ec := startEdgeCluster(ctx, t, extNodes)
	cp := ec.cp
	dir := t.TempDir()
	sm := writeSignedModel(t, dir, ec.art)
	t.Logf("control plane, %d nodes and the signed int8 model ready at %s", len(ec.nodes), time.Since(began).Round(time.Millisecond))

	ext, base := startExtender(t, cp, bins[3], sm)
	m, err := scrapeMetrics(ctx, base+"/metrics", "")
	if err != nil {
		t.Fatal(err)
	}
	if v := m.sum("edgesched_plugin_model_version"); v != 1 {
		t.Fatalf("extender model_version %v, want 1: %s", v, m.series("edgesched_plugin_model_version"))
	}
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := k3sExtenderConfig(t, dir, kubeconfig, base)
	sched := cp.StartScheduler(t, SchedulerOptions{Binary: bins[2], Name: "kube-scheduler-k3s-extender", ConfigFile: cfgPath})

	ref, err := newSimReference(ec.nodes, ec.target)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "extender"
	if err := CreateNamespace(ctx, cp.Client, ns); err != nil {
		t.Fatal(err)
	}
	listPods := func() []corev1.Pod {
		t.Helper()
		l, err := cp.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: extLabel})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	nodeByName := map[string]corev1.Node{}
	for _, n := range ec.nodes {
		nodeByName[n.Name] = n
	}
	shapes := extShapes()
	r := &edgeRun{t: t, cp: cp, sched: sched, ref: ref, nodes: ec.nodes}
	nontrivial, gpuPods, lagPolls := 0, 0, 0
	var probeFilter, probePrio int // successful probe calls (they count in the extender's metrics)
	start := time.Now()
	for i := range extPods {
		shape := shapes[i%len(shapes)]
		pod := edgePod(fmt.Sprintf("%s-%03d", ns, i), shape)
		pod.Namespace = ns
		pod.Spec.SchedulerName = corev1.DefaultSchedulerName

		st, err := ref.state(listPods())
		if err != nil {
			t.Fatal(err)
		}
		// The probe is the pod as the apiserver will store it (the fields
		// the policy reads: QoS class Burstable, as requests without
		// matching CPU/memory limits make it).
		probe := pod.DeepCopy()
		probe.Status.QOSClass = corev1.PodQOSBurstable
		sp, err := ref.simPodOf(probe)
		if err != nil {
			t.Fatal(err)
		}
		d, err := ref.decide(sm.net, st, sp)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.ties) == 0 {
			t.Fatalf("pod %s: the simulator finds no feasible node (the test's pod mix does not fit)", pod.Name)
		}
		feasible := make([]corev1.Node, 0, len(d.feasible))
		for _, name := range d.feasible {
			feasible = append(feasible, nodeByName[name])
		}
		wantKept := slices.Sorted(slices.Values(d.feasible))
		wantBest := slices.Sorted(slices.Values(d.ties))

		// Wait until the extender's informers have caught up with the
		// bindings so far: its answer for this pod is the simulator's.
		var kept, best []string
		var viewErr error
		polls := 0
		err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			polls++
			kept, best, viewErr = extenderView(ctx, base, probe, feasible, sp.GPUs > 0, &probeFilter, &probePrio)
			return viewErr == nil && (sp.GPUs == 0 || slices.Equal(kept, wantKept)) && slices.Equal(best, wantBest), nil
		})
		if err != nil {
			t.Fatalf("pod %s: the extender never agreed with the simulator: error %v; filter kept %v of feasible %v; tied best %v, simulator's %v",
				pod.Name, viewErr, kept, wantKept, best, wantBest)
		}
		lagPolls += polls - 1

		if _, err := cp.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", pod.Name, err)
		}
		bound := r.waitBound(ctx, ns, pod.Name)
		got, err := ref.simPodOf(bound)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, sp) {
			t.Fatalf("pod %s as stored converts to %+v, the probe to %+v", pod.Name, got, sp)
		}
		node := bound.Spec.NodeName
		if !slices.Contains(d.ties, node) {
			t.Fatalf("pod %s: kube-scheduler + extender chose %s (sim score %v), the simulator's int8 policy ties %v (score %v); feasible %d nodes",
				pod.Name, node, d.scores[node], d.ties, d.scores[d.ties[0]], len(d.feasible))
		}
		if sp.GPUs > 0 {
			// bound by the extender, with the policy's devices
			got, err := podDevices(bound)
			if err != nil {
				t.Fatal(err)
			}
			if want := d.devices[node]; !slices.Equal(got, want) {
				t.Fatalf("pod %s on %s: devices %v, the simulator's policy picks %v", pod.Name, node, got, want)
			}
		} else if _, ok := bound.Annotations[edgeplugin.AnnotationGPUDevices]; ok {
			t.Errorf("pod %s has no GPU but a %s annotation", pod.Name, edgeplugin.AnnotationGPUDevices)
		}
		if len(d.ties) < len(d.feasible) {
			nontrivial++
		}
		if sp.GPUs > 0 {
			gpuPods++
		}
		t.Logf("%s -> %s (tied best %d of %d feasible)", pod.Name, node, len(d.ties), len(d.feasible))
	}
	t.Logf("parity: %d of %d decisions agree with the simulator (%d narrower than the feasible set, %d GPU pods bound by the extender with the policy's devices) in %s; %d extra probe polls waited for the extender's informers",
		extPods, extPods, nontrivial, gpuPods, time.Since(start).Round(time.Millisecond), lagPolls)
	if nontrivial < extPods/2 {
		t.Fatalf("only %d of %d decisions were narrower than the feasible set: the comparison proves little", nontrivial, extPods)
	}

	// Every pod bound, fits, and the recorded devices fit their nodes.
	pods := listPods()
	if len(pods) != extPods {
		t.Fatalf("%d pods, want %d", len(pods), extPods)
	}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			t.Errorf("pod %s is not bound", p.Name)
		}
	}
	if err := CheckFits(ec.nodes, pods); err != nil {
		t.Fatalf("a binding does not fit its node:\n%v", err)
	}
	if _, err := ref.state(pods); err != nil {
		t.Fatalf("GPU pods do not fit their nodes' devices: %v", err)
	}

	// The scheduler: one successful attempt per pod, no FailedScheduling.
	r.checkNoFailuresProfile(ctx, corev1.DefaultSchedulerName, len(pods))
	// The extender: every call answered, the policy never fell back.
	em, err := scrapeMetrics(ctx, base+"/metrics", "")
	if err != nil {
		t.Fatal(err)
	}
	okFilter := em.sum("edgesched_extender_requests_total", `verb="filter"`, `result="ok"`)
	okPrio := em.sum("edgesched_extender_requests_total", `verb="prioritize"`, `result="ok"`)
	okBind := em.sum("edgesched_extender_requests_total", `verb="bind"`, `result="ok"`)
	all := em.sum("edgesched_extender_requests_total")
	// Besides the probes, the scheduler called filter and bind exactly
	// once per GPU pod (managedResources: never for CPU pods) and
	// prioritize once per pod: every placement was ranked by the extender.
	if int(okFilter) != gpuPods+probeFilter || int(okPrio) != extPods+probePrio || int(okBind) != gpuPods || all != okFilter+okPrio+okBind {
		t.Errorf("extender requests: want %d+%d ok filter calls (scheduler+probes), %d+%d ok prioritize calls, %d ok bind calls and no others: %s",
			gpuPods, probeFilter, extPods, probePrio, gpuPods, em.series("edgesched_extender_requests_total"))
	}
	if f := em.sum("edgesched_plugin_fallbacks_total"); f != 0 {
		t.Errorf("the extender scored neutrally: %s", em.series("edgesched_plugin_fallbacks_total"))
	}
	if p := em.sum("edgesched_plugin_panics_total"); p != 0 {
		t.Errorf("extender panics: %v", p)
	}
	if ex, err := ext.Exited(); ex || err != nil {
		t.Errorf("the extender exited: %v", err)
	}
	t.Logf("extender: scheduler made %d filter, %d prioritize and %d bind calls (plus %d and %d probes), all ok; whole test %s",
		int(okFilter)-probeFilter, int(okPrio)-probePrio, int(okBind), probeFilter, probePrio, time.Since(began).Round(time.Millisecond))
}

// checkNoFailuresProfile asserts that profile made want successful
// scheduling attempts and no failed ones, and that no pod has a
// FailedScheduling event or an unscheduled PodScheduled condition.
func (r *edgeRun) checkNoFailuresProfile(ctx context.Context, profile string, want int) {
	r.t.Helper()
	var m metrics
	// The attempts counter is updated right after binding: poll briefly.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		m, err = scrapeMetrics(ctx, r.sched.URL+"/metrics", r.cp.Token)
		return err == nil && int(m.sum("scheduler_schedule_attempts_total", `profile="`+profile+`"`, `result="scheduled"`)) >= want, nil
	})
	sel := `profile="` + profile + `"`
	ok := m.sum("scheduler_schedule_attempts_total", sel, `result="scheduled"`)
	bad := m.sum("scheduler_schedule_attempts_total", sel, `result="unschedulable"`) + m.sum("scheduler_schedule_attempts_total", sel, `result="error"`)
	if err != nil || bad != 0 || int(ok) != want {
		r.t.Errorf("want %d scheduled attempts of profile %s and no others: %s", want, profile, m.series("scheduler_schedule_attempts_total"))
	}
	ev, err := r.cp.Client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, e := range ev.Items {
		r.t.Errorf("event %s %s/%s: %s", e.Reason, e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Message)
	}
}
