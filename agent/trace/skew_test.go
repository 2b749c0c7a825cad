package trace

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/edgesched/edgesched/agent/trace/tracefmt"
	"github.com/edgesched/edgesched/internal/boltkv"
	"github.com/edgesched/edgesched/kubefmt"
)

// TestRecorderRefusesFutureTimes: a node whose clock ran ahead (an RTC
// before NTP synced) publishes one telemetry summary or flows window
// dated far in the future, a year ahead or in year 9999 (beyond what
// Unix nanoseconds hold). The recorder must not record it, nor let it
// become the node's high-water mark: the correct samples the node
// publishes next are all recorded. Before the fix the future sample was
// recorded and every later one of that node dropped as "not newer".
func TestRecorderRefusesFutureTimes(t *testing.T) {
	now := t0.Add(time.Hour)
	yearAhead, far := now.Add(365*24*time.Hour), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	usage := func(at time.Time) (string, string) {
		v, err := kubefmt.EncodeTelemetry(kubefmt.TelemetrySummary{Time: at, Window: 10 * time.Second, CPU: 0.1, Mem: 0.25, Load1: 1})
		if err != nil {
			t.Fatal(err)
		}
		return kubefmt.AnnotationTelemetry, v
	}
	flows := func(at time.Time) (string, string) {
		v, err := kubefmt.EncodeFlows(kubefmt.Flows{Time: at, Window: 10 * time.Second,
			Edges: []kubefmt.FlowEdge{{Src: tracefmt.PodRef{Namespace: "shop", Name: "web-1"}, Dst: tracefmt.PodRef{Namespace: "shop", Name: "db-0"}, CallsPerSecond: 2}}})
		if err != nil {
			t.Fatal(err)
		}
		return kubefmt.FlowsAnnotation, v
	}
	cases := []struct {
		name       string
		annotation func(time.Time) (string, string)
		kind       tracefmt.Kind
		future     time.Time
	}{
		{"usage a year ahead", usage, tracefmt.NodeUsage, yearAhead},
		{"usage in year 9999", usage, tracefmt.NodeUsage, far},
		{"flows a year ahead", flows, tracefmt.EdgeRate, yearAhead},
		{"flows in year 9999", flows, tracefmt.EdgeRate, far},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			// n2: not the recorder's own node, whose flows it would write
			node := testNode("n2", nil)
			k, v := tc.annotation(tc.future)
			node.Annotations[k] = v
			client := fake.NewClientset(node)
			clk := func() time.Time { return now }
			s := openTest(t, filepath.Join(t.TempDir(), "trace.db"), 24*time.Hour, 1000, clk)
			defer s.Close()
			logs := &lockedBuffer{}
			cfg := DefaultRecorderConfig()
			cfg.Store, cfg.Client, cfg.NodeName, cfg.Now = s, fakeClient(client), "n1", clk
			cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
			r, err := NewRecorder(cfg)
			if err != nil {
				t.Fatal(err)
			}
			stop := runRecorder(t, r)
			defer stop()
			poll(t, 10*time.Second, "the first list", func() (bool, string) { return r.Synced(), "not synced" })
			// the node's clock is corrected: three correct samples follow
			for i := 1; i <= 3; i++ {
				n, err := client.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				k, v := tc.annotation(t0.Add(time.Duration(i) * time.Minute))
				n.Annotations[k] = v
				if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			poll(t, 10*time.Second, "the three correct samples recorded", func() (bool, string) {
				k := countKinds(t, s)
				return k[tc.kind] == 3, fmt.Sprint(k)
			})
			var future []time.Time
			if err := s.Events(func(_ uint64, e tracefmt.Event) error {
				if e.Kind == tc.kind && e.Time.After(now) {
					future = append(future, e.Time)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(future) > 0 {
				t.Fatalf("recorded samples dated %v, after the clock's %v", future, now)
			}
			// counted once, however often the node was seen with it; one
			// warning, and a note when the clock is back
			if st := r.Stats(); st.Skewed != 1 || st.Malformed != 0 {
				t.Errorf("stats %+v, want 1 skewed, 0 malformed", st)
			}
			out := logs.String()
			for w, n := range map[string]int{"level=WARN msg=\"sample ahead of the clock not recorded": 1, "node clock back in range": 1, "node=n2": 2} {
				if got := strings.Count(out, w); got != n {
					t.Errorf("%d log lines with %q, want %d:\n%s", got, w, n, out)
				}
			}
		})
	}
}

// TestStoreIgnoresFutureSeenMark: a store written before the recorder
// refused future samples may hold a node's high-water mark (`seen`) far
// ahead of the clock. It must not block that node's correct samples for
// ever: a mark beyond kubefmt.MaxTelemetryClockSkew ahead of the store's
// clock is ignored (and replaced); a mark within it still de-duplicates.
func TestStoreIgnoresFutureSeenMark(t *testing.T) {
	usage := func(at time.Time) tracefmt.Event {
		return tracefmt.Event{Kind: tracefmt.NodeUsage, Time: at, Usage: &tracefmt.Usage{Node: "n1", CPU: 0.5, CPUMilli: 1000, RequestedCPUMilli: 500}}
	}
	edge := func(at time.Time) tracefmt.Event {
		return tracefmt.Event{Kind: tracefmt.EdgeRate, Time: at, Edge: &tracefmt.Edge{Src: tracefmt.PodRef{Namespace: "ns", Name: "a"}, Dst: tracefmt.PodRef{Namespace: "ns", Name: "b"}, CallsPerSecond: 1, Reporter: "n1"}}
	}
	cases := []struct {
		name     string
		mark     time.Duration // the stored mark, ahead of the clock
		then     time.Duration // the next sample, relative to the clock
		recorded bool
	}{
		{"mark a year ahead", 365 * 24 * time.Hour, 0, true},
		{"mark just beyond the skew", kubefmt.MaxTelemetryClockSkew + time.Second, 0, true},
		{"mark within the skew", kubefmt.MaxTelemetryClockSkew / 2, 0, false},
		{"older than a replaced mark", 365 * 24 * time.Hour, -time.Minute, true},
	}
	for _, tc := range cases {
		for _, ev := range []func(time.Time) tracefmt.Event{usage, edge} {
			e := ev(t0)
			t.Run(tc.name+" "+e.Kind.String(), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "trace.db")
				s := openTest(t, path, 24*time.Hour, 1000, func() time.Time { return t0 })
				if _, err := s.Append(ev(t0.Add(tc.mark))); err != nil {
					t.Fatal(err)
				}
				s.Close() // the mark survives a restart
				s = openTest(t, path, 24*time.Hour, 1000, func() time.Time { return t0 })
				defer s.Close()
				res, err := s.Append(ev(t0.Add(tc.then)))
				if err != nil {
					t.Fatal(err)
				}
				if got := res.Recorded == 1; got != tc.recorded {
					t.Fatalf("append after a mark %v ahead: %+v, want recorded %v", tc.mark, res, tc.recorded)
				}
				if !tc.recorded {
					return
				}
				// the mark is now the sample's: an older one is skipped
				res, err = s.Append(ev(t0.Add(tc.then - time.Second)))
				if err != nil || res.Skipped != 1 {
					t.Fatalf("append of an older sample: %+v %v, want skipped", res, err)
				}
			})
		}
	}
}

// writeUnchecked appends evs to s's log as a build from before the store
// bounded its samples' times wrote them: the records, the sequence and
// the count, nothing else.
func writeUnchecked(t *testing.T, s *Store, evs ...tracefmt.Event) {
	t.Helper()
	err := s.db.Update(func(tx *bolt.Tx) error {
		meta, events := tx.Bucket(bucketMeta), tx.Bucket(bucketEvents)
		seq, count := boltkv.GetU64(meta, keySeq), boltkv.GetU64(meta, keyCount)
		for _, e := range evs {
			b, err := tracefmt.EncodeEvent(e)
			if err != nil {
				return err
			}
			seq, count = seq+1, count+1
			if err := events.Put(boltkv.U64(seq), b); err != nil {
				return err
			}
		}
		if err := meta.Put(keySeq, boltkv.U64(seq)); err != nil {
			return err
		}
		return meta.Put(keyCount, boltkv.U64(count))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// storedAhead returns the times of the records in s's log dated after
// horizon, read from bbolt directly.
func storedAhead(t *testing.T, s *Store, horizon time.Time) []time.Time {
	t.Helper()
	var out []time.Time
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEvents).ForEach(func(_, v []byte) error {
			e, err := tracefmt.DecodeEvent(v)
			if err == nil && e.Time.After(horizon) {
				out = append(out, e.Time)
			}
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStorePrunesFutureSamples: a store written before the recorder
// refused samples from clocks that ran ahead may hold telemetry samples
// and flows windows dated far ahead of the clock, anywhere in its log.
// They are never read back (Events, ServiceDependencies), and the next
// Append prunes them wherever they are, by the store's clock (counted in
// Pruned and Ahead, logged once); a sample within
// kubefmt.MaxTelemetryClockSkew stays. Before, retention looked at the
// head of the log only (where a future event even stopped age retention):
// they stayed for ever and were read back as current.
func TestStorePrunesFutureSamples(t *testing.T) {
	skew := kubefmt.MaxTelemetryClockSkew
	web, db := tracefmt.PodRef{Namespace: "shop", Name: "web-1"}, tracefmt.PodRef{Namespace: "shop", Name: "db-0"}
	pod := func(ref tracefmt.PodRef, svc string) tracefmt.Event {
		return tracefmt.Event{Kind: tracefmt.PodArrival, Time: t0.Add(-2 * time.Minute), Pod: &tracefmt.Pod{UID: ref.Name, Namespace: ref.Namespace, Name: ref.Name, Service: svc, CPUMilli: 100, MemoryMiB: 64}}
	}
	usage := func(at time.Time) tracefmt.Event {
		return tracefmt.Event{Kind: tracefmt.NodeUsage, Time: at, Usage: &tracefmt.Usage{Node: "n1", CPU: 0.5, CPUMilli: 1000, RequestedCPUMilli: 500}}
	}
	edge := func(at time.Time, rate float64) tracefmt.Event {
		return tracefmt.Event{Kind: tracefmt.EdgeRate, Time: at, Edge: &tracefmt.Edge{Src: web, Dst: db, CallsPerSecond: rate, Reporter: "n1"}}
	}
	cases := []struct {
		name   string
		future tracefmt.Event
		head   bool // first in the log, else after the pods
	}{
		{"usage a year ahead at the head", usage(t0.Add(365 * 24 * time.Hour)), true},
		{"usage just beyond the skew after the pods", usage(t0.Add(skew + time.Second)), false},
		{"flows an hour ahead after the pods", edge(t0.Add(time.Hour), 99), false},
		{"flows just beyond the skew at the head", edge(t0.Add(skew+time.Millisecond), 99), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logs := &lockedBuffer{}
			cfg := DefaultStoreConfig(filepath.Join(t.TempDir(), "trace.db"))
			cfg.Now, cfg.Logger = func() time.Time { return t0 }, slog.New(slog.NewTextHandler(logs, nil))
			s, err := OpenStore(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			kept := []tracefmt.Event{pod(web, "web"), pod(db, "db"), edge(t0.Add(-time.Minute), 1), usage(t0.Add(skew / 2))}
			if tc.head {
				writeUnchecked(t, s, append([]tracefmt.Event{tc.future}, kept...)...)
			} else {
				writeUnchecked(t, s, append(append(kept[:2:2], tc.future), kept[2:]...)...)
			}
			horizon := t0.Add(skew)
			// not read back
			if k := countKinds(t, s); k[tracefmt.PodArrival] != 2 || k[tracefmt.EdgeRate] != 1 || k[tracefmt.NodeUsage] != 1 {
				t.Fatalf("read back %v, want the 4 events within the clock's skew", k)
			}
			year := 365 * 24 * time.Hour
			deps, err := s.ServiceDependencies(3*year, t0.Add(2*year))
			if err != nil || len(deps) != 1 || deps[0].CallsPerSecond != 1 {
				t.Fatalf("dependencies %+v (%v), want web -> db at 1 call/s", deps, err)
			}
			// pruned by the next append
			res, err := s.Append(tracefmt.Event{Kind: tracefmt.PodDeletion, Time: t0, Pod: &tracefmt.Pod{UID: "nobody", Namespace: "shop", Name: "gone"}})
			if err != nil || res.Pruned != 1 || res.Ahead != 1 {
				t.Fatalf("append: %+v (%v), want 1 pruned ahead of the clock", res, err)
			}
			if ahead := storedAhead(t, s, horizon); len(ahead) != 0 {
				t.Fatalf("still stored: events dated %v, beyond %v", ahead, horizon)
			}
			if st, err := s.Stats(); err != nil || st.Events != 4 {
				t.Fatalf("stats %+v (%v), want 4 events", st, err)
			}
			if n := strings.Count(logs.String(), "pruned trace samples dated ahead of the clock"); n != 1 {
				t.Fatalf("%d warnings, want 1:\n%s", n, logs.String())
			}
			// nothing left to prune
			if res, err := s.Append(usage(t0)); err != nil || res.Pruned != 0 || res.Recorded != 1 {
				t.Fatalf("next append: %+v (%v), want 1 recorded, none pruned", res, err)
			}
		})
	}
}

// TestStorePrunesSamplesWhenTheClockGoesBack: samples recorded while the
// agent's own clock ran ahead are dated ahead of it once it is set back
// (NTP): by the injected clock they are no longer read back, and the
// next Append prunes them; a pod's events are left to retention.
func TestStorePrunesSamplesWhenTheClockGoesBack(t *testing.T) {
	clk := &clock{t: t0}
	s := openTest(t, filepath.Join(t.TempDir(), "trace.db"), 24*time.Hour, 1000, clk.Now)
	defer s.Close()
	usage := func(node string, at time.Time) tracefmt.Event {
		return tracefmt.Event{Kind: tracefmt.NodeUsage, Time: at, Usage: &tracefmt.Usage{Node: node, CPU: 0.5, CPUMilli: 1000, RequestedCPUMilli: 500}}
	}
	if _, err := s.Append(arrival(1, t0), usage("n1", t0), usage("n2", t0.Add(-time.Hour))); err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.Add(-30 * time.Minute))
	if k := countKinds(t, s); k[tracefmt.PodArrival] != 1 || k[tracefmt.NodeUsage] != 1 {
		t.Fatalf("read back %v after the clock went back, want the arrival and n2's sample", k)
	}
	res, err := s.Append(arrival(2, clk.Now()))
	if err != nil || res.Ahead != 1 || res.Pruned != 1 {
		t.Fatalf("append: %+v (%v), want n1's sample pruned", res, err)
	}
	if st, _ := s.Stats(); st.Events != 3 {
		t.Fatalf("%d events, want 3 (2 arrivals, n2's sample)", st.Events)
	}
}
