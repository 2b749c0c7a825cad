package trace

import (
	"net/netip"
	"testing"
	"time"
)

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
