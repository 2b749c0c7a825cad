package tracefmt

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edgesched/edgesched/sim"
)

var t0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

// sampleEvents is one event of every kind, with non-trivial values.
func sampleEvents() []Event {
	return []Event{
		{Kind: PodArrival, Time: t0, Pod: &Pod{UID: "u-1", Namespace: "shop", Name: "cart-7d9f-x2", Service: "cart", CPUMilli: 500, MemoryMiB: 256,
			GPUs: 1, GPUMilli: 250, GPUModels: []string{"T4", "A10"}, QoS: sim.QoSLS, Priority: -5, Arch: sim.ArchARM64, CPULimitMilli: 1000, CPUUsage: 0.4}},
		{Kind: PodArrival, Time: t0.Add(time.Second), Pod: &Pod{UID: "u-2", Namespace: "shop", Name: "db-0"}},
		{Kind: PodBinding, Time: t0.Add(2 * time.Second), Pod: &Pod{UID: "u-1", Namespace: "shop", Name: "cart-7d9f-x2", Node: "edge-a"}},
		{Kind: PodDeletion, Time: t0.Add(time.Hour), Pod: &Pod{UID: "u-1", Namespace: "shop", Name: "cart-7d9f-x2"}},
		{Kind: NodeUsage, Time: t0.Add(10 * time.Second), Usage: &Usage{Node: "edge-a", CPU: 0.25, Mem: 0.5, CPUMilli: 4000, RequestedCPUMilli: 2000}},
		{Kind: EdgeRate, Time: t0.Add(20 * time.Second), Edge: &Edge{Src: PodRef{Namespace: "shop", Name: "cart-7d9f-x2"}, Dst: PodRef{Namespace: "shop", Name: "db-0"}, CallsPerSecond: 12.5, Reporter: "edge-a"}},
		{Kind: NodeInfo, Time: t0, Node: &Node{Name: "edge-a", CPUMilli: 4000, MemoryMiB: 8192, GPUs: 2, GPUModel: "T4", Zone: "zone-1", Arch: sim.ArchAMD64, FailureRate: 0.5}},
	}
}

func TestEventRoundTrip(t *testing.T) {
	for _, e := range sampleEvents() {
		t.Run(e.Kind.String(), func(t *testing.T) {
			b, err := EncodeEvent(e)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeEvent(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, e) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, e)
			}
		})
	}
}

func TestEventRefusals(t *testing.T) {
	good, err := EncodeEvent(sampleEvents()[0])
	if err != nil {
		t.Fatal(err)
	}
	usage := func(cpu float64) Event {
		return Event{Kind: NodeUsage, Time: t0, Usage: &Usage{Node: "n", CPU: cpu}}
	}
	decode := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"version", append([]byte{9}, good[1:]...), "version 9"},
		{"kind", append([]byte{1, 0}, good[2:]...), "unknown kind 0"},
		{"kind high", append([]byte{1, 99}, good[2:]...), "unknown kind 99"},
		{"truncated", good[:len(good)-3], "truncated"},
		{"trailing", append(append([]byte{}, good...), 0), "trailing"},
		{"string over the record", []byte{1, byte(PodDeletion), 0, 0x7f, 'a'}, "exceeds"},
		{"oversized", make([]byte, MaxRecordBytes+1), "exceeds"},
	}
	for _, tc := range decode {
		t.Run("decode "+tc.name, func(t *testing.T) {
			_, err := DecodeEvent(tc.b)
			if !errors.Is(err, ErrRecord) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrRecord mentioning %q", err, tc.want)
			}
		})
	}
	encode := []struct {
		name string
		e    Event
		want string
	}{
		{"no payload", Event{Kind: PodArrival, Time: t0}, "0 payloads"},
		{"two payloads", Event{Kind: NodeUsage, Time: t0, Usage: &Usage{Node: "n"}, Node: &Node{Name: "n"}}, "2 payloads"},
		{"no time", Event{Kind: NodeInfo, Node: &Node{Name: "n"}}, "no time"},
		{"nan usage", usage(math.NaN()), "out of range"},
		{"usage above 1", usage(1.5), "out of range"},
		{"negative cpu", Event{Kind: PodArrival, Time: t0, Pod: &Pod{UID: "u", Namespace: "a", Name: "b", CPUMilli: -1}}, "out of range"},
		{"gpu share without gpus", Event{Kind: PodArrival, Time: t0, Pod: &Pod{UID: "u", Namespace: "a", Name: "b", GPUMilli: 500}}, "gpu request"},
		{"long name", Event{Kind: PodDeletion, Time: t0, Pod: &Pod{UID: "u", Namespace: "a", Name: strings.Repeat("x", MaxString+1)}}, "name is"},
		{"binding without node", Event{Kind: PodBinding, Time: t0, Pod: &Pod{UID: "u", Namespace: "a", Name: "b"}}, "node missing"},
		{"infinite rate", Event{Kind: EdgeRate, Time: t0, Edge: &Edge{Src: PodRef{Namespace: "a", Name: "b"}, Dst: PodRef{Namespace: "a", Name: "c"}, Reporter: "n", CallsPerSecond: math.Inf(1)}}, "rate"},
		{"unknown kind", Event{Kind: 42, Time: t0, Node: &Node{Name: "n"}}, "unknown kind"},
		// Unix nanoseconds hold 1677-09-21 .. 2262-04-11: beyond, UnixNano overflows
		{"time after 2262", Event{Kind: NodeUsage, Time: time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC), Usage: &Usage{Node: "n"}}, "time outside"},
		{"time in 9999", Event{Kind: EdgeRate, Time: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), Edge: &Edge{Src: PodRef{Namespace: "a", Name: "b"}, Dst: PodRef{Namespace: "a", Name: "c"}, Reporter: "n"}}, "time outside"},
		{"time before 1678", Event{Kind: NodeInfo, Time: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), Node: &Node{Name: "n"}}, "time outside"},
	}
	for _, tc := range encode {
		t.Run("encode "+tc.name, func(t *testing.T) {
			_, err := EncodeEvent(tc.e)
			if !errors.Is(err, ErrRecord) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrRecord mentioning %q", err, tc.want)
			}
		})
	}
}

// FuzzDecodeEvent: any input decodes or is refused with ErrRecord, never
// panics; what decodes re-encodes to a record that decodes to the same
// event.
func FuzzDecodeEvent(f *testing.F) {
	for _, e := range sampleEvents() {
		b, err := EncodeEvent(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{1, 1})
	// the largest arrival trace.PodRecord makes: 64 accepted models of
	// MaxGPUModel bytes, strings at the format's limit
	big := sampleEvents()[0]
	p := *big.Pod
	p.UID, p.Name, p.Service = strings.Repeat("u", MaxString), strings.Repeat("n", MaxString), strings.Repeat("s", MaxString)
	p.GPUModels = nil
	for i := range MaxModels {
		p.GPUModels = append(p.GPUModels, strings.Repeat(string(rune('a'+i%26)), MaxGPUModel))
	}
	big.Pod = &p
	b, err := EncodeEvent(big)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeEvent(b)
		if err != nil {
			if !errors.Is(err, ErrRecord) {
				t.Fatalf("error without ErrRecord: %v", err)
			}
			return
		}
		b2, err := EncodeEvent(e)
		if err != nil {
			t.Fatalf("decoded event does not encode: %v", err)
		}
		e2, err := DecodeEvent(b2)
		if err != nil || !reflect.DeepEqual(e, e2) {
			t.Fatalf("re-encoded event differs: %v\n%+v\n%+v", err, e, e2)
		}
	})
}

// TestNodeRecordVersions: version 2 node records carry the failure rate;
// version 1 records (written before it) still decode, without one; a rate
// out of range is refused.
func TestNodeRecordVersions(t *testing.T) {
	n := Node{Name: "n1", CPUMilli: 4000, MemoryMiB: 8192, GPUs: 2, GPUModel: "T4", Zone: "z", Arch: sim.ArchARM64, FailureRate: 0.25}
	b, err := EncodeEvent(Event{Kind: NodeInfo, Time: t0, Node: &n})
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != 2 {
		t.Fatalf("written as version %d, want 2", b[0])
	}
	e, err := DecodeEvent(b)
	if err != nil || *e.Node != n {
		t.Fatalf("round trip: %+v, %v; want %+v", e.Node, err, n)
	}
	v1 := append([]byte{1}, b[1:len(b)-8]...) // the same record as version 1 wrote it
	e, err = DecodeEvent(v1)
	old := n
	old.FailureRate = 0
	if err != nil || *e.Node != old {
		t.Fatalf("version 1: %+v, %v; want %+v", e.Node, err, old)
	}
	if _, err := DecodeEvent(b[:len(b)-8]); !errors.Is(err, ErrRecord) {
		t.Fatalf("version 2 without its failure rate: %v, want ErrRecord", err)
	}
	for _, bad := range []float64{-1, sim.MaxFailureDay + 1, math.NaN()} {
		n.FailureRate = bad
		if _, err := EncodeEvent(Event{Kind: NodeInfo, Time: t0, Node: &n}); !errors.Is(err, ErrRecord) {
			t.Fatalf("failure rate %v: %v, want ErrRecord", bad, err)
		}
	}
}

// TestRecordHeader: the kind and time of a record of every kind, read
// without decoding the rest; a header that is not well-formed is not ok.
func TestRecordHeader(t *testing.T) {
	for _, e := range sampleEvents() {
		b, err := EncodeEvent(e)
		if err != nil {
			t.Fatal(err)
		}
		n := 2 + binary.PutVarint(make([]byte, binary.MaxVarintLen64), e.Time.UnixNano())
		kind, ts, ok := RecordHeader(b[:n]) // the rest is not read
		if !ok || kind != e.Kind || ts != e.Time.UnixNano() {
			t.Fatalf("%s: RecordHeader = %v, %d, %v; want %v, %d", e.Kind, kind, ts, ok, e.Kind, e.Time.UnixNano())
		}
		if ts, ok := RecordTime(b); !ok || ts != e.Time.UnixNano() {
			t.Fatalf("%s: RecordTime = %d, %v", e.Kind, ts, ok)
		}
	}
	for _, b := range [][]byte{nil, {2, 1}, {9, 1, 0}, {2, 0, 0}, {2, 99, 0}, {2, 1, 0x80}} {
		if _, _, ok := RecordHeader(b); ok {
			t.Errorf("RecordHeader(%x) ok, want not", b)
		}
	}
	if ts, ok := RecordTime([]byte{9, 99, 4}); !ok || ts != 2 {
		t.Errorf("RecordTime of an unknown version and kind = %d, %v; want 2, true (it checks neither)", ts, ok)
	}
}
