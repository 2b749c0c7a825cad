package agent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/edgesched/edgesched/agent/telemetry/bpf"
	"github.com/edgesched/edgesched/internal/kube/kubeclientset"
	"github.com/edgesched/edgesched/kubefmt"
)

// logBuffer is a goroutine-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fastConfig samples the live /proc every 100 ms and annotates every
// second over a 1 s window.
func fastConfig(cs *fake.Clientset, logs *logBuffer) Config {
	return Config{
		NodeName: "n1", Client: kubeclientset.Wrap(cs), Seed: 7,
		Logger:         slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		SampleInterval: 100 * time.Millisecond, AnnotateInterval: time.Second, Window: time.Second,
		RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond,
	}
}

// waitFor polls cond every 50 ms until it holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// blocker is a Component that runs until its context ends.
type blocker struct{ started, stopped atomic.Bool }

func (b *blocker) Run(ctx context.Context) error {
	b.started.Store(true)
	<-ctx.Done()
	b.stopped.Store(true)
	return nil
}

type failing struct{ after time.Duration }

var errBroken = errors.New("component broke")

func (f failing) Run(ctx context.Context) error {
	select {
	case <-time.After(f.after):
		return errBroken
	case <-ctx.Done():
		return nil
	}
}

func startRun(t *testing.T, a *Agent) (cancel func(), done <-chan error) {
	ctx, cancelFn := context.WithCancel(context.Background())
	ch, finished := make(chan error, 1), make(chan struct{})
	go func() {
		ch <- a.Run(ctx)
		close(finished)
	}()
	t.Cleanup(func() {
		cancelFn()
		select {
		case <-finished:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return 10 s after cancel")
		}
	})
	return cancelFn, ch
}

// TestRunAnnotatesLiveNode runs the whole agent on this machine's /proc
// against a fake API: the annotation appears and decodes, the eBPF
// failure is said once, components run and stop with the agent.
func TestRunAnnotatesLiveNode(t *testing.T) {
	cs := fake.NewClientset(nodeObject("n1"))
	var logs logBuffer
	cfg := fastConfig(cs, &logs)
	comp := &blocker{}
	cfg.Components = []Component{comp}
	cfg.LoadProbes = func(*slog.Logger) (Probes, error) {
		return nil, errors.New("bpf: eBPF telemetry unavailable: not allowed in this test")
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cancel, done := startRun(t, a)
	var s kubefmt.TelemetrySummary
	waitFor(t, 10*time.Second, "the telemetry annotation", func() bool {
		var ok bool
		s, ok = annotation(t, cs, "n1")
		return ok
	})
	if s.Window < time.Second || s.RunQueueP99Us != nil || s.RetransPerS == nil || s.Mem <= 0 {
		t.Fatalf("summary %+v: want a >= 1 s window, memory in use, retransmits from /proc/net/snmp, no run-queue p99", s)
	}
	if age := time.Since(s.Time); age > 5*time.Second || age < -time.Second {
		t.Fatalf("summary timestamp %v is %v old", s.Time, age)
	}
	// Let a few more samples happen; the warning is still logged once.
	n := testSamples(a)
	waitFor(t, 5*time.Second, "more samples", func() bool { return testSamples(a) >= n+5 })
	if c := strings.Count(logs.String(), "eBPF telemetry unavailable; sampling /proc only"); c != 1 {
		t.Fatalf("eBPF warning logged %d times, want once:\n%s", c, logs.String())
	}
	if !strings.Contains(logs.String(), "not allowed in this test") {
		t.Fatalf("the warning does not give the reason:\n%s", logs.String())
	}
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	if m := scrape(t, srv.URL+"/metrics"); m[`edgesched_agent_telemetry_source{source="proc"}`] != 1 || m[`edgesched_agent_annotation_writes_total{result="ok"}`] < 1 {
		t.Fatalf("source/annotation metrics wrong: proc=%v writes=%v", m[`edgesched_agent_telemetry_source{source="proc"}`], m[`edgesched_agent_annotation_writes_total{result="ok"}`])
	}
	if !comp.started.Load() {
		t.Fatal("component not started")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop")
	}
	if !comp.stopped.Load() {
		t.Fatal("component did not see the agent stop")
	}
}

func testSamples(a *Agent) int { return int(testutil.ToFloat64(a.m.samples)) }

func nodeObject(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// annotation returns the node's decoded telemetry summary, if any.
func annotation(t *testing.T, cs *fake.Clientset, name string) (kubefmt.TelemetrySummary, bool) {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := n.Annotations[kubefmt.AnnotationTelemetry]
	if !ok {
		return kubefmt.TelemetrySummary{}, false
	}
	s, err := kubefmt.DecodeTelemetry(v)
	if err != nil {
		t.Fatalf("annotation %q: %v", v, err)
	}
	return s, true
}

// TestRunComponentFailureStopsAgent: one component failing stops the
// others and Run returns its error.
func TestRunComponentFailureStopsAgent(t *testing.T) {
	cs := fake.NewClientset(nodeObject("n1"))
	var logs logBuffer
	cfg := fastConfig(cs, &logs)
	other := &blocker{}
	cfg.Components = []Component{other, failing{after: 300 * time.Millisecond}}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, done := startRun(t, a)
	select {
	case err := <-done:
		if !errors.Is(err, errBroken) || !strings.Contains(err.Error(), "component 1") {
			t.Fatalf("Run = %v, want the component's error naming it", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop after a component failed")
	}
	if !other.stopped.Load() {
		t.Fatal("the other component was not stopped")
	}
}

// TestRunMetricsAddrInUse: a listener that cannot bind fails Run at once.
func TestRunMetricsAddrInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := fastConfig(fake.NewClientset(), &logBuffer{})
	cfg.MetricsAddr = ln.Addr().String()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "metrics listener") {
		t.Fatalf("Run = %v, want a metrics listener error", err)
	}
	if err := a.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("second Run = %v", err)
	}
}

// fakeProbes counts wakeups in bucket 4 ([16, 32) µs) and fails after
// failAfter snapshots (0: never).
type fakeProbes struct {
	mu        sync.Mutex
	n         int
	failAfter int
	closed    bool
}

func (p *fakeProbes) Snapshot() (bpf.Snapshot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if p.failAfter > 0 && p.n > p.failAfter {
		return bpf.Snapshot{}, errors.New("map lookup: bad file descriptor")
	}
	var s bpf.Snapshot
	s.RunQueue.Buckets[4] = uint64(100 * p.n)
	s.Retransmits = uint64(p.n)
	return s, nil
}

func (p *fakeProbes) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	return nil
}

// TestRunProbesFailLater: with probes the summary carries the run-queue
// p99; when they fail the agent says so once and continues on /proc.
func TestRunProbesFailLater(t *testing.T) {
	cs := fake.NewClientset(nodeObject("n1"))
	var logs logBuffer
	cfg := fastConfig(cs, &logs)
	probes := &fakeProbes{failAfter: 40} // 4 s at 10 Hz
	cfg.LoadProbes = func(*slog.Logger) (Probes, error) { return probes, nil }
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	startRun(t, a)
	waitFor(t, 10*time.Second, "an annotation with the run-queue p99", func() bool {
		s, ok := annotation(t, cs, "n1")
		// 100 wakeups per sample, all in [16, 32) µs: p99 = 16 + 0.99 × 16 = 31.84 µs.
		return ok && s.RunQueueP99Us != nil && *s.RunQueueP99Us == 31.84 && s.RetransPerS != nil && *s.RetransPerS > 0
	})
	waitFor(t, 10*time.Second, "the switch to /proc", func() bool {
		return strings.Contains(logs.String(), "eBPF telemetry failed")
	})
	n := testSamples(a)
	waitFor(t, 5*time.Second, "more samples", func() bool { return testSamples(a) >= n+5 })
	if c := strings.Count(logs.String(), "eBPF telemetry failed"); c != 1 {
		t.Fatalf("failure logged %d times, want once", c)
	}
	probes.mu.Lock()
	closed := probes.closed
	probes.mu.Unlock()
	if !closed {
		t.Fatal("failed probes not closed")
	}
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	if m := scrape(t, srv.URL+"/metrics"); m[`edgesched_agent_telemetry_source{source="proc"}`] != 1 || m[`edgesched_agent_sample_errors_total{source="ebpf"}`] != 1 {
		t.Fatalf("after the failure: source proc %v, ebpf errors %v", m[`edgesched_agent_telemetry_source{source="proc"}`], m[`edgesched_agent_sample_errors_total{source="ebpf"}`])
	}
	// Once the window has only /proc records, the p99 is gone from the
	// summary (a change, so written).
	waitFor(t, 10*time.Second, "an annotation without the p99", func() bool {
		s, ok := annotation(t, cs, "n1")
		return ok && s.RunQueueP99Us == nil
	})
}

// TestRunWithRealProbes loads the real eBPF programs (root only) and
// checks the agent's summary carries their measures.
func TestRunWithRealProbes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("loading eBPF programs needs root (euid %d)", os.Geteuid())
	}
	probes, err := bpf.Load(bpf.DefaultConfig(), nil)
	if errors.Is(err, bpf.ErrUnavailable) {
		t.Skipf("eBPF unavailable here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset(nodeObject("n1"))
	var logs logBuffer
	cfg := fastConfig(cs, &logs)
	cfg.LoadProbes = func(*slog.Logger) (Probes, error) { return probes, nil }
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	startRun(t, a)
	waitFor(t, 15*time.Second, "an annotation with eBPF measures", func() bool {
		s, ok := annotation(t, cs, "n1")
		return ok && s.RunQueueP99Us != nil && *s.RunQueueP99Us > 0 && s.RetransPerS != nil
	})
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	m := scrape(t, srv.URL+"/metrics")
	if m[`edgesched_agent_telemetry_source{source="ebpf"}`] != 1 || m[`edgesched_agent_runqueue_latency_seconds_count`] == 0 {
		t.Fatalf("eBPF metrics: source %v, run-queue observations %v", m[`edgesched_agent_telemetry_source{source="ebpf"}`], m[`edgesched_agent_runqueue_latency_seconds_count`])
	}
	s, _ := annotation(t, cs, "n1")
	t.Logf("summary with eBPF: cpu %.3f mem %.3f load1 %.2f runq p99 %.1f µs retrans %.2f/s (%d run-queue observations)",
		s.CPU, s.Mem, s.Load1, *s.RunQueueP99Us, *s.RetransPerS, int(m[`edgesched_agent_runqueue_latency_seconds_count`]))
}

func TestConfigValidate(t *testing.T) {
	cs := fake.NewClientset()
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"client without node", Config{Client: kubeclientset.Wrap(cs)}, "node name is required"},
		{"negative interval", Config{SampleInterval: -time.Second}, "sample interval -1s is negative"},
		{"tiny interval", Config{SampleInterval: time.Millisecond}, "below 10ms"},
		{"sample longer than annotate", Config{SampleInterval: 20 * time.Second}, "longer than the annotate interval"},
		{"window too short", Config{SampleInterval: 100 * time.Millisecond, Window: 500 * time.Millisecond}, "window 500ms not in"},
		{"annotate too slow for staleness", Config{Client: kubeclientset.Wrap(cs), NodeName: "n1", AnnotateInterval: time.Minute}, "below half the stale-after"},
		{"stall too short", Config{StallAfter: time.Second}, "stall-after 1s must exceed"},
		{"retry order", Config{RetryMin: time.Second, RetryMax: time.Millisecond}, "retry max"},
		{"relative cgroup", Config{}, ""},
		{"nil component", Config{Components: []Component{nil}}, "component 0 is nil"},
		{"ring above its cap", Config{SampleInterval: 10 * time.Millisecond, Window: time.Hour}, "keeps 360003 samples in memory, above the cap of 4096"},
	}
	cases[8].cfg.Proc.Cgroup, cases[8].want = "pods", "must start with /"
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want ErrConfig mentioning %q", err, tc.want)
			}
		})
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	// without a client nothing is written: the staleness bound does not
	// constrain the annotate interval (still the summary window)
	if err := (Config{AnnotateInterval: time.Minute}).Validate(); err != nil {
		t.Fatalf("no client, annotate interval of half the staleness bound: %v", err)
	}
	d := DefaultConfig()
	if d.SampleInterval != time.Second || d.AnnotateInterval != 10*time.Second || d.Window != 10*time.Second ||
		d.StaleAfter != 2*time.Minute || d.StallAfter != 5*time.Second || d.Proc.ProcRoot != "/proc" {
		t.Fatalf("defaults %+v", d)
	}
}

// TestRingSamplesCapped: the ring of samples holds at most MaxRingSamples
// whatever the settings. Validate refuses a window and sample interval
// that would keep more, naming both, the count, the cap and the shortest
// interval that fits; at the cap New sizes the ring within it. Before,
// an hour's window sampled every 10 ms allocated 360,003 samples.
func TestRingSamplesCapped(t *testing.T) {
	cases := []struct {
		name             string
		interval, window time.Duration
		want             string // "": valid
	}{
		{"an hour every 10ms", 10 * time.Millisecond, time.Hour,
			"sample interval 10ms with window 1h0m0s keeps 360003 samples in memory, above the cap of 4096 (MaxRingSamples): sample every 880ms or more, or shorten the window"},
		{"an hour every 879ms", 879 * time.Millisecond, time.Hour, "keeps 4098 samples in memory"},
		{"an hour every 880ms", 880 * time.Millisecond, time.Hour, ""},
		{"an hour every second", time.Second, time.Hour, ""},
		{"10s every 10ms", 10 * time.Millisecond, 10 * time.Second, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{SampleInterval: tc.interval, Window: tc.window}
			err := cfg.Validate()
			if tc.want != "" {
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Validate = %v, want ErrConfig mentioning %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate = %v, want nil", err)
			}
			a, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(a.ring.recs); n > MaxRingSamples || int64(n) != ringSamples(tc.window, tc.interval) {
				t.Fatalf("ring of %d samples, want %d, at most %d", n, ringSamples(tc.window, tc.interval), MaxRingSamples)
			}
		})
	}
}
