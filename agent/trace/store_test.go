package trace

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/agent/trace/tracefmt"
	"github.com/edgesched/edgesched/internal/boltkv"
)

// t0 is the tests' reference time.
var t0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

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

func arrival(i int, at time.Time) tracefmt.Event {
	return tracefmt.Event{Kind: tracefmt.PodArrival, Time: at, Pod: &tracefmt.Pod{UID: fmt.Sprintf("u-%d", i), Namespace: "ns", Name: fmt.Sprintf("p-%d", i), CPUMilli: 100, MemoryMiB: 64}}
}

// TestStoreDeduplicates: an arrival seen again (relist), a deletion of an
// unknown pod, a binding to the node already known and a usage sample not
// newer than the last are skipped; the current pods follow arrivals,
// bindings and deletions; everything survives a reopen.
func TestStoreDeduplicates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.db")
	s := openTest(t, path, time.Hour, 100, func() time.Time { return t0 })
	usage := func(at time.Time) tracefmt.Event {
		return tracefmt.Event{Kind: tracefmt.NodeUsage, Time: at, Usage: &tracefmt.Usage{Node: "n1", CPU: 0.5, CPUMilli: 1000, RequestedCPUMilli: 500}}
	}
	bind := tracefmt.Event{Kind: tracefmt.PodBinding, Time: t0, Pod: &tracefmt.Pod{UID: "u-1", Namespace: "ns", Name: "p-1", Node: "n1"}}
	res, err := s.Append(arrival(1, t0), arrival(2, t0), arrival(1, t0), bind, bind, usage(t0), usage(t0),
		tracefmt.Event{Kind: tracefmt.PodDeletion, Time: t0, Pod: &tracefmt.Pod{UID: "u-9", Namespace: "ns", Name: "p-9"}})
	if err != nil {
		t.Fatal(err)
	}
	// recorded: 2 arrivals, 1 binding, 1 usage = 4; skipped: arrival again,
	// binding again, usage again, unknown deletion = 4
	if res.Recorded != 4 || res.Skipped != 4 || res.Pruned != 0 {
		t.Fatalf("append: %+v, want 4 recorded, 4 skipped", res)
	}
	if _, err := s.Append(tracefmt.Event{Kind: tracefmt.PodDeletion, Time: t0.Add(time.Minute), Pod: &tracefmt.Pod{UID: "u-2", Namespace: "ns", Name: "p-2"}}); err != nil {
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
		_ = s.Events(func(q uint64, e tracefmt.Event) error {
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
	if _, err := s.Append(arrival(1, t0), tracefmt.Event{Kind: tracefmt.NodeInfo, Time: t0, Node: &tracefmt.Node{Name: "n", CPUMilli: 1000, MemoryMiB: 1024}}); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketEvents).Put(boltkv.U64(7), []byte{1, 200, 0}) }); err != nil {
		t.Fatal(err)
	}
	err := s.Events(func(uint64, tracefmt.Event) error { return nil })
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
	batch := make([]tracefmt.Event, 64)
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

// TestAppendRefusesRecordsIndividually: a batch with records the store
// cannot write appends the others in its transaction and returns a
// RefusedError naming each refused record (its place in the batch, pod or
// node, field); what the store held before is untouched. Every case starts
// from a store holding two pods (p-1 bound to n1, p-2) and a node.
func TestAppendRefusesRecordsIndividually(t *testing.T) {
	long := strings.Repeat("x", tracefmt.MaxString+1)
	pod := func(uid, name string) *tracefmt.Pod { return &tracefmt.Pod{UID: uid, Namespace: "ns", Name: name} }
	withModel := func(i int, model string) tracefmt.Event {
		e := arrival(i, t0)
		e.Pod.GPUs, e.Pod.GPUMilli, e.Pod.GPUModels = 1, 500, []string{"T4", model}
		return e
	}
	// big is an arrival just under MaxRecordBytes: 64 models of 240 bytes
	// take 64 x (240 + 2) = 15,488 bytes; binding it to a node of 1,000
	// bytes would take the record past 16,384
	big := arrival(90, t0)
	big.Pod.GPUs, big.Pod.GPUMilli = 1, 500
	for range tracefmt.MaxModels {
		big.Pod.GPUModels = append(big.Pod.GPUModels, strings.Repeat("m", 240))
	}
	cases := []struct {
		name string
		// damage runs before the batch (in its own transaction)
		damage func(tx *bolt.Tx) error
		batch  []tracefmt.Event
		// recorded, skipped and refused as AppendResult counts them
		recorded, skipped, refused int
		// want are substrings of the error (each refused record's
		// place, pod and field); store is the sentinel every refusal wraps
		want  []string
		store error
		// live pods after the batch (by name)
		live []string
	}{
		{
			name:     "all good",
			batch:    []tracefmt.Event{arrival(3, t0), {Kind: tracefmt.PodBinding, Time: t0, Pod: &tracefmt.Pod{UID: "u-3", Namespace: "ns", Name: "p-3", Node: "n1"}}},
			recorded: 2,
			live:     []string{"p-1", "p-2", "p-3"},
		},
		{
			// arrival 3 and 5 are written, 4 (a GPU model over the
			// format's 1,024 bytes) refused; the binding of 4 is then
			// skipped (not a live pod), the deletion of p-2 written
			name: "one oversized gpu model among good records",
			batch: []tracefmt.Event{arrival(3, t0), withModel(4, strings.Repeat("g", 2000)), arrival(5, t0),
				{Kind: tracefmt.PodBinding, Time: t0, Pod: &tracefmt.Pod{UID: "u-4", Namespace: "ns", Name: "p-4", Node: "n1"}},
				{Kind: tracefmt.PodDeletion, Time: t0, Pod: pod("u-2", "p-2")}},
			recorded: 3, skipped: 1, refused: 1,
			want:  []string{"1 of 5", "record 1 (pod-arrival of pod ns/p-4, uid u-4)", "gpu model is 2000 bytes"},
			store: tracefmt.ErrRecord,
			live:  []string{"p-1", "p-3", "p-5"},
		},
		{
			// refused: 1 (name), 2 (no node), 3 (NaN share), 4 (rate);
			// written: 0 and 5
			name: "a bad record of every kind",
			batch: []tracefmt.Event{arrival(3, t0),
				{Kind: tracefmt.PodDeletion, Time: t0, Pod: pod("u-2", long)},
				{Kind: tracefmt.PodBinding, Time: t0, Pod: pod("u-3", "p-3")},
				{Kind: tracefmt.NodeUsage, Time: t0, Usage: &tracefmt.Usage{Node: "n1", CPU: math.NaN()}},
				{Kind: tracefmt.EdgeRate, Time: t0, Edge: &tracefmt.Edge{Src: tracefmt.PodRef{Namespace: "ns", Name: "p-1"}, Dst: tracefmt.PodRef{Namespace: "ns", Name: "p-2"}, Reporter: "n1", CallsPerSecond: math.Inf(1)}},
				{Kind: tracefmt.NodeUsage, Time: t0, Usage: &tracefmt.Usage{Node: "n1", CPU: 0.5, CPUMilli: 1000}}},
			recorded: 2, refused: 4,
			want: []string{"4 of 6",
				"record 1 (pod-deletion of pod ns/xxxx", "uid u-2)", "name is 1025 bytes",
				"record 2 (pod-binding of pod ns/p-3, uid u-3)", "node missing",
				"record 3 (node-usage of node n1)", "cpu NaN",
				"record 4 (edge-rate of edge ns/p-1 -> ns/p-2 seen by n1)", "rate +Inf"},
			store: tracefmt.ErrRecord,
			live:  []string{"p-1", "p-2", "p-3"},
		},
		{
			name:    "every record refused",
			batch:   []tracefmt.Event{{Kind: tracefmt.PodArrival, Time: t0, Pod: pod("", "p-7")}, {Kind: tracefmt.NodeInfo, Node: &tracefmt.Node{Name: "n2", CPUMilli: 1}}},
			refused: 2,
			want:    []string{"2 of 2", "record 0 (pod-arrival of pod ns/p-7, uid )", "uid missing", "record 1 (node-info of node n2)", "no time"},
			store:   tracefmt.ErrRecord,
			live:    []string{"p-1", "p-2"},
		},
		{
			// the error spells out the first 8 refusals (maxListed) and
			// counts the other 10 - 8 = 2
			name:     "many refused",
			batch:    append(slices.Repeat([]tracefmt.Event{{Kind: tracefmt.PodArrival, Time: t0, Pod: pod("", "p-7")}}, 10), arrival(3, t0)),
			recorded: 1, refused: 10,
			want:  []string{"10 of 11; the other 1 were applied", "record 7 (pod-arrival", "; and 2 more"},
			store: tracefmt.ErrRecord,
			live:  []string{"p-1", "p-2", "p-3"},
		},
		{
			// p-2's current record is damaged: its binding is refused and
			// the damaged bytes left for an operator; the arrival is written
			name:     "binding of a pod whose current record does not decode",
			damage:   func(tx *bolt.Tx) error { return tx.Bucket(bucketLive).Put([]byte("u-2"), []byte{1, 200}) },
			batch:    []tracefmt.Event{{Kind: tracefmt.PodBinding, Time: t0, Pod: &tracefmt.Pod{UID: "u-2", Namespace: "ns", Name: "p-2", Node: "n1"}}, arrival(3, t0)},
			recorded: 1, refused: 1,
			want:  []string{"record 0 (pod-binding of pod ns/p-2, uid u-2)", "current record does not decode", "unknown kind 200"},
			store: ErrStore,
		},
		{
			name:     "binding that would outgrow the record",
			batch:    []tracefmt.Event{big, {Kind: tracefmt.PodBinding, Time: t0, Pod: &tracefmt.Pod{UID: "u-90", Namespace: "ns", Name: "p-90", Node: strings.Repeat("n", 1000)}}, arrival(3, t0)},
			recorded: 2, refused: 1,
			want:  []string{"record 1 (pod-binding of pod ns/p-90, uid u-90)", "with its node", "exceeds 16384"},
			store: tracefmt.ErrRecord,
			live:  []string{"p-1", "p-2", "p-3", "p-90"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, filepath.Join(t.TempDir(), "trace.db"), time.Hour, 100, func() time.Time { return t0 })
			defer s.Close()
			before := []tracefmt.Event{arrival(1, t0), arrival(2, t0),
				{Kind: tracefmt.PodBinding, Time: t0, Pod: &tracefmt.Pod{UID: "u-1", Namespace: "ns", Name: "p-1", Node: "n1"}},
				{Kind: tracefmt.NodeInfo, Time: t0, Node: &tracefmt.Node{Name: "n1", CPUMilli: 4000, MemoryMiB: 8192}}}
			if _, err := s.Append(before...); err != nil {
				t.Fatal(err)
			}
			if tc.damage != nil {
				if err := s.db.Update(tc.damage); err != nil {
					t.Fatal(err)
				}
			}
			stBefore, _ := s.Stats()

			res, err := s.Append(tc.batch...)
			if res.Recorded != tc.recorded || res.Skipped != tc.skipped || res.Refused != tc.refused {
				t.Fatalf("result %+v, want %d recorded, %d skipped, %d refused (err %v)", res, tc.recorded, tc.skipped, tc.refused, err)
			}
			if tc.refused == 0 {
				if err != nil {
					t.Fatal(err)
				}
			} else {
				var re *RefusedError
				if !errors.As(err, &re) || !errors.Is(err, ErrRefused) || len(re.Records) != tc.refused || re.Batch != len(tc.batch) {
					t.Fatalf("error %v: want a RefusedError of %d records in a batch of %d", err, tc.refused, len(tc.batch))
				}
				for _, r := range re.Records {
					if !errors.Is(r, tc.store) {
						t.Errorf("refusal %q does not wrap %v", r, tc.store)
					}
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error does not mention %q:\n%v", w, err)
					}
				}
			}

			// what was there is still there and readable, plus what was
			// written: the event log grew by the recorded events (NodeInfo
			// changes the current nodes, not the log)
			st, _ := s.Stats()
			n := 0
			if err := s.Events(func(uint64, tracefmt.Event) error { n++; return nil }); err != nil {
				t.Fatal(err)
			}
			if st.Events != stBefore.Events+tc.recorded || n != st.Events {
				t.Fatalf("%d events (%d readable), want %d before + %d recorded", st.Events, n, stBefore.Events, tc.recorded)
			}
			if nodes, err := s.Nodes(); err != nil || len(nodes) != 1 || nodes[0].Node.Name != "n1" {
				t.Fatalf("nodes %+v (%v), want n1", nodes, err)
			}
			if tc.damage != nil {
				err := s.db.View(func(tx *bolt.Tx) error {
					if v := tx.Bucket(bucketLive).Get([]byte("u-2")); string(v) != string([]byte{1, 200}) {
						return fmt.Errorf("damaged record now %v", v)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return // LivePods stops at the damaged record, as it should
			}
			live, err := s.LivePods()
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range live {
				names = append(names, e.Pod.Name)
				if e.Pod.Name == "p-1" && e.Pod.Node != "n1" {
					t.Errorf("p-1 lost its node: %+v", e.Pod)
				}
			}
			slices.Sort(names)
			if !slices.Equal(names, tc.live) {
				t.Fatalf("live pods %v, want %v", names, tc.live)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	cases := []struct {
		name string
		s    string
		n    int
		want string
	}{
		{"short", "T4", 63, "T4"},
		{"exact", "abc", 3, "abc"},
		{"ascii", "abcdef", 4, "abcd"},
		// "é" is 2 bytes (0xC3 0xA9): a cut at 2 would split it
		{"two-byte character across the cut", "aé", 2, "a"},
		// "€" is 3 bytes: cut at 3 keeps "a" and drops the character
		{"three-byte character across the cut", "a€b", 3, "a"},
		{"character ending at the cut", "a€b", 4, "a€"},
		// not UTF-8: continuation bytes only, cut where asked
		{"not utf-8", "\x80\x80\x80\x80\x80\x80", 4, "\x80\x80\x80\x80"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := truncate(tc.s, tc.n); got != tc.want {
				t.Fatalf("truncate(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
			}
		})
	}
}
