// Package nodeload is the simulator's model of what pods really use and
// how a node responds to it: the quantities the edge agent measures on a
// real node (kubefmt.TelemetrySummary: CPU, memory, load average, run-queue
// latency p99, TCP retransmits; plus network throughput) and the slowdown
// the latency proxy charges, both from the same few inputs.
//
// Use is not requests. A pod uses Usage × its CPU request on average (a
// share below 1 over-requests, above 1 under-requests), scaled over time
// by its load Profile (a daily cycle and bursts that hit one node's pods
// of a profile together); memory uses MemUsage × its request. A pod's
// Interference is how much its use disturbs its neighbours (cache, memory
// bandwidth, I/O): it counts as extra run-queue demand that does not show
// as CPU time. Network throughput loads the node's NIC and crosses its
// zone's uplink, whose loss causes retransmits.
//
// The node response (Model.Respond), with ρ = demand / capacity and
// c = cores:
//
//	CPU           = min(1, ρ)
//	ρeff          = min(MaxUtil, ρ + contention / capacity)
//	latency       = base / (1 − ρeff) × MemFactor + NICDelayMs (+ RTTs, in sim)
//	wait/S        = ρeff^(√(2(c+1)) − 1) / (c (1 − ρeff))   (Sakasegawa's M/M/c)
//	RunQueueP99Us = RunQueueBaseUs + ln(100) × BurstUs × wait/S
//	Load1         = c ρeff (1 + wait/S) + c max(0, ρ − 1)
//	MemPressure   = clamp((mem used / capacity − MemKnee) / (1 − MemKnee), 0, 1)
//	MemFactor     = 1 + MemPenalty × MemPressure²
//	ν             = network / NIC;  NICDelayMs = NICDelayUnitMs × ν/(1 − ν) (ν ≤ 0.95)
//	RetransPerS   = packets/s × (uplink loss + CongestionLoss × clamp((ν − 0.7)/0.3, 0, 1)²)
//
// With no profiles, no interference, no network and memory below the knee,
// the latency is exactly the simulator's earlier proxy base / (1 − min(ρ,
// MaxUtil)), so results of scenarios that use none of this do not change.
//
// Everything here is a pure function of its inputs and safe for concurrent
// use; burst draws hash (seed, profile, node, slot), so they need no state.
package nodeload
