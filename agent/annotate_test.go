package agent

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/edgesched/edgesched/internal/backoff"
	"github.com/edgesched/edgesched/internal/kube/kubeclientset"
	"github.com/edgesched/edgesched/kubefmt"
)

// clock is a settable clock for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// TestLimiter walks the write decisions through time with an injected
// clock: interval 10 s, refresh at 60 s (half a 2 min staleness bound).
func TestLimiter(t *testing.T) {
	l := limiter{interval: 10 * time.Second, refresh: 60 * time.Second}
	sum := func(cpu float64) kubefmt.TelemetrySummary {
		return kubefmt.TelemetrySummary{Time: t0, Window: 10 * time.Second, CPU: cpu, Mem: 0.5, Load1: 1}
	}
	steps := []struct {
		at     time.Duration
		cpu    float64
		write  bool
		reason string
	}{
		{0, 0.30, true, decideFirst},
		{5 * time.Second, 0.90, false, decideTooSoon},                      // 5 s < 10 s since the write at 0
		{10 * time.Second, 0.305, false, decideUnchanged},                  // |0.305 - 0.30| < 0.01
		{20 * time.Second, 0.32, true, decideChanged},                      // |0.32 - 0.30| >= 0.01
		{30 * time.Second, 0.32, false, decideUnchanged},                   // same as written at 20 s
		{79 * time.Second, 0.3201, false, decideUnchanged},                 // 59 s since 20 s: still fresh enough
		{80 * time.Second, 0.3201, true, decideRefresh},                    // 60 s since 20 s: refresh
		{85 * time.Second, 0.50, false, decideTooSoon},                     // 5 s since 80 s
		{90 * time.Second, 0.50, true, decideChanged},                      // 10 s since 80 s, moved 0.18
		{99*time.Second + 999*time.Millisecond, 0.9, false, decideTooSoon}, // 9.999 s
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		write, why := l.decide(now, sum(s.cpu))
		if write != s.write || why != s.reason {
			t.Fatalf("at %v cpu %v: decide = %v %q, want %v %q", s.at, s.cpu, write, why, s.write, s.reason)
		}
		if write {
			l.wrote(now, sum(s.cpu))
		}
	}
}

// newTestAgent builds an agent on captured /proc files with a fake
// clientset holding node n1 and an injected clock.
func newTestAgent(t *testing.T, mutate func(*Config)) (*Agent, *fake.Clientset, *clock) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{"other": "kept"}}}
	cs := fake.NewClientset(node)
	clk := &clock{t: t0}
	cfg := Config{
		NodeName: "n1", Client: kubeclientset.Wrap(cs), Now: clk.Now, Seed: 1,
		RetryMin: time.Millisecond, RetryMax: 4 * time.Millisecond,
	}
	cfg.Proc.ProcRoot = "telemetry/procfs/testdata/real1/proc"
	cfg.Proc.SysRoot = "telemetry/procfs/testdata/real1/sys"
	if mutate != nil {
		mutate(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a, cs, clk
}

// pushRecord appends a copy of r to the agent's ring.
func pushRecord(a *Agent, r *record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	slot := a.ring.next()
	slot.At, slot.Kernel, slot.HasKern = r.At, r.Kernel, r.HasKern
	r.Proc.CopyTo(&slot.Proc)
	a.ring.push()
}

func nodeSummary(t *testing.T, cs *fake.Clientset) (kubefmt.TelemetrySummary, map[string]string) {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := n.Annotations[kubefmt.AnnotationTelemetry]
	if !ok {
		return kubefmt.TelemetrySummary{}, n.Annotations
	}
	s, err := kubefmt.DecodeTelemetry(v)
	if err != nil {
		t.Fatalf("annotation %q: %v", v, err)
	}
	return s, n.Annotations
}

// TestAnnotateOnce writes through the (fake) API: a merge patch of the
// annotation only, retried with backoff after failures, counted.
func TestAnnotateOnce(t *testing.T) {
	a, cs, clk := newTestAgent(t, nil)
	ctx := context.Background()
	bo := backoff.New(a.cfg.RetryMin, a.cfg.RetryMax, 1)

	if why := a.annotateOnce(ctx, bo); why != "no-summary" {
		t.Fatalf("with no samples: %q", why)
	}
	// 10 s window: busy 300 of 1000 ticks (0.3), memory 6 of 10 GiB (0.6).
	pushRecord(a, rec(0, 100, 900, 10<<30, 4<<30))
	pushRecord(a, rec(10*time.Second, 400, 1600, 10<<30, 4<<30))

	var patches []k8stesting.PatchAction
	fails := 2
	cs.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		p := action.(k8stesting.PatchAction)
		patches = append(patches, p)
		if fails > 0 {
			fails--
			return true, nil, errors.New("apiserver unavailable")
		}
		return false, nil, nil // fall through to the tracker
	})
	clk.Set(t0.Add(10 * time.Second))
	if why := a.annotateOnce(ctx, bo); why != decideFirst {
		t.Fatalf("first write: %q", why)
	}
	if len(patches) != 3 {
		t.Fatalf("%d patch attempts, want 3 (2 failures, then success)", len(patches))
	}
	if got := testutil.ToFloat64(a.m.annotationWrites.WithLabelValues("error")); got != 2 {
		t.Fatalf("errors counted %v, want 2", got)
	}
	if got := testutil.ToFloat64(a.m.annotationWrites.WithLabelValues("ok")); got != 1 {
		t.Fatalf("writes counted %v, want 1", got)
	}
	p := patches[2]
	if p.GetPatchType() != types.MergePatchType || p.GetName() != "n1" {
		t.Fatalf("patch %s of %s, want a merge patch of n1", p.GetPatchType(), p.GetName())
	}
	var body map[string]map[string]map[string]string
	if err := json.Unmarshal(p.GetPatch(), &body); err != nil || len(body) != 1 || len(body["metadata"]) != 1 || len(body["metadata"]["annotations"]) != 1 {
		t.Fatalf("patch %s touches more than the annotation (%v)", p.GetPatch(), err)
	}
	s, ann := nodeSummary(t, cs)
	if s.CPU != 0.3 || s.Mem != 0.6 || s.Window != 10*time.Second || !s.Time.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("annotation %+v", s)
	}
	if ann["other"] != "kept" {
		t.Fatalf("other annotations lost: %v", ann)
	}

	// 10 s later, same measures: skipped (unchanged), counted.
	pushRecord(a, rec(20*time.Second, 700, 2300, 10<<30, 4<<30)) // 300 busy of 1000 again
	clk.Set(t0.Add(20 * time.Second))
	if why := a.annotateOnce(ctx, bo); why != decideUnchanged {
		t.Fatalf("unchanged: %q", why)
	}
	if got := testutil.ToFloat64(a.m.annotationSkips.WithLabelValues(decideUnchanged)); got != 1 {
		t.Fatalf("skips counted %v", got)
	}
	// CPU jumps: 900 busy of 1000 in the window ending at 30 s -> 0.9, written.
	pushRecord(a, rec(30*time.Second, 1600, 2400, 10<<30, 4<<30))
	clk.Set(t0.Add(30 * time.Second))
	if why := a.annotateOnce(ctx, bo); why != decideChanged {
		t.Fatalf("changed: %q", why)
	}
	if s, _ := nodeSummary(t, cs); s.CPU != 0.9 {
		t.Fatalf("annotation CPU %v, want 0.9", s.CPU)
	}
	// A cancelled context stops the retries.
	cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("down")
	})
	pushRecord(a, rec(40*time.Second, 1700, 3300, 10<<30, 4<<30))
	clk.Set(t0.Add(40 * time.Second))
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if why := a.annotateOnce(cctx, bo); why != "stopped" {
		t.Fatalf("with the API down and the context ending: %q", why)
	}
}
