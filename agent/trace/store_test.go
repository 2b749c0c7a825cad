package trace

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/internal/boltkv"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func openTest(t *testing.T, path string, maxAge time.Duration, maxEvents int, now func() time.Time) *Store {
	t.Helper()
	cfg := DefaultStoreConfig(path)
	cfg.MaxAge, cfg.MaxEvents, cfg.Now = maxAge, maxEvents, now
	s, err := OpenStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func arrival(i int, at time.Time) Event {
	return Event{Kind: PodArrival, Time: at, Pod: &Pod{UID: fmt.Sprintf("u-%d", i), Namespace: "ns", Name: fmt.Sprintf("p-%d", i), CPUMilli: 100, MemoryMiB: 64}}
}

// TestStoreDeduplicates: an arrival seen again (relist), a deletion of an
// unknown pod, a binding to the node already known and a usage sample not
// newer than the last are skipped; the current pods follow arrivals,
// bindings and deletions; everything survives a reopen.
func TestStoreDeduplicates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.db")
	s := openTest(t, path, time.Hour, 100, func() time.Time { return t0 })
	usage := func(at time.Time) Event {
		return Event{Kind: NodeUsage, Time: at, Usage: &Usage{Node: "n1", CPU: 0.5, CPUMilli: 1000, RequestedCPUMilli: 500}}
	}
	bind := Event{Kind: PodBinding, Time: t0, Pod: &Pod{UID: "u-1", Namespace: "ns", Name: "p-1", Node: "n1"}}
	res, err := s.Append(arrival(1, t0), arrival(2, t0), arrival(1, t0), bind, bind, usage(t0), usage(t0),
		Event{Kind: PodDeletion, Time: t0, Pod: &Pod{UID: "u-9", Namespace: "ns", Name: "p-9"}})
	if err != nil {
		t.Fatal(err)
	}
	// recorded: 2 arrivals, 1 binding, 1 usage = 4; skipped: arrival again,
	// binding again, usage again, unknown deletion = 4
	if res.Recorded != 4 || res.Skipped != 4 || res.Pruned != 0 {
		t.Fatalf("append: %+v, want 4 recorded, 4 skipped", res)
	}
	if _, err := s.Append(Event{Kind: PodDeletion, Time: t0.Add(time.Minute), Pod: &Pod{UID: "u-2", Namespace: "ns", Name: "p-2"}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, path, time.Hour, 100, func() time.Time { return t0 })
	defer s.Close()
	live, err := s.LivePods()
	if err != nil || len(live) != 1 || live[0].Pod.UID != "u-1" || live[0].Pod.Node != "n1" {
		t.Fatalf("live pods after reopen: %+v (%v), want u-1 on n1", live, err)
	}
	st, _ := s.Stats()
	if st.Events != 5 || st.LastSeq != 5 {
		t.Fatalf("stats %+v, want 5 events", st)
	}
}

// TestStoreRetention keeps at most MaxEvents events and none older than
// MaxAge, deleting the oldest first in the appending transaction.
func TestStoreRetention(t *testing.T) {
	clk := &clock{t: t0}
	s := openTest(t, filepath.Join(t.TempDir(), "trace.db"), 10*time.Minute, 5, clk.Now)
	defer s.Close()
	for i := range 8 {
		if _, err := s.Append(arrival(i, t0.Add(time.Duration(i)*time.Minute))); err != nil {
			t.Fatal(err)
		}
	}
	// 8 events, at most 5: arrivals 0..2 pruned, 3..7 kept
	first := func() (uint64, string) {
		var seq uint64
		var name string
		_ = s.Events(func(q uint64, e Event) error {
			if seq == 0 {
				seq, name = q, e.Pod.Name
			}
			return nil
		})
		return seq, name
	}
	st, _ := s.Stats()
	if seq, name := first(); st.Events != 5 || seq != 4 || name != "p-3" {
		t.Fatalf("after 8 appends: %d events, first %d (%s); want 5 from seq 4 (p-3)", st.Events, seq, name)
	}
	// the clock moves to t0+15m: events before t0+5m (p-3, p-4) are too old
	clk.Set(t0.Add(15 * time.Minute))
	res, err := s.Append(arrival(8, clk.Now()))
	if err != nil {
		t.Fatal(err)
	}
	st, _ = s.Stats()
	// 5 + 1 = 6; p-3 (t0+3m) and p-4 (t0+4m) are older than 10 minutes
	// (cutoff t0+5m), p-5 (t0+5m) is not: 4 kept
	if seq, name := first(); res.Pruned != 2 || st.Events != 4 || name != "p-5" || seq != 6 {
		t.Fatalf("age retention: pruned %d, %d events, first %d (%s); want 2, 4, 6 (p-5)", res.Pruned, st.Events, seq, name)
	}
	// the current pods are not pruned with their arrivals
	live, _ := s.LivePods()
	if len(live) != 9 {
		t.Fatalf("%d live pods, want all 9", len(live))
	}
}

// TestStoreDamage: a record that does not decode is reported with its
// sequence by Events and Export (nothing is changed); a foreign schema is
// refused at open.
func TestStoreDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.db")
	s := openTest(t, path, time.Hour, 100, func() time.Time { return t0 })
	if _, err := s.Append(arrival(1, t0), Event{Kind: NodeInfo, Time: t0, Node: &Node{Name: "n", CPUMilli: 1000, MemoryMiB: 1024}}); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketEvents).Put(boltkv.U64(7), []byte{1, 200, 0}) }); err != nil {
		t.Fatal(err)
	}
	err := s.Events(func(uint64, Event) error { return nil })
	if !errors.Is(err, ErrStore) || !strings.Contains(err.Error(), "event 7") {
		t.Fatalf("damaged record: %v, want ErrStore naming event 7", err)
	}
	if _, _, err := s.Export(ExportOptions{}); !errors.Is(err, ErrStore) {
		t.Fatalf("export of a damaged store: %v", err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySchema, []byte("0")) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := OpenStore(DefaultStoreConfig(path)); !errors.Is(err, boltkv.ErrSchema) {
		t.Fatalf("foreign schema: %v", err)
	}
	if _, err := OpenStoreReadOnly(path); !errors.Is(err, boltkv.ErrSchema) {
		t.Fatalf("foreign schema, read-only: %v", err)
	}
	cfg := DefaultStoreConfig(path)
	cfg.MaxEvents = 0
	if _, err := OpenStore(cfg); !errors.Is(err, ErrConfig) {
		t.Fatalf("MaxEvents 0: %v", err)
	}
}

// BenchmarkAppend measures the append path with retention active (each
// transaction appends 64 arrivals; the store holds at most 10,000).
func BenchmarkAppend(b *testing.B) {
	s, err := OpenStore(StoreConfig{Path: filepath.Join(b.TempDir(), "trace.db"), MaxAge: time.Hour, MaxEvents: 10_000, Now: func() time.Time { return t0 }})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch := make([]Event, 64)
	n := 0
	for b.Loop() {
		for i := range batch {
			batch[i] = arrival(n, t0)
			n++
		}
		if _, err := s.Append(batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "events/s")
}
