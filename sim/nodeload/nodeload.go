package nodeload

import (
	"errors"
	"fmt"
	"math"
)

// ErrInvalid wraps every validation error of the package.
var ErrInvalid = errors.New("nodeload: invalid value")

// Profile is a load profile: how the use of the pods that follow it varies
// over time around their mean. The zero Profile is steady use.
type Profile struct {
	Name string
	// Amplitude and PeakHour give the daily cycle: use × (1 + Amplitude ·
	// cos(2π (hour − PeakHour) / 24)), hour = simulated seconds / 3600 mod
	// 24. Amplitude in [0, 1], PeakHour in [0, 24).
	Amplitude, PeakHour float64
	// BurstsPerDay, BurstSeconds and BurstMultiplier give bursts: time is
	// cut into BurstSeconds slots, and the pods of this profile on one node
	// burst together through a slot with probability BurstsPerDay ·
	// BurstSeconds / 86400 (at most 1), using BurstMultiplier × as much.
	// BurstsPerDay 0: no bursts.
	BurstsPerDay    float64
	BurstSeconds    int64
	BurstMultiplier float64
}

// Validate checks the profile's ranges.
func (p *Profile) Validate() error {
	switch {
	case !(p.Amplitude >= 0 && p.Amplitude <= 1):
		return fmt.Errorf("profile %s: %w: amplitude %v, want [0, 1]", p.Name, ErrInvalid, p.Amplitude)
	case !(p.PeakHour >= 0 && p.PeakHour < 24):
		return fmt.Errorf("profile %s: %w: peak hour %v, want [0, 24)", p.Name, ErrInvalid, p.PeakHour)
	case !(p.BurstsPerDay >= 0 && p.BurstsPerDay <= 86400):
		return fmt.Errorf("profile %s: %w: bursts per day %v, want [0, 86400]", p.Name, ErrInvalid, p.BurstsPerDay)
	case p.BurstsPerDay > 0 && (p.BurstSeconds <= 0 || p.BurstSeconds > 86400):
		return fmt.Errorf("profile %s: %w: burst duration %d s, want (0, 86400]", p.Name, ErrInvalid, p.BurstSeconds)
	case p.BurstsPerDay > 0 && !(p.BurstMultiplier >= 1 && p.BurstMultiplier <= 100):
		return fmt.Errorf("profile %s: %w: burst multiplier %v, want [1, 100]", p.Name, ErrInvalid, p.BurstMultiplier)
	case p.BurstsPerDay*float64(p.BurstSeconds) > 86400:
		return fmt.Errorf("profile %s: %w: %v bursts of %d s a day do not fit in a day", p.Name, ErrInvalid, p.BurstsPerDay, p.BurstSeconds)
	}
	return nil
}

// Factor is the profile's multiplier at time t (seconds) for the pods of
// profile index k on node n, under a run's seed.
func (p *Profile) Factor(t int64, seed uint64, k, n int) float64 {
	f := 1.0
	if p.Amplitude > 0 {
		h := math.Mod(float64(t)/3600, 24)
		f += p.Amplitude * math.Cos(2*math.Pi*(h-p.PeakHour)/24)
	}
	if p.BurstsPerDay > 0 {
		slot := uint64(t / p.BurstSeconds)
		prob := p.BurstsPerDay * float64(p.BurstSeconds) / 86400
		if unit(mix(seed, uint64(k), uint64(n), slot)) < prob {
			f *= p.BurstMultiplier
		}
	}
	return f
}

// Mean is the long-run mean of Factor (the daily cycle averages out).
func (p *Profile) Mean() float64 {
	if p.BurstsPerDay == 0 {
		return 1
	}
	return 1 + p.BurstsPerDay*float64(p.BurstSeconds)/86400*(p.BurstMultiplier-1)
}

// mix hashes four words with SplitMix64 steps.
func mix(a, b, c, d uint64) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, w := range [4]uint64{a, b, c, d} {
		h ^= w
		h += 0x9e3779b97f4a7c15
		h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9
		h = (h ^ (h >> 27)) * 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }

// Input is one node's state at one instant.
type Input struct {
	// CPUMilli and MemMiB are the node's capacity.
	CPUMilli, MemMiB float64
	// Demand is the milli-CPU its pods try to use now (may exceed CPUMilli).
	Demand float64
	// Contention is the interference of its pods, in milli-CPU of extra
	// run-queue demand (sum of interference × use).
	Contention float64
	// MemUsedMiB is the memory its pods use (may exceed MemMiB).
	MemUsedMiB float64
	// NetMbps is its pods' network throughput; NICMbps its NIC (0: the
	// model's default).
	NetMbps, NICMbps float64
	// Loss is the packet loss share of the node's zone uplink now.
	Loss float64
	// Down is set while the node has failed.
	Down bool
}

// Telemetry is what a node reports at one instant: the fields of the edge
// agent's summary (kubefmt.TelemetrySummary), what the agent's probes see
// but do not publish yet, and the model terms the latency proxy uses.
type Telemetry struct {
	// As in the agent's annotation: CPU busy share and memory in use share
	// of the whole node ([0, 1]), the 1-minute load average, the run-queue
	// latency p99 (µs) and TCP retransmitted segments per second.
	CPU, Mem, Load1, RunQueueP99Us, RetransPerS float64
	// NetMbps is the node's network throughput (at most its NIC).
	NetMbps float64
	// MemPressure is the share of time tasks stall on memory (the kernel's
	// PSI "some" figure), 0 below the knee.
	MemPressure float64
	// Demand is CPU demand / capacity (may exceed 1); RhoEff the effective
	// utilisation with interference, capped at MaxUtil.
	Demand, RhoEff float64
	// MemFactor multiplies the pods' service time; NICDelayMs is added.
	MemFactor, NICDelayMs float64
	// Down: the node has failed; everything else is zero.
	Down bool
}

// Model holds the constants of the node response. Start from DefaultModel.
type Model struct {
	// MaxUtil caps ρeff (the latency proxy's slowdown is at most
	// 1/(1 − MaxUtil)); in (0, 1).
	MaxUtil float64
	// RunQueueBaseUs is the run-queue p99 of an idle node; BurstUs the mean
	// CPU burst of a runnable task (the M/M/c service time), in µs.
	RunQueueBaseUs, BurstUs float64
	// MemKnee is the memory use share where pressure starts; MemPenalty
	// the service-time penalty at full pressure (1 + MemPenalty).
	MemKnee, MemPenalty float64
	// DefaultNICMbps is the NIC of nodes that declare none; NICDelayUnitMs
	// scales its queueing delay.
	DefaultNICMbps, NICDelayUnitMs float64
	// CongestionLoss is the packet loss of a saturated NIC; SegmentBytes
	// the TCP segment size that turns throughput into packets.
	CongestionLoss, SegmentBytes float64
}

// DefaultModel returns the constants documented in docs/sim.md.
func DefaultModel() Model {
	return Model{MaxUtil: 0.95, RunQueueBaseUs: 20, BurstUs: 1000, MemKnee: 0.9, MemPenalty: 4,
		DefaultNICMbps: 1000, NICDelayUnitMs: 0.2, CongestionLoss: 0.02, SegmentBytes: 1448}
}

// Validate checks the constants.
func (m *Model) Validate() error {
	ok := m.MaxUtil > 0 && m.MaxUtil < 1 && m.RunQueueBaseUs >= 0 && m.BurstUs > 0 && m.MemKnee > 0 && m.MemKnee < 1 &&
		m.MemPenalty >= 0 && m.DefaultNICMbps > 0 && m.NICDelayUnitMs >= 0 && m.CongestionLoss >= 0 && m.CongestionLoss <= 1 && m.SegmentBytes > 0
	if !ok || math.IsInf(m.MemPenalty+m.RunQueueBaseUs+m.BurstUs+m.DefaultNICMbps+m.NICDelayUnitMs+m.SegmentBytes, 0) {
		return fmt.Errorf("%w: model constants %+v", ErrInvalid, *m)
	}
	return nil
}

// Respond computes a node's telemetry from its state (see the package
// documentation for the formulas).
func (m *Model) Respond(in Input) Telemetry {
	if in.Down || !(in.CPUMilli > 0) {
		return Telemetry{Down: in.Down, MemFactor: 1}
	}
	rho := in.Demand / in.CPUMilli
	t := Telemetry{Demand: rho, CPU: clamp01(rho), MemFactor: 1}
	// RhoEff is not clamped at 0: a sum of uses may end a hair below 0
	// after pods leave, and the proxy must stay bit for bit the old one.
	t.RhoEff = min(rho+in.Contention/in.CPUMilli, m.MaxUtil)
	var wait float64
	t.RunQueueP99Us, wait = m.runQueue(t.RhoEff, in.CPUMilli)
	r, c := max(0, t.RhoEff), max(1, in.CPUMilli/1000)
	t.Load1 = c*r*(1+wait) + c*max(0, rho-1)
	if in.MemMiB > 0 {
		mu := in.MemUsedMiB / in.MemMiB
		t.Mem = clamp01(mu)
		t.MemPressure = clamp01((mu - m.MemKnee) / (1 - m.MemKnee))
		if t.MemPressure > 0 {
			t.MemFactor = 1 + m.MemPenalty*t.MemPressure*t.MemPressure
		}
	}
	if in.NetMbps > 0 {
		nic := in.NICMbps
		if !(nic > 0) {
			nic = m.DefaultNICMbps
		}
		nu := in.NetMbps / nic
		t.NetMbps = min(in.NetMbps, nic)
		q := min(nu, 0.95)
		t.NICDelayMs = m.NICDelayUnitMs * q / (1 - q)
		cong := clamp01((nu - 0.7) / 0.3)
		loss := clamp01(in.Loss + m.CongestionLoss*cong*cong)
		t.RetransPerS = t.NetMbps * 1e6 / 8 / m.SegmentBytes * loss
	}
	return t
}

// runQueue is the run-queue latency p99 (µs) of a node of cpuMilli
// milli-CPU at effective utilisation rhoEff, and the queue's mean wait in
// service times (M/M/c, Sakasegawa's approximation).
func (m *Model) runQueue(rhoEff, cpuMilli float64) (p99Us, wait float64) {
	r := max(0, rhoEff)
	c := max(1, cpuMilli/1000)
	wait = math.Pow(r, math.Sqrt(2*(c+1))-1) / (c * (1 - r))
	return m.RunQueueBaseUs + math.Log(100)*m.BurstUs*wait, wait
}

// RunQueueP99Us estimates the run-queue latency p99 (µs) of a node of
// cpuMilli milli-CPU whose CPU is busy a share cpu of the time: what
// Respond reports at that utilisation without interference (for an agent
// that could not measure it: the /proc fallback).
func (m *Model) RunQueueP99Us(cpu, cpuMilli float64) float64 {
	p, _ := m.runQueue(min(clamp01(cpu), m.MaxUtil), cpuMilli)
	return p
}

func clamp01(x float64) float64 {
	if !(x > 0) {
		return 0
	}
	return min(x, 1)
}

// FromMeasured builds a node's Telemetry from measured values (an edge
// agent's summary: CPU and memory shares, load average, run-queue p99,
// retransmits), deriving the model terms the latency proxy uses: ρeff
// from the CPU share, the memory pressure and factor from the memory
// share. Values outside their ranges are clamped.
func (m *Model) FromMeasured(cpu, mem, load1, runqP99Us, retransPerS float64) Telemetry {
	t := Telemetry{CPU: clamp01(cpu), Mem: clamp01(mem), Load1: max(0, load1), RunQueueP99Us: max(0, runqP99Us), RetransPerS: max(0, retransPerS), MemFactor: 1}
	t.Demand = t.CPU
	t.RhoEff = min(t.CPU, m.MaxUtil)
	t.MemPressure = clamp01((t.Mem - m.MemKnee) / (1 - m.MemKnee))
	if t.MemPressure > 0 {
		t.MemFactor = 1 + m.MemPenalty*t.MemPressure*t.MemPressure
	}
	return t
}
