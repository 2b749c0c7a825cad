package sim

import "github.com/edgesched/edgesched/sim/nodeload"

// NodeTelemetry is what a node reports at one instant: the quantities the
// edge agent measures and writes in its telemetry annotation (CPU, Mem,
// Load1, RunQueueP99Us, RetransPerS), the network throughput its probes
// see, and the model terms of the latency proxy. See sim/nodeload for the
// model and docs/sim.md ("Node telemetry") for the formulas.
type NodeTelemetry = nodeload.Telemetry

// RTOMs is the retransmission timeout a lost packet costs a cross-zone call
// (the latency proxy adds loss × RTOMs to the zones' RTT).
const RTOMs = 200

// loadAgg sums, per node and load profile, what the node's pods use at
// the profile's factor 1.
type loadAgg struct{ cpu, contention, net float64 }

type measured struct {
	t  NodeTelemetry
	ok bool
}

// Telemetry returns node n's telemetry now (at st.Now): its pods' use under
// their load profiles (bursts drawn with st.NoiseSeed) and its background
// load (NodeSpec.Background), the interference among the pods, their
// memory and network, its zone uplink's loss, all run
// through st.LoadModel. A value set with SetMeasured replaces the model.
// It does not change the state; it is O(load profiles).
func (st *State) Telemetry(n int) NodeTelemetry {
	if st.measured != nil && st.measured[n].ok {
		return st.measured[n].t
	}
	nd := &st.Nodes[n]
	in := nodeload.Input{CPUMilli: float64(nd.CPU), MemMiB: float64(nd.Mem), MemUsedMiB: nd.MemUsed, NICMbps: nd.NICMbps,
		Loss: st.ZoneLoss(int(nd.Zone)), Down: st.down[n]}
	K := len(st.Env.Profiles)
	if K == 1 {
		a := &st.agg[n]
		in.Demand, in.Contention, in.NetMbps = nd.CPUUsed, a.contention, a.net
	} else {
		for k, a := range st.agg[n*K : (n+1)*K] {
			g := 1.0
			if k > 0 && (a.cpu != 0 || a.net != 0) {
				g = st.Env.Profiles[k].Factor(st.Now, st.NoiseSeed, k, n)
			}
			in.Demand += a.cpu * g
			in.Contention += a.contention * g
			in.NetMbps += a.net * g
		}
	}
	in.Demand += nd.Background
	return st.LoadModel.Respond(in)
}

// SetMeasured makes Telemetry(n) return t (a measured summary, as the
// scheduler plugin has), or the model again for nil.
func (st *State) SetMeasured(n int, t *NodeTelemetry) {
	if st.measured == nil {
		if t == nil {
			return
		}
		st.measured = make([]measured, len(st.Nodes))
	}
	st.measured[n] = measured{}
	if t != nil {
		st.measured[n] = measured{t: *t, ok: true}
	}
}

// Down reports whether node n has failed (replay with node failures).
func (st *State) Down(n int) bool { return st.down[n] }

// SetDown marks node n failed or repaired; a failed node fits no pod. The
// run engine (sim/engine) calls it for disruptions; the pods on n are not
// touched, so evict them first.
func (st *State) SetDown(n int, down bool) {
	st.down[n] = down
	st.touch(n)
	st.refreshFit(n)
}

// ZoneLoss is the packet loss share of zone z's uplink now.
func (st *State) ZoneLoss(z int) float64 {
	u := &st.Env.Uplinks[z]
	if st.flap[z] {
		return u.FlapLoss
	}
	return u.LossRate
}

// SetFlap puts zone z's uplink in or out of a flap (the run engine's
// disruptions; see ZoneLoss and RTT).
func (st *State) SetFlap(z int, on bool) { st.flap[z] = on }

// Flapping reports whether zone z's uplink is in a flap now.
func (st *State) Flapping(z int) bool { return st.flap[z] }

// RTT is the round-trip time (ms) between zones a and b now: the network's
// figure, raised to a flapping uplink's FlapRTTMs, plus the uplinks' loss
// × RTOMs between different zones.
func (st *State) RTT(a, b int) float64 {
	r := st.Env.RTT[a][b]
	if a == b {
		return r
	}
	for _, z := range [2]int{a, b} {
		if st.flap[z] {
			r = max(r, st.Env.Uplinks[z].FlapRTTMs)
		}
	}
	if loss := max(st.ZoneLoss(a), st.ZoneLoss(b)); loss > 0 {
		r += loss * RTOMs
	}
	return r
}

// LatencyProxy is the latency proxy (ms) of a pod of service svc (-1: none)
// on node n now, as the latency measures count it: base / (1 − ρeff) ×
// MemFactor + NICDelayMs + the call-rate weighted RTT to its callees.
func (st *State) LatencyProxy(svc int32, n int, baseMs float64) float64 {
	t := st.Telemetry(n)
	l := NodeLatency(&t, baseMs)
	if svc >= 0 {
		l += st.DependencyRTT(int(svc), int(st.Nodes[n].Zone))
	}
	return l
}

// NodeLatency is the node's part of the latency proxy (ms) for a pod with
// service time baseMs on an idle node: baseMs / (1 − ρeff) × MemFactor +
// NICDelayMs, from the node's telemetry t (LatencyProxy adds the RTTs).
func NodeLatency(t *NodeTelemetry, baseMs float64) float64 {
	return baseMs/(1-t.RhoEff)*t.MemFactor + t.NICDelayMs
}
