package trace

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/edgesched/edgesched/agent/trace/tracefmt"
	"github.com/edgesched/edgesched/internal/kube"
	"github.com/edgesched/edgesched/internal/kube/kubeclientset"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
)

// fakeClient adapts the fake clientset, which says it cannot serve
// watch-list streams (without that the informers would wait for the
// end-of-initial-events bookmark the fake never sends).
func fakeClient(cs kubernetes.Interface) kube.Interface { return kubeclientset.Wrap(cs) }

func testNode(name string, tel *kubefmt.TelemetrySummary) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kubefmt.LabelZone: "zone-a", kubefmt.LabelGPUModel: "T4"}, Annotations: map[string]string{}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), kubefmt.ResourceGPU: resource.MustParse("2")}}}
	if tel != nil {
		v, err := kubefmt.EncodeTelemetry(*tel)
		if err != nil {
			panic(err)
		}
		n.Annotations[kubefmt.AnnotationTelemetry] = v
	}
	return n
}

func testPod(name, node, ip string, gpuMilli string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0),
		Labels: map[string]string{"app": "web"}, Annotations: map[string]string{}},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("100Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: ip}}
	if gpuMilli != "" {
		p.Annotations[kubefmt.AnnotationGPUMilli] = gpuMilli
	}
	return p
}

// startRecorder runs a recorder until the returned stop is called.
func startRecorder(t *testing.T, s *Store, client kubernetes.Interface, now func() time.Time) (*Recorder, func()) {
	t.Helper()
	cfg := DefaultRecorderConfig()
	cfg.Store, cfg.Client, cfg.NodeName, cfg.FlowInterval, cfg.Now = s, fakeClient(client), "n1", time.Second, now
	r, err := NewRecorder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r, runRecorder(t, r)
}

// runRecorder runs r until the returned stop is called, which checks that
// Run ends with context.Canceled.
func runRecorder(t *testing.T, r *Recorder) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("recorder: %v", err)
		}
	}
}

// poll checks cond every 20 ms until it holds or within passes.
func poll(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	fltest.Poll(t, 20*time.Millisecond, within, what, cond)
}

func countKinds(t *testing.T, s *Store) map[tracefmt.Kind]int {
	t.Helper()
	n := map[tracefmt.Kind]int{}
	if err := s.Events(func(_ uint64, e tracefmt.Event) error { n[e.Kind]++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRecorderLogic drives a Recorder with client-go's fake clientset
// (the e2e test runs it against the real apiserver): arrivals, bindings,
// usage from the telemetry annotation, the node's flows published and
// read back, and pods deleted while the recorder was down.
func TestRecorderLogic(t *testing.T) {
	ctx := context.Background()
	tel := kubefmt.TelemetrySummary{Time: t0.Add(time.Minute), Window: 10 * time.Second, CPU: 0.5, Mem: 0.25, Load1: 1}
	client := fake.NewClientset(testNode("n1", &tel),
		testPod("web-1", "n1", "10.0.0.1", ""), testPod("web-2", "n1", "10.0.0.2", "300"), testPod("web-3", "", "", ""))
	s := openTest(t, filepath.Join(t.TempDir(), "trace.db"), 24*time.Hour, 1000, func() time.Time { return t0.Add(time.Hour) })
	defer s.Close()
	r, stop := startRecorder(t, s, client, nil)
	poll(t, 10*time.Second, "the first list recorded", func() (bool, string) {
		k := countKinds(t, s)
		return r.Synced() && k[tracefmt.PodArrival] == 3 && k[tracefmt.PodBinding] == 2 && k[tracefmt.NodeUsage] == 1, fmt.Sprint(k)
	})
	live, _ := s.LivePods()
	var web2 *tracefmt.Pod
	for _, e := range live {
		if e.Pod.Name == "web-2" {
			web2 = e.Pod
		}
	}
	// 500m and 100Mi, one shared GPU at 300 milli, CPU limit 1000m,
	// service from the app label, bound to n1
	if web2 == nil || web2.CPUMilli != 500 || web2.MemoryMiB != 100 || web2.GPUs != 1 || web2.GPUMilli != 300 || web2.CPULimitMilli != 1000 || web2.Service != "web" || web2.Node != "n1" {
		t.Fatalf("web-2 recorded as %+v", web2)
	}
	var usage *tracefmt.Usage
	_ = s.Events(func(_ uint64, e tracefmt.Event) error {
		if e.Kind == tracefmt.NodeUsage {
			usage = e.Usage
		}
		return nil
	})
	// n1 has 4 CPUs; web-1 and web-2 request 500m each (web-3 is pending)
	if usage == nil || usage.CPU != 0.5 || usage.CPUMilli != 4000 || usage.RequestedCPUMilli != 1000 {
		t.Fatalf("usage %+v, want cpu 0.5 of 4000m with 1000m requested", usage)
	}
	nodes, _ := s.Nodes()
	if len(nodes) != 1 || nodes[0].Node.GPUs != 2 || nodes[0].Node.GPUModel != "T4" || nodes[0].Node.Zone != "zone-a" || nodes[0].Node.Arch != sim.ArchAMD64 {
		t.Fatalf("nodes %+v", nodes)
	}

	// flows: web-1 -> web-2 opens 50 connections per 10 s of collector
	// time (5/s); an address outside the cluster is ignored
	a, b, ext := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("192.0.2.9")
	var conns uint64
	at := t0
	poll(t, 15*time.Second, "the flows annotation", func() (bool, string) {
		conns += 50
		at = at.Add(10 * time.Second)
		r.ObserveFlows(at, []FlowCount{{Src: a, Dst: b, DstPort: 8080, Conns: conns}, {Src: a, Dst: ext, DstPort: 443, Conns: conns}})
		time.Sleep(200 * time.Millisecond)
		n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		v, ok := n.Annotations[kubefmt.FlowsAnnotation]
		if !ok {
			return false, "no annotation"
		}
		f, err := kubefmt.DecodeFlows(v)
		if err != nil {
			return false, err.Error()
		}
		return len(f.Edges) == 1 && f.Edges[0].Src.Name == "web-1" && f.Edges[0].Dst.Name == "web-2" && f.Edges[0].CallsPerSecond == 5, v
	})
	poll(t, 10*time.Second, "edges recorded from the annotation", func() (bool, string) {
		k := countKinds(t, s)
		return k[tracefmt.EdgeRate] >= 1, fmt.Sprint(k)
	})
	stop()

	// while the recorder is down: web-1 is deleted, web-4 created
	if err := client.CoreV1().Pods("shop").Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods("shop").Create(ctx, testPod("web-4", "", "", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r, stop = startRecorder(t, s, client, nil)
	defer stop()
	poll(t, 10*time.Second, "the changes made while down", func() (bool, string) {
		k := countKinds(t, s)
		return r.Synced() && k[tracefmt.PodArrival] == 4 && k[tracefmt.PodDeletion] == 1, fmt.Sprint(k)
	})
	live, _ = s.LivePods()
	if len(live) != 3 {
		t.Fatalf("%d live pods, want web-2, web-3, web-4", len(live))
	}
	// a pod that finished counts as gone
	done := testPod("web-3", "", "", "")
	done.Status.Phase = v1.PodSucceeded
	if _, err := client.CoreV1().Pods("shop").UpdateStatus(ctx, done, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 10*time.Second, "the finished pod", func() (bool, string) {
		k := countKinds(t, s)
		return k[tracefmt.PodDeletion] == 2, fmt.Sprint(k)
	})
}

func TestRecorderConfig(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "trace.db"), time.Hour, 10, nil)
	defer s.Close()
	cases := []struct {
		name string
		mod  func(*RecorderConfig)
	}{
		{"no store", func(c *RecorderConfig) { c.Store = nil }},
		{"no client", func(c *RecorderConfig) { c.Client = nil }},
		{"interval", func(c *RecorderConfig) { c.FlowInterval = time.Millisecond }},
		{"backoff", func(c *RecorderConfig) { c.BackoffMax = 0 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultRecorderConfig()
			cfg.Store, cfg.Client = s, fakeClient(fake.NewClientset())
			tc.mod(&cfg)
			if _, err := NewRecorder(cfg); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestRecordBounds: GPU model names are cut to MaxGPUModel bytes (on a
// character boundary) and at most 64 kept when a pod or node is turned
// into a record, so the record encodes; the other fields are kept as
// they are (the store refuses what the format cannot hold).
func TestRecordBounds(t *testing.T) {
	models := func(names ...string) *v1.Pod {
		p := testPod("gpu", "", "", "")
		p.Spec.Containers[0].Resources.Requests[kubefmt.ResourceGPU] = resource.MustParse("1")
		p.Annotations[kubefmt.AnnotationGPUModels] = strings.Join(names, ",")
		return p
	}
	many := make([]string, 70)
	for i := range many {
		many[i] = fmt.Sprintf("%03d-%s", i, strings.Repeat("m", 300))
	}
	// 62 ASCII bytes then "é" (2 bytes): bytes 63 and 64, cut before it
	accent := strings.Repeat("a", 62) + "é"
	cases := []struct {
		name string
		pod  *v1.Pod
		want []string
	}{
		{"short names kept", models("T4", "A100"), []string{"T4", "A100"}},
		{"long name cut", models("T4", strings.Repeat("g", 2000)), []string{"T4", strings.Repeat("g", tracefmt.MaxGPUModel)}},
		{"cut on a character boundary", models(accent), []string{strings.Repeat("a", 62)}},
		{"64 of 70 kept, each cut", models(many...), func() []string {
			out := make([]string, tracefmt.MaxModels)
			for i := range out {
				out[i] = many[i][:tracefmt.MaxGPUModel]
			}
			return out
		}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := PodRecord(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rec.GPUModels, tc.want) {
				t.Fatalf("models %q, want %q", rec.GPUModels, tc.want)
			}
			if _, err := tracefmt.EncodeEvent(tracefmt.Event{Kind: tracefmt.PodArrival, Time: t0, Pod: &rec}); err != nil {
				t.Fatalf("record does not encode: %v", err)
			}
		})
	}
	t.Run("node model and zone", func(t *testing.T) {
		n := testNode("g1", nil)
		n.Labels[kubefmt.LabelGPUModel] = strings.Repeat("g", 500)
		n.Labels[kubefmt.LabelZone] = strings.Repeat("z", 3000)
		rec := NodeRecord(n)
		if len(rec.GPUModel) != tracefmt.MaxGPUModel || len(rec.Zone) != tracefmt.MaxString {
			t.Fatalf("model of %d bytes, zone of %d; want %d and %d", len(rec.GPUModel), len(rec.Zone), tracefmt.MaxGPUModel, tracefmt.MaxString)
		}
		if _, err := tracefmt.EncodeEvent(tracefmt.Event{Kind: tracefmt.NodeInfo, Time: t0, Node: &rec}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestBindingTime: the PodScheduled condition's time when it is True,
// kept within [creationTimestamp, now]; the clock otherwise.
func TestBindingTime(t *testing.T) {
	now := t0.Add(2 * time.Hour)
	cond := func(status v1.ConditionStatus, at time.Time) []v1.PodCondition {
		return []v1.PodCondition{{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(time.Minute))},
			{Type: v1.PodScheduled, Status: status, LastTransitionTime: metav1.NewTime(at)}}
	}
	cases := []struct {
		name  string
		conds []v1.PodCondition
		want  time.Time
	}{
		{"scheduled an hour ago", cond(v1.ConditionTrue, now.Add(-time.Hour)), now.Add(-time.Hour)},
		{"no condition", nil, now},
		{"not scheduled", cond(v1.ConditionFalse, now.Add(-time.Hour)), now},
		{"zero time", cond(v1.ConditionTrue, time.Time{}), now},
		// the pod was created at t0: an earlier time is another clock's
		{"before creation", cond(v1.ConditionTrue, t0.Add(-time.Minute)), t0},
		{"in the future", cond(v1.ConditionTrue, now.Add(time.Minute)), now},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := testPod("p", "n1", "", "")
			p.Status.Conditions = tc.conds
			if got := BindingTime(p, now); !got.Equal(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRecorderBindingTimeAfterRestart: a fresh recorder (an agent just
// restarted, with an empty store) that first sees a pod bound an hour
// before records the binding at the pod's PodScheduled time, not at the
// moment it looked; a bound pod without the condition gets the clock.
func TestRecorderBindingTimeAfterRestart(t *testing.T) {
	now := t0.Add(2 * time.Hour)
	old := testPod("old", "n1", "", "") // created at t0
	old.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}
	bare := testPod("bare", "n1", "", "")
	client := fake.NewClientset(testNode("n1", nil), old, bare)
	s := openTest(t, filepath.Join(t.TempDir(), "trace.db"), 24*time.Hour, 1000, func() time.Time { return now })
	defer s.Close()
	r, stop := startRecorder(t, s, client, func() time.Time { return now })
	defer stop()
	got := map[string]time.Time{}
	poll(t, 10*time.Second, "two bindings", func() (bool, string) {
		clear(got)
		if err := s.Events(func(_ uint64, e tracefmt.Event) error {
			if e.Kind == tracefmt.PodBinding {
				got[e.Pod.Name] = e.Time
			}
			return nil
		}); err != nil {
			return false, err.Error()
		}
		return r.Synced() && len(got) == 2, fmt.Sprint(got)
	})
	if want := now.Add(-time.Hour); !got["old"].Equal(want) {
		t.Errorf("old bound at %v, want its PodScheduled time %v (an hour before the recorder saw it)", got["old"], want)
	}
	if !got["bare"].Equal(now) {
		t.Errorf("bare bound at %v, want the recorder's clock %v", got["bare"], now)
	}
}

// TestRecorderRefusedPod: a pod the record format cannot hold (a service
// label of 2,000 bytes, which a fake clientset does not refuse) is refused
// on its own, counted and logged once with the pod and the field; the
// other pods of its batch are recorded.
func TestRecorderRefusedPod(t *testing.T) {
	bad := testPod("bad", "", "", "")
	bad.Labels["app"] = strings.Repeat("s", 2000)
	client := fake.NewClientset(testPod("web-1", "", "", ""), bad, testPod("web-2", "", "", ""))
	s := openTest(t, filepath.Join(t.TempDir(), "trace.db"), 24*time.Hour, 1000, func() time.Time { return t0 })
	defer s.Close()
	logs := &lockedBuffer{}
	cfg := DefaultRecorderConfig()
	cfg.Store, cfg.Client, cfg.Logger = s, fakeClient(client), slog.New(slog.NewTextHandler(logs, nil))
	r, err := NewRecorder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runRecorder(t, r)
	poll(t, 10*time.Second, "the refusal counted", func() (bool, string) {
		st := r.Stats()
		return r.Synced() && st.Refused == 1 && st.Recorded == 2, fmt.Sprintf("%+v", st)
	})
	stop()
	live, err := s.LivePods()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range live {
		names = append(names, e.Pod.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"web-1", "web-2"}) {
		t.Fatalf("live pods %v, want web-1 and web-2", names)
	}
	out := logs.String()
	if n := strings.Count(out, "trace records refused"); n != 1 {
		t.Fatalf("%d refusal log lines, want 1:\n%s", n, out)
	}
	for _, w := range []string{"pod shop/bad, uid uid-bad", "service is 2000 bytes"} {
		if !strings.Contains(out, w) {
			t.Errorf("log does not mention %q:\n%s", w, out)
		}
	}
	if st := r.Stats(); st.WriteErrors != 0 {
		t.Errorf("%d write errors, want 0 (a refusal is not retried)", st.WriteErrors)
	}
}

// lockedBuffer is a bytes.Buffer safe for a logger and a test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
