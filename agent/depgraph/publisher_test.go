package depgraph

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/edgesched/edgesched/agent/trace"
	"github.com/edgesched/edgesched/agent/trace/tracefmt"
	"github.com/edgesched/edgesched/internal/kube/kubeclientset"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/kubefmt"
)

var depT0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

// depClock is a settable clock.
type depClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *depClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *depClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// depStore is a real trace store with three pods of services web, db and
// cache (created at depT0).
func depStore(t *testing.T, clk *depClock) *trace.Store {
	t.Helper()
	cfg := trace.DefaultStoreConfig(filepath.Join(t.TempDir(), "trace.db"))
	cfg.Now = clk.Now
	s, err := trace.OpenStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var evs []tracefmt.Event
	for _, p := range []struct{ name, svc string }{{"web-0", "web"}, {"db-0", "db"}, {"cache-0", "cache"}} {
		evs = append(evs, tracefmt.Event{Kind: tracefmt.PodArrival, Time: depT0, Pod: &tracefmt.Pod{UID: "u-" + p.name, Namespace: "shop", Name: p.name, Service: p.svc, CPUMilli: 100, MemoryMiB: 64}})
	}
	if _, err := s.Append(evs...); err != nil {
		t.Fatal(err)
	}
	return s
}

// sample records one call-rate sample at depT0+at.
func sample(t *testing.T, s *trace.Store, at time.Duration, src, dst string, rate float64) {
	t.Helper()
	_, err := s.Append(tracefmt.Event{Kind: tracefmt.EdgeRate, Time: depT0.Add(at), Edge: &tracefmt.Edge{Src: tracefmt.PodRef{Namespace: "shop", Name: src},
		Dst: tracefmt.PodRef{Namespace: "shop", Name: dst}, CallsPerSecond: rate, Reporter: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
}

// readGraph returns the ConfigMap and its decoded graph.
func readGraph(t *testing.T, client *fake.Clientset, ns string) (*v1.ConfigMap, *kubefmt.DependencyGraph) {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps(ns).Get(context.Background(), kubefmt.DefaultDependenciesConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := kubefmt.DecodeDependencyGraph([]byte(cm.Data[kubefmt.DependenciesConfigMapKey]))
	if err != nil {
		t.Fatalf("the ConfigMap's graph: %v", err)
	}
	return cm, g
}

func edge(from, to string, r float64) kubefmt.DependencyEdge {
	return kubefmt.DependencyEdge{From: from, To: to, CallsPerSecond: r}
}

// TestPublisherSync follows one publisher through the life of a
// site: a real trace store, the fake API, a clock moved by hand (interval
// 1m, window 1h, so the samples stay in the window until the last step).
func TestPublisherSync(t *testing.T) {
	ctx := context.Background()
	clk := &depClock{}
	store := depStore(t, clk)
	client := fake.NewClientset()
	reg := prometheus.NewPedanticRegistry()
	cfg := DefaultConfig()
	cfg.Client, cfg.Trace, cfg.Now, cfg.Registerer = kubeclientset.Wrap(client), store, clk.Now, reg
	cfg.Window, cfg.Site, cfg.Identity = time.Hour, "store-1", "node-a"
	p, err := NewPublisher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cms := client.CoreV1().ConfigMaps(kubefmt.DefaultNamespace)
	steps := []struct {
		name    string
		at      time.Duration // the clock, from depT0
		before  func()        // what happens first
		action  string
		reason  string
		want    []kubefmt.DependencyEdge // in the ConfigMap afterwards
		written time.Duration            // its updated time, from depT0
	}{
		{
			name: "first graph", at: 2 * time.Minute, action: Created, reason: "new",
			before: func() { sample(t, store, time.Minute, "web-0", "db-0", 10) },
			want:   []kubefmt.DependencyEdge{edge("web", "db", 10)}, written: 2 * time.Minute,
		},
		{
			name: "nothing new", at: 3 * time.Minute, action: Unchanged,
			want: []kubefmt.DependencyEdge{edge("web", "db", 10)}, written: 2 * time.Minute,
		},
		{
			// (10 + 11) / 2 = 10.5: 5% above the 10 written, within 10%
			name: "rate moved 5%", at: 4 * time.Minute, action: Unchanged,
			before: func() { sample(t, store, 210*time.Second, "web-0", "db-0", 11) },
			want:   []kubefmt.DependencyEdge{edge("web", "db", 10)}, written: 2 * time.Minute,
		},
		{
			// (10 + 11 + 15) / 3 = 12: 20% above the 10 written
			name: "rate moved 20%", at: 5 * time.Minute, action: Updated, reason: "rates moved",
			before: func() { sample(t, store, 270*time.Second, "web-0", "db-0", 15) },
			want:   []kubefmt.DependencyEdge{edge("web", "db", 12)}, written: 5 * time.Minute,
		},
		{
			name: "new edge", at: 6 * time.Minute, action: Updated, reason: "edges changed",
			before: func() { sample(t, store, 330*time.Second, "web-0", "cache-0", 4) },
			want:   []kubefmt.DependencyEdge{edge("web", "cache", 4), edge("web", "db", 12)}, written: 6 * time.Minute,
		},
		{
			// 9 intervals after the last write: not yet refreshed
			name: "nine intervals later", at: 15 * time.Minute, action: Unchanged,
			want: []kubefmt.DependencyEdge{edge("web", "cache", 4), edge("web", "db", 12)}, written: 6 * time.Minute,
		},
		{
			name: "ten intervals later", at: 16 * time.Minute, action: Updated, reason: "refresh",
			want: []kubefmt.DependencyEdge{edge("web", "cache", 4), edge("web", "db", 12)}, written: 16 * time.Minute,
		},
		{
			name: "garbage in the ConfigMap", at: 17 * time.Minute, action: Replaced, reason: "invalid",
			before: func() {
				cm, _ := cms.Get(ctx, kubefmt.DefaultDependenciesConfigMapName, metav1.GetOptions{})
				cm.Data[kubefmt.DependenciesConfigMapKey] = `{"version": 1, "edges": [{"from": "web", "to": "db", "callsPerSecond": -1}]}`
				if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			want: []kubefmt.DependencyEdge{edge("web", "cache", 4), edge("web", "db", 12)}, written: 17 * time.Minute,
		},
		{
			// someone took the key out and left a note: the graph goes
			// back, the note stays
			name: "key removed", at: 18 * time.Minute, action: Updated, reason: "no graph",
			before: func() {
				cm, _ := cms.Get(ctx, kubefmt.DefaultDependenciesConfigMapName, metav1.GetOptions{})
				cm.Data = map[string]string{"note": "kept"}
				if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			want: []kubefmt.DependencyEdge{edge("web", "cache", 4), edge("web", "db", 12)}, written: 18 * time.Minute,
		},
		{
			// the window [1h30m, 2h30m] holds no sample any more
			name: "samples left the window", at: 150 * time.Minute, action: Updated, reason: "edges changed",
			want: []kubefmt.DependencyEdge{}, written: 150 * time.Minute,
		},
	}
	for _, s := range steps {
		clk.Set(depT0.Add(s.at))
		if s.before != nil {
			s.before()
		}
		res, err := p.Sync(ctx)
		if err != nil || res.Action != s.action || res.Reason != s.reason || res.Edges != len(s.want) {
			t.Fatalf("%s: %+v, %v; want %s (%q) with %d edges", s.name, res, err, s.action, s.reason, len(s.want))
		}
		cm, g := readGraph(t, client, kubefmt.DefaultNamespace)
		if !slices.Equal(g.Edges, s.want) || !g.Updated.Equal(depT0.Add(s.written)) || g.Window != "1h0m0s" {
			t.Fatalf("%s: ConfigMap graph %+v; want edges %v updated %v", s.name, g, s.want, depT0.Add(s.written))
		}
		if l := cm.Labels; l[labelManagedBy] != managedByAgent || l[kubefmt.LabelComponent] != componentDependencies || l[kubefmt.LabelSite] != "store-1" || cm.Annotations[kubefmt.AnnotationAgent] != "node-a" {
			t.Fatalf("%s: labels %v annotations %v", s.name, cm.Labels, cm.Annotations)
		}
	}
	if cm, _ := readGraph(t, client, kubefmt.DefaultNamespace); cm.Data["note"] != "kept" {
		t.Errorf("another key of the ConfigMap was lost: %v", cm.Data)
	}
	// created 1; unchanged 3 (nothing new, 5%, nine intervals); updated 5
	// (20%, new edge, refresh, key removed, window); replaced 1
	for result, want := range map[string]float64{"created": 1, "unchanged": 3, "updated": 5, "replaced": 1, "failed": 0, "trace_error": 0} {
		if got := testutil.ToFloat64(p.writes.WithLabelValues(result)); got != want {
			t.Errorf("writes_total{result=%s} = %v, want %v", result, got, want)
		}
	}
	if got := testutil.ToFloat64(p.edges); got != 0 {
		t.Errorf("edges gauge %v, want 0 (the last graph)", got)
	}
	if n, err := testutil.GatherAndCount(reg, "edgesched_site_dependency_graph_writes_total", "edgesched_site_dependency_graph_edges"); err != nil || n != 7 {
		t.Errorf("registry: %d series (%v), want 6 results + 1 gauge", n, err)
	}
}

// TestPublisherErrors: API errors are counted and returned (Run
// retries them), a conflicting write is retried from a fresh read within
// one Sync, a trace that cannot be read is counted as trace_error, and
// nothing panics.
func TestPublisherErrors(t *testing.T) {
	ctx := context.Background()
	clk := &depClock{t: depT0.Add(2 * time.Minute)}
	store := depStore(t, clk)
	sample(t, store, time.Minute, "web-0", "db-0", 10)
	cases := []struct {
		name    string
		react   func(c *fake.Clientset)
		trace   Source
		wantErr bool
		counted map[string]float64
	}{
		{
			name: "apiserver down",
			react: func(c *fake.Clientset) {
				c.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewServiceUnavailable("etcd leader changed")
				})
			},
			wantErr: true, counted: map[string]float64{"failed": 1},
		},
		{
			name: "forbidden",
			react: func(c *fake.Clientset) {
				c.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(v1.Resource("configmaps"), "edgesched-dependencies", errors.New("RBAC"))
				})
			},
			wantErr: true, counted: map[string]float64{"failed": 1},
		},
		{
			// another writer got there between our read and our create:
			// re-read, and the graph is the same, so nothing to write
			name: "created by another leader meanwhile",
			react: func(c *fake.Clientset) {
				var once atomic.Bool
				c.PrependReactor("create", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
					if once.Swap(true) {
						return false, nil, nil
					}
					cm := a.(k8stesting.CreateAction).GetObject().(*v1.ConfigMap).DeepCopy()
					if err := c.Tracker().Create(v1.SchemeGroupVersion.WithResource("configmaps"), cm, cm.Namespace); err != nil {
						return true, nil, err
					}
					return true, nil, apierrors.NewAlreadyExists(v1.Resource("configmaps"), cm.Name)
				})
			},
			counted: map[string]float64{"unchanged": 1},
		},
		{
			name:    "trace closed",
			trace:   closedStore(t),
			wantErr: true, counted: map[string]float64{"trace_error": 1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			if tc.react != nil {
				tc.react(client)
			}
			cfg := DefaultConfig()
			cfg.Client, cfg.Trace, cfg.Now = kubeclientset.Wrap(client), store, clk.Now
			if tc.trace != nil {
				cfg.Trace = tc.trace
			}
			p, err := NewPublisher(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Sync(ctx)
			if (err != nil) != tc.wantErr {
				t.Fatalf("sync: %v, want error %v", err, tc.wantErr)
			}
			for _, result := range []string{"created", "updated", "unchanged", "replaced", "failed", "trace_error"} {
				if got := testutil.ToFloat64(p.writes.WithLabelValues(result)); got != tc.counted[result] {
					t.Errorf("writes_total{result=%s} = %v, want %v", result, got, tc.counted[result])
				}
			}
		})
	}
}

// closedStore is a trace store that was closed: every read fails.
func closedStore(t *testing.T) *trace.Store {
	s, err := trace.OpenStore(trace.DefaultStoreConfig(filepath.Join(t.TempDir(), "closed.db")))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	return s
}

// TestPublisherRun: Run writes at once, retries a failing
// apiserver with its backoff (the interval is an hour, so every attempt
// after the first is a retry), follows the trace, and returns when its
// context ends.
func TestPublisherRun(t *testing.T) {
	clk := &depClock{t: depT0.Add(2 * time.Minute)}
	store := depStore(t, clk)
	sample(t, store, time.Minute, "web-0", "db-0", 10)
	client := fake.NewClientset()
	var failing atomic.Int32
	failing.Store(3)
	client.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Add(-1) >= 0 {
			return true, nil, apierrors.NewServiceUnavailable("apiserver restarting")
		}
		return false, nil, nil
	})
	cfg := DefaultConfig()
	cfg.Client, cfg.Trace, cfg.Now, cfg.Namespace = kubeclientset.Wrap(client), store, clk.Now, "edge"
	cfg.Interval, cfg.BackoffMin, cfg.BackoffMax, cfg.Seed = time.Hour, 5*time.Millisecond, 20*time.Millisecond, 7
	p, err := NewPublisher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := fltest.RunBackground(t, p.Run)
	fltest.Eventually(t, 5*time.Second, "the graph after three failed attempts", func() (bool, string) {
		// from the tracker: a Get through the clientset would meet the
		// failing reactor too
		obj, err := client.Tracker().Get(v1.SchemeGroupVersion.WithResource("configmaps"), "edge", kubefmt.DefaultDependenciesConfigMapName)
		if err != nil {
			return false, err.Error()
		}
		cm := obj.(*v1.ConfigMap)
		return strings.Contains(cm.Data[kubefmt.DependenciesConfigMapKey], `"from":"web","to":"db","callsPerSecond":10`), cm.Data[kubefmt.DependenciesConfigMapKey]
	})
	if got := testutil.ToFloat64(p.writes.WithLabelValues(resultFailed)); got != 3 {
		t.Errorf("failed attempts %v, want 3", got)
	}
	stop()
}

// TestPublisherRunInterval: with a short interval the graph
// follows the trace without anyone calling Sync.
func TestPublisherRunInterval(t *testing.T) {
	clk := &depClock{t: depT0.Add(2 * time.Minute)}
	store := depStore(t, clk)
	sample(t, store, time.Minute, "web-0", "db-0", 10)
	client := fake.NewClientset()
	cfg := DefaultConfig()
	cfg.Client, cfg.Trace, cfg.Now, cfg.Interval = kubeclientset.Wrap(client), store, clk.Now, 20*time.Millisecond
	p, err := NewPublisher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := fltest.RunBackground(t, p.Run)
	graph := func() string {
		cm, err := client.CoreV1().ConfigMaps(kubefmt.DefaultNamespace).Get(context.Background(), kubefmt.DefaultDependenciesConfigMapName, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return cm.Data[kubefmt.DependenciesConfigMapKey]
	}
	fltest.Eventually(t, 5*time.Second, "the first graph", func() (bool, string) { g := graph(); return strings.Contains(g, `"to":"db"`), g })
	sample(t, store, 90*time.Second, "web-0", "cache-0", 3)
	fltest.Eventually(t, 5*time.Second, "the new edge", func() (bool, string) { g := graph(); return strings.Contains(g, `"to":"cache"`), g })
	stop()
}

// fixedEdges is a Source returning a fixed list (the bounds of
// the format are impractical to reach through a trace).
type fixedEdges []kubefmt.DependencyEdge

func (f fixedEdges) ServiceDependencies(time.Duration, time.Time) ([]kubefmt.DependencyEdge, error) {
	return slices.Clone(f), nil
}

// TestFit: edges the format refuses are left out; a graph beyond
// the format's bounds keeps its heaviest edges; what is written decodes.
func TestFit(t *testing.T) {
	many := func(n, nameLen int) fixedEdges {
		var out fixedEdges
		for i := range n {
			// rate i+1: the heaviest have the highest index
			out = append(out, edge(fmt.Sprintf("s%0*d", nameLen-1, i), "to", float64(i+1)))
		}
		return out
	}
	cases := []struct {
		name    string
		src     fixedEdges
		kept    int
		dropped int
		minRate float64 // the lightest edge kept
	}{
		{"bad names", fixedEdges{edge("web", "db", 1), edge("has space", "db", 2), edge("web", strings.Repeat("x", 254), 3), edge("web", "bad\x00", 4)}, 1, 3, 1},
		{"5,000 edges: the 4,096 heaviest", many(5000, 8), kubefmt.MaxDependencyEdges, 5000 - kubefmt.MaxDependencyEdges, 5000 - kubefmt.MaxDependencyEdges + 1},
		// an edge of a 253-byte name encodes to about 290 bytes: about
		// (1 MiB - 1 KiB) / 290 = 3,612 fit, the lightest go
		{"4,000 long names: what fits in 1 MiB", many(4000, 253), -1, -1, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			cfg := DefaultConfig()
			cfg.Client, cfg.Trace = kubeclientset.Wrap(client), tc.src
			p, err := NewPublisher(cfg)
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.Sync(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			cm, g := readGraph(t, client, kubefmt.DefaultNamespace)
			raw := cm.Data[kubefmt.DependenciesConfigMapKey]
			if len(g.Edges) != res.Edges || res.Edges+res.Dropped != len(tc.src) || len(raw) > kubefmt.MaxDependencyGraphBytes {
				t.Fatalf("%+v: %d edges written in %d bytes", res, len(g.Edges), len(raw))
			}
			if tc.kept >= 0 && (res.Edges != tc.kept || res.Dropped != tc.dropped) {
				t.Fatalf("%+v, want %d kept, %d dropped", res, tc.kept, tc.dropped)
			}
			lightest := slices.MinFunc(g.Edges, func(a, b kubefmt.DependencyEdge) int { return cmp.Compare(a.CallsPerSecond, b.CallsPerSecond) }).CallsPerSecond
			if tc.minRate >= 0 && lightest != tc.minRate {
				t.Fatalf("lightest edge kept %v, want %v", lightest, tc.minRate)
			}
			if tc.minRate < 0 {
				// the kept edges are the heaviest: exactly the top ones
				if want := float64(len(tc.src) - res.Edges + 1); lightest != want || res.Edges < 3000 || len(raw) < kubefmt.MaxDependencyGraphBytes-64<<10 {
					t.Fatalf("%d edges in %d bytes, lightest %v; want the heaviest (lightest %v), close to 1 MiB", res.Edges, len(raw), lightest, want)
				}
				t.Logf("%d of %d edges of 253-byte names fit in %d bytes", res.Edges, len(tc.src), len(raw))
			}
		})
	}
}

// TestConfigValidate names the bad field.
func TestConfigValidate(t *testing.T) {
	good := func() Config {
		c := DefaultConfig()
		c.Client, c.Trace = kubeclientset.Wrap(fake.NewClientset()), fixedEdges{}
		return c
	}
	cases := []struct {
		name string
		mod  func(*Config)
		want string // in the error; "" valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"no client", func(c *Config) { c.Client = nil }, "Client required"},
		{"no trace", func(c *Config) { c.Trace = nil }, "Trace required"},
		{"bad namespace", func(c *Config) { c.Namespace = "Edge_System" }, `Namespace "Edge_System"`},
		{"empty name", func(c *Config) { c.Name = "" }, `Name ""`},
		{"zero interval", func(c *Config) { c.Interval = 0 }, "Interval 0s"},
		{"negative window", func(c *Config) { c.Window = -time.Minute }, "Window -1m0s"},
		{"backoff upside down", func(c *Config) { c.BackoffMin, c.BackoffMax = time.Minute, time.Second }, "backoff"},
		{"bad site label", func(c *Config) { c.Site = "store 1" }, `Site "store 1"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.mod(&c)
			_, err := NewPublisher(c)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want ErrConfig naming %q", err, tc.want)
			}
		})
	}
}
