package trace

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/agent/trace/tracefmt"
	"github.com/edgesched/edgesched/internal/boltkv"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim/scenario"
)

// depFixture records pods of four services and call rates between them
// (times from t0; every sample is one node's 10 s window):
//
//	pod     service  lifetime          pod     service  lifetime
//	api-0   api      0 s - running     db-0    db       0 s - 400 s
//	api-1   api      0 s - running     db-0'   db2      500 s - running (db-0 re-created)
//	web-0   web      0 s - running     job-0   (none)   0 s - running
//	cache-0 cache    0 s - running     big-0   big      0 s - running
//
// with the samples listed in the cases' comments.
func depFixture(t *testing.T) *Store {
	t.Helper()
	s := openTest(t, filepath.Join(t.TempDir(), "trace.db"), 24*time.Hour, 10000, func() time.Time { return t0.Add(time.Hour) })
	t.Cleanup(func() { s.Close() })
	pod := func(uid, name, svc string, at time.Duration) tracefmt.Event {
		return tracefmt.Event{Kind: tracefmt.PodArrival, Time: t0.Add(at), Pod: &tracefmt.Pod{UID: uid, Namespace: "shop", Name: name, Service: svc, CPUMilli: 100, MemoryMiB: 64}}
	}
	ref := func(name string) tracefmt.PodRef { return tracefmt.PodRef{Namespace: "shop", Name: name} }
	edge := func(at time.Duration, src, dst string, rate float64, node string) tracefmt.Event {
		return tracefmt.Event{Kind: tracefmt.EdgeRate, Time: t0.Add(at), Edge: &tracefmt.Edge{Src: ref(src), Dst: ref(dst), CallsPerSecond: rate, Reporter: node}}
	}
	evs := []tracefmt.Event{
		pod("u-api0", "api-0", "api", 0), pod("u-api1", "api-1", "api", 0), pod("u-web0", "web-0", "web", 0),
		pod("u-cache0", "cache-0", "cache", 0), pod("u-db0", "db-0", "db", 0), pod("u-job0", "job-0", "", 0), pod("u-big0", "big-0", "big", 0),
		// n1 sees api-0 -> db-0 at 10, 20, 30 /s; api-1 -> db-0 at 6 /s;
		// web-0 -> api-0 at 0 /s twice; job-0 -> db-0 at 50 /s
		edge(100*time.Second, "api-0", "db-0", 10, "n1"), edge(100*time.Second, "api-1", "db-0", 6, "n1"),
		edge(100*time.Second, "web-0", "api-0", 0, "n1"), edge(100*time.Second, "job-0", "db-0", 50, "n1"),
		edge(200*time.Second, "api-0", "db-0", 20, "n1"), edge(200*time.Second, "web-0", "api-0", 0, "n1"),
		edge(300*time.Second, "api-0", "db-0", 30, "n1"),
		// n2 sees api-0 -> cache-0 at 4 and 8 /s, web-0 -> web-0 at 1 /s,
		// big-0 -> big-0 at 3e6 /s (above the graph's bound)
		edge(150*time.Second, "api-0", "cache-0", 4, "n2"), edge(150*time.Second, "web-0", "web-0", 1, "n2"),
		edge(150*time.Second, "big-0", "big-0", 3e6, "n2"),
		edge(350*time.Second, "api-0", "cache-0", 8, "n2"),
		{Kind: tracefmt.PodDeletion, Time: t0.Add(400 * time.Second), Pod: &tracefmt.Pod{UID: "u-db0", Namespace: "shop", Name: "db-0"}},
		// db-0 re-created as a replica of db2: api-0 calls it at 7 /s
		pod("u-db0b", "db-0", "db2", 500*time.Second),
		edge(600*time.Second, "api-0", "db-0", 7, "n1"),
	}
	if _, err := s.Append(evs...); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestServiceDependencies(t *testing.T) {
	s := depFixture(t)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type E = kubefmt.DependencyEdge
	e := func(from, to string, r float64) E { return E{From: from, To: to, CallsPerSecond: r} }
	cases := []struct {
		name   string
		window time.Duration
		until  time.Time
		want   []E
	}{
		{
			// [0 s, 450 s]: db-0 is the db pod (db2's db-0 comes later).
			// api -> cache: (4 + 8) / 2 = 6; api -> db: api-0 -> db-0
			// (10 + 20 + 30) / 3 = 20 plus api-1 -> db-0 6 = 26; big -> big
			// 3e6 capped at 1e6; web -> web 1; web -> api only 0 /s: left
			// out; job-0 has no service: left out
			name: "first term", window: 450 * time.Second, until: at(450 * time.Second),
			want: []E{e("api", "cache", 6), e("api", "db", 26), e("big", "big", kubefmt.MaxCallsPerSecond), e("web", "web", 1)},
		},
		{
			// [200 s, 450 s]: api -> db: api-0 -> db-0 (20 + 30) / 2 = 25
			// (api-1's sample at 100 s is out); api -> cache: 8 (350 s)
			name: "later window", window: 250 * time.Second, until: at(450 * time.Second),
			want: []E{e("api", "cache", 8), e("api", "db", 25)},
		},
		{
			// [0 s, 1 h]: db-0's later pod (db2, created 500 s) wins the
			// name, so every api-0 -> db-0 sample counts for api -> db2:
			// (10 + 20 + 30 + 7) / 4 = 16.75, plus api-1 -> db-0 6 = 22.75
			name: "name re-used", window: time.Hour, until: at(time.Hour),
			want: []E{e("api", "cache", 6), e("api", "db2", 22.75), e("big", "big", kubefmt.MaxCallsPerSecond), e("web", "web", 1)},
		},
		{
			// [450 s, 1 h]: the old db-0 was deleted at 400 s, before the
			// window; api -> db2: 7 (600 s)
			name: "after the re-creation", window: time.Hour - 450*time.Second, until: at(time.Hour),
			want: []E{e("api", "db2", 7)},
		},
		{
			// [0 s, 90 s]: pods, no samples yet
			name: "no samples in the window", window: 90 * time.Second, until: at(90 * time.Second),
			want: []E{},
		},
		{
			name: "before anything was recorded", window: time.Minute, until: at(-time.Hour),
			want: []E{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ServiceDependencies(tc.window, tc.until)
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || !slices.Equal(got, tc.want) {
				t.Fatalf("ServiceDependencies(%v, %v):\n got %v\nwant %v", tc.window, tc.until, got, tc.want)
			}
			// what the site leader publishes: a graph the plugin accepts
			g := kubefmt.DependencyGraph{Version: kubefmt.DependencyGraphVersion, Edges: got}
			if _, err := g.Encode(); err != nil {
				t.Fatalf("the edges do not encode as a graph: %v", err)
			}
		})
	}
}

// TestServiceDependenciesErrors: a window that is not positive is refused;
// a damaged record the walk needs fails it with ErrStore naming the
// record, while a damaged record of a kind it skips (node usage) does not
// (Export, which reads usage, still fails on it).
func TestServiceDependenciesErrors(t *testing.T) {
	s := depFixture(t)
	for _, w := range []time.Duration{0, -time.Minute} {
		if _, err := s.ServiceDependencies(w, t0); !errors.Is(err, ErrConfig) {
			t.Errorf("window %v: %v, want ErrConfig", w, err)
		}
	}
	put := func(seq uint64, v []byte) {
		t.Helper()
		err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketEvents).Put(boltkv.U64(seq), v) })
		if err != nil {
			t.Fatal(err)
		}
	}
	usage, err := tracefmt.EncodeEvent(tracefmt.Event{Kind: tracefmt.NodeUsage, Time: t0.Add(time.Second), Usage: &tracefmt.Usage{Node: "n1", CPU: 0.5, CPUMilli: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	put(1000, usage[:len(usage)-3]) // a usage record cut short: its header is fine
	if got, err := s.ServiceDependencies(time.Hour, t0.Add(time.Hour)); err != nil || len(got) != 4 {
		t.Fatalf("with a damaged usage record: %v, %v; want the 4 edges", got, err)
	}
	if _, _, err := s.Export(ExportOptions{}); !errors.Is(err, ErrStore) {
		t.Fatalf("Export with a damaged usage record: %v, want ErrStore", err)
	}
	version := usage[0]                                       // the version EncodeEvent writes
	put(1001, []byte{version, byte(tracefmt.EdgeRate), 0x80}) // an edge record whose time is cut
	put(1002, []byte{version, 99, 2})                         // an unknown kind
	_, err = s.ServiceDependencies(time.Hour, t0.Add(time.Hour))
	if !errors.Is(err, ErrStore) || !errors.Is(err, tracefmt.ErrRecord) {
		t.Fatalf("with a damaged edge record: %v, want ErrStore wrapping ErrRecord", err)
	}
	if want := "event 1001"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %s", err, want)
	}
}

// TestServiceDependenciesAgreesWithExport: on a random trace (pods of
// five services, one in five without a service, re-used names, deletions,
// zero rates), for several windows, ServiceDependencies gives Export's
// dependencies over the same window: every edge Export writes with a
// positive rate, at the rate Export rounds to 3 decimals, and no other.
func TestServiceDependenciesAgreesWithExport(t *testing.T) {
	const seed = 11
	t.Logf("seed %d", seed)
	s := randomTrace(t, seed, 300, 3000)
	for _, w := range []struct{ since, until time.Duration }{{0, 3 * time.Hour}, {time.Hour, 3 * time.Hour}, {30 * time.Minute, 90 * time.Minute}, {2 * time.Hour, 2*time.Hour + 10*time.Minute}} {
		since, until := t0.Add(w.since), t0.Add(w.until)
		if w.since == 0 {
			since = t0.Add(-time.Nanosecond) // Export's zero Since is "from the first sample"; ours must be a window
		}
		out, _, err := s.Export(ExportOptions{Since: since, Until: until})
		if err != nil {
			t.Fatal(err)
		}
		l, err := scenario.Parse(out, "r.yaml", "")
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.ServiceDependencies(until.Sub(since), until)
		if err != nil {
			t.Fatal(err)
		}
		exported := map[[2]string]float64{}
		for _, d := range l.Workload.Dependencies {
			exported[[2]string{d.From, d.To}] = d.CallsPerSecond
		}
		for _, e := range got {
			r, ok := exported[[2]string{e.From, e.To}]
			if !ok || r != math.Round(e.CallsPerSecond*1000)/1000 {
				t.Errorf("window %v: %s -> %s %v/s; Export has %v (present %v)", w, e.From, e.To, e.CallsPerSecond, r, ok)
			}
			delete(exported, [2]string{e.From, e.To})
		}
		for k, r := range exported {
			if r != 0 {
				t.Errorf("window %v: Export has %s -> %s at %v/s, ServiceDependencies has not", w, k[0], k[1], r)
			}
		}
		if len(got) < 5 {
			t.Errorf("window %v: only %d edges: the random trace should give more", w, len(got))
		}
	}
}

// randomTrace records pods pods (of services web, db, cache, api or none;
// 120 names, so some are re-used; a third deleted later) and samples call
// rates between random pod names every 3 s (a tenth of them 0) on four
// nodes, from t0 on.
func randomTrace(t testing.TB, seed uint64, pods, samples int) *Store {
	t.Helper()
	s, err := OpenStore(StoreConfig{Path: filepath.Join(t.TempDir(), "trace.db"), MaxAge: 24 * time.Hour, MaxEvents: 10_000_000,
		Now: func() time.Time { return t0.Add(3 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rng := rand.New(rand.NewPCG(seed, seed))
	var evs []tracefmt.Event
	for i := range 4 {
		evs = append(evs, tracefmt.Event{Kind: tracefmt.NodeInfo, Time: t0, Node: &tracefmt.Node{Name: fmt.Sprintf("n%d", i), CPUMilli: 4000, MemoryMiB: 8192}})
	}
	svcs := []string{"web", "db", "cache", "", "api"}
	for i := range pods {
		name := fmt.Sprintf("p-%d", rng.IntN(120))
		at := time.Duration(rng.IntN(7200)) * time.Second
		evs = append(evs, tracefmt.Event{Kind: tracefmt.PodArrival, Time: t0.Add(at), Pod: &tracefmt.Pod{UID: fmt.Sprintf("u%d", i), Namespace: "ns", Name: name,
			Service: svcs[rng.IntN(len(svcs))], CPUMilli: 100, MemoryMiB: 64}})
		if rng.IntN(3) == 0 {
			evs = append(evs, tracefmt.Event{Kind: tracefmt.PodDeletion, Time: t0.Add(at + time.Duration(rng.IntN(3000))*time.Second), Pod: &tracefmt.Pod{UID: fmt.Sprintf("u%d", i), Namespace: "ns", Name: name}})
		}
	}
	for i := range samples {
		r := rng.Float64() * 50
		if rng.IntN(10) == 0 {
			r = 0
		}
		evs = append(evs, tracefmt.Event{Kind: tracefmt.EdgeRate, Time: t0.Add(time.Duration(i) * 3 * time.Second), Edge: &tracefmt.Edge{Src: tracefmt.PodRef{Namespace: "ns", Name: fmt.Sprintf("p-%d", rng.IntN(120))},
			Dst: tracefmt.PodRef{Namespace: "ns", Name: fmt.Sprintf("p-%d", rng.IntN(120))}, CallsPerSecond: r, Reporter: fmt.Sprintf("n%d", i%4)}})
	}
	for i := 0; i < len(evs); i += 5000 {
		if _, err := s.Append(evs[i:min(i+5000, len(evs))]...); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// BenchmarkServiceDependencies measures one computation of the graph (what
// the site leader does every --dependencies-interval) over a trace of
// 2,000 pods and 200,000 call-rate samples, plus 200,000 node usage
// samples it does not decode, with a 10-minute window; and Export over
// the same trace for comparison.
func BenchmarkServiceDependencies(b *testing.B) {
	s := randomTrace(b, 5, 2000, 200_000)
	var evs []tracefmt.Event
	for i := range 200_000 {
		evs = append(evs, tracefmt.Event{Kind: tracefmt.NodeUsage, Time: t0.Add(time.Duration(i/4) * 10 * time.Second), Usage: &tracefmt.Usage{Node: fmt.Sprintf("n%d", i%4), CPU: 0.5, Mem: 0.5, CPUMilli: 4000, RequestedCPUMilli: 2000}})
	}
	for i := 0; i < len(evs); i += 5000 {
		if _, err := s.Append(evs[i : i+5000]...); err != nil {
			b.Fatal(err)
		}
	}
	until := t0.Add(5 * time.Hour)
	b.Run("ServiceDependencies", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.ServiceDependencies(10*time.Minute, until); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Export", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := s.Export(ExportOptions{Since: until.Add(-10 * time.Minute), Until: until}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
