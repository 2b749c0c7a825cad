package trace

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestFlowsRoundTrip(t *testing.T) {
	f := Flows{Time: t0, Window: 10 * time.Second, Edges: []FlowEdge{
		{Src: PodRef{"shop", "cart-1"}, Dst: PodRef{"shop", "db-0"}, CallsPerSecond: 2.5},
		{Src: PodRef{"shop", "web-1"}, Dst: PodRef{"shop", "cart-1"}, CallsPerSecond: 12.3456},
	}}
	v, err := EncodeFlows(f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeFlows(v)
	if err != nil {
		t.Fatal(err)
	}
	// sorted busiest first, rates rounded to 3 decimals
	if len(got.Edges) != 2 || got.Edges[0].CallsPerSecond != 12.346 || got.Edges[1].Src.Name != "cart-1" || !got.Time.Equal(t0) || got.Window != 10*time.Second {
		t.Fatalf("round trip: %+v from %s", got, v)
	}
	// more than MaxFlowEdges: the busiest are kept
	var many Flows
	many.Time, many.Window = t0, time.Minute
	for i := range MaxFlowEdges + 10 {
		many.Edges = append(many.Edges, FlowEdge{Src: PodRef{"a", fmt.Sprintf("p%d", i)}, Dst: PodRef{"a", "db"}, CallsPerSecond: float64(i)})
	}
	v, err = EncodeFlows(many)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = DecodeFlows(v)
	// rates 0..265: the 256 kept are 10..265
	if len(got.Edges) != MaxFlowEdges || got.Edges[len(got.Edges)-1].CallsPerSecond != 10 {
		t.Fatalf("kept %d edges, the smallest %v; want %d and 10", len(got.Edges), got.Edges[len(got.Edges)-1].CallsPerSecond, MaxFlowEdges)
	}
}

func TestFlowsRefusals(t *testing.T) {
	ok := `{"v":1,"ts":"2026-03-01T08:00:00Z","window":"10s","edges":[{"src":"a/b","dst":"a/c","cps":1}]}`
	if _, err := DecodeFlows(ok); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, v, want string }{
		{"syntax", `{"v":1`, "unexpected EOF"},
		{"unknown field", strings.Replace(ok, `"v":1`, `"v":1,"x":2`, 1), "unknown field"},
		{"trailing", ok + `{}`, "trailing"},
		{"version", strings.Replace(ok, `"v":1`, `"v":2`, 1), "version 2"},
		{"time", strings.Replace(ok, `2026-03-01T08:00:00Z`, `yesterday`, 1), "ts"},
		{"window", strings.Replace(ok, `"10s"`, `"2h"`, 1), "window"},
		{"pod ref", strings.Replace(ok, `"a/b"`, `"b"`, 1), "not namespace/name"},
		{"namespace", strings.Replace(ok, `"a/b"`, `"A_/b"`, 1), "namespace"},
		{"negative rate", strings.Replace(ok, `"cps":1`, `"cps":-1`, 1), "cps"},
		{"huge", strings.Repeat(" ", MaxFlowsBytes+1), "limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeFlows(tc.v)
			if !errors.Is(err, ErrFlows) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrFlows mentioning %q", err, tc.want)
			}
		})
	}
}

// TestFlowRates: connection counts 10 then 40 over 10 s on one flow are
// 3 calls/s; two ports of one pair add up; a counter that went back (a
// collector restart, 40 -> 5) counts its 5 new connections: 0.5/s.
func TestFlowRates(t *testing.T) {
	a, b, c := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	var r flowRates
	if got, _ := r.window(t0, []FlowCount{{Src: a, Dst: b, DstPort: 80, Conns: 10}}); got != nil {
		t.Fatalf("first snapshot gave rates %v", got)
	}
	got, win := r.window(t0.Add(10*time.Second), []FlowCount{{Src: a, Dst: b, DstPort: 80, Conns: 40}, {Src: a, Dst: b, DstPort: 443, Conns: 20}, {Src: a, Dst: c, DstPort: 80, Conns: 0}})
	// a->b: (40-10)/10 + (20-0)/10 = 3 + 2 = 5/s; a->c opened none
	if win != 10*time.Second || got[[2]netip.Addr{a, b}] != 5 || len(got) != 1 {
		t.Fatalf("rates %v over %v, want a->b 5/s only", got, win)
	}
	got, _ = r.window(t0.Add(20*time.Second), []FlowCount{{Src: a, Dst: b, DstPort: 80, Conns: 5}})
	if got[[2]netip.Addr{a, b}] != 0.5 {
		t.Fatalf("after a counter reset: %v, want 0.5/s", got)
	}
}

// FuzzDecodeFlows: any value decodes or is refused with ErrFlows; what
// decodes re-encodes and decodes to the same edges.
func FuzzDecodeFlows(f *testing.F) {
	f.Add(`{"v":1,"ts":"2026-03-01T08:00:00Z","window":"10s","edges":[{"src":"a/b","dst":"a/c","cps":1.5}]}`)
	f.Add(`{"v":1,"ts":"2026-03-01T08:00:00Z","window":"1m0s","edges":[]}`)
	f.Fuzz(func(t *testing.T, v string) {
		fl, err := DecodeFlows(v)
		if err != nil {
			if !errors.Is(err, ErrFlows) {
				t.Fatalf("error without ErrFlows: %v", err)
			}
			return
		}
		v2, err := EncodeFlows(fl)
		if err != nil {
			t.Fatalf("decoded flows do not encode: %v", err)
		}
		fl2, err := DecodeFlows(v2)
		if err != nil || len(fl2.Edges) != len(fl.Edges) {
			t.Fatalf("re-encoded flows differ: %v", err)
		}
	})
}
