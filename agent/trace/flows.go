package trace

import (
	"net/netip"
	"time"
)

// FlowCount is one TCP flow as a node's collector counts it (cumulative
// since the collector started), e.g. agent/telemetry/bpf's Flow:
// FlowCount{Src: f.Src, Dst: f.Dst, DstPort: f.DstPort, Conns: f.Conns}.
type FlowCount struct {
	Src, Dst netip.Addr
	DstPort  uint16
	Conns    uint64
}

type flowKey struct {
	src, dst netip.Addr
	port     uint16
}

// flowRates turns cumulative flow counts into pod-to-pod call rates: a
// call is a TCP connection; the rate over a window is the connections
// opened in it divided by its length. A counter that went backwards (the
// collector restarted) starts again from its new value.
type flowRates struct {
	prev   map[flowKey]uint64
	prevAt time.Time
}

// window returns the rates between the previous snapshot and this one
// (nil on the first) keyed by address pair, and keeps this one.
func (r *flowRates) window(at time.Time, flows []FlowCount) (map[[2]netip.Addr]float64, time.Duration) {
	cur := make(map[flowKey]uint64, len(flows))
	for _, f := range flows {
		cur[flowKey{f.Src, f.Dst, f.DstPort}] += f.Conns
	}
	prev, prevAt := r.prev, r.prevAt
	r.prev, r.prevAt = cur, at
	dt := at.Sub(prevAt)
	if prev == nil || dt <= 0 {
		return nil, 0
	}
	out := map[[2]netip.Addr]float64{}
	for k, n := range cur {
		p, ok := prev[k]
		if !ok || n < p {
			p = 0 // a new flow, or a restarted counter: count what it holds
		}
		if n > p {
			out[[2]netip.Addr{k.src, k.dst}] += float64(n-p) / dt.Seconds()
		}
	}
	return out, dt
}
