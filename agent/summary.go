package agent

import (
	"math"
	"time"

	"github.com/edgesched/edgesched/agent/telemetry/bpf"
	"github.com/edgesched/edgesched/agent/telemetry/procfs"
	"github.com/edgesched/edgesched/kubefmt"
)

// kernelSample is what the agent keeps of a probe snapshot.
type kernelSample struct {
	RunQueue    bpf.Histogram
	Retransmits uint64
}

// record is one sampling instant.
type record struct {
	At      time.Time // the agent's clock when the sample was taken
	Proc    procfs.Sample
	Kernel  kernelSample
	HasKern bool
}

// ring keeps the last records, oldest first, reusing their storage.
type ring struct {
	recs  []record
	start int // index of the oldest
	n     int
}

func newRing(size int) *ring { return &ring{recs: make([]record, size)} }

// next returns the slot the next record goes into (the oldest one when
// full); push commits it.
func (r *ring) next() *record { return &r.recs[(r.start+r.n)%len(r.recs)] }

func (r *ring) push() {
	if r.n < len(r.recs) {
		r.n++
		return
	}
	r.start = (r.start + 1) % len(r.recs)
}

// at returns the i-th record, 0 the oldest.
func (r *ring) at(i int) *record { return &r.recs[(r.start+i)%len(r.recs)] }

func (r *ring) len() int { return r.n }

func (r *ring) last() *record {
	if r.n == 0 {
		return nil
	}
	return r.at(r.n - 1)
}

// base returns the oldest record at least window before the last one, or
// failing that the oldest record (a window still filling up).
func (r *ring) base(window time.Duration) *record {
	last := r.last()
	if last == nil {
		return nil
	}
	for i := r.n - 1; i >= 0; i-- {
		if rec := r.at(i); last.At.Sub(rec.At) >= window {
			return rec
		}
	}
	return r.at(0)
}

// summaryInput selects the node's measures.
type summaryInput struct {
	base, last *record
	cgroup     bool // CPU and memory from the cgroup
}

// buildSummary computes the telemetry summary of the window from base to
// last. ok is false when the window is shorter than kubefmt.MinTelemetryWindow
// or no CPU time elapsed.
//
//   - CPU: the busy share of all CPUs' ticks in the window (/proc/stat);
//     with a cgroup, its CPU time / (window × CPUs it may use: its CFS
//     limit, or the online CPUs when it has none or a larger one).
//   - Mem: (MemTotal − MemAvailable) / MemTotal at the last sample; with a
//     cgroup, its charged memory / its limit (MemTotal when none).
//   - Load1: the host's 1-minute load average at the last sample.
//   - RunQueueP99Us: the 99th percentile of the run-queue latency
//     histogram's growth over the window (eBPF only; 0 when no task was
//     woken).
//   - RetransPerS: TCP retransmitted segments per second over the window,
//     from eBPF when both ends have it, else from /proc/net/snmp.
func buildSummary(in summaryInput) (kubefmt.TelemetrySummary, bool) {
	b, l := in.base, in.last
	if b == nil || l == nil {
		return kubefmt.TelemetrySummary{}, false
	}
	window := l.At.Sub(b.At)
	if window < kubefmt.MinTelemetryWindow {
		return kubefmt.TelemetrySummary{}, false
	}
	s := kubefmt.TelemetrySummary{Time: l.At, Window: roundWindow(window), Load1: clamp(l.Proc.Load.Load1, kubefmt.MaxLoad1)}
	secs := window.Seconds()
	if in.cgroup && b.Proc.HasCgroup && l.Proc.HasCgroup {
		cpus := float64(onlineCPUs(&l.Proc.Stat))
		if lim := l.Proc.Cgroup.CPULimit; lim > 0 && lim < cpus {
			cpus = lim
		}
		used := l.Proc.Cgroup.CPU - b.Proc.Cgroup.CPU
		s.CPU = clamp(used.Seconds()/(secs*cpus), 1)
		total := l.Proc.Mem.MemTotal
		if lim := l.Proc.Cgroup.MemoryLimit; lim > 0 && lim < total {
			total = lim
		}
		if l.Proc.Cgroup.HasMemory && total > 0 {
			s.Mem = clamp(float64(l.Proc.Cgroup.Memory)/float64(total), 1)
		}
	} else {
		u, ok := procfs.Utilisation(b.Proc.Stat.Total, l.Proc.Stat.Total)
		if !ok {
			return kubefmt.TelemetrySummary{}, false
		}
		s.CPU = u
		s.Mem = l.Proc.Mem.UsedFraction()
	}
	if b.HasKern && l.HasKern {
		h := l.Kernel.RunQueue.Sub(b.Kernel.RunQueue)
		p99 := clamp(float64(h.Quantile(0.99))/float64(time.Microsecond), kubefmt.MaxRunQueueP99Us)
		s.RunQueueP99Us = &p99
		r := clamp(float64(sat(l.Kernel.Retransmits, b.Kernel.Retransmits))/secs, kubefmt.MaxRetransPerS)
		s.RetransPerS = &r
	} else if b.Proc.HasTCP && l.Proc.HasTCP {
		r := clamp(float64(sat(l.Proc.TCP.RetransSegs, b.Proc.TCP.RetransSegs))/secs, kubefmt.MaxRetransPerS)
		s.RetransPerS = &r
	}
	return s, true
}

// roundWindow rounds to 100 ms, keeping at least kubefmt.MinTelemetryWindow.
func roundWindow(d time.Duration) time.Duration {
	return max(d.Round(100*time.Millisecond), kubefmt.MinTelemetryWindow)
}

func onlineCPUs(st *procfs.Stat) int {
	n := 0
	for _, on := range st.Online {
		if on {
			n++
		}
	}
	return max(n, 1)
}

// clamp bounds x to [0, hi]; NaN becomes 0.
func clamp(x, hi float64) float64 {
	if !(x > 0) {
		return 0
	}
	return math.Min(x, hi)
}

func sat(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// Change resolution: a summary differs from the last one written when a
// measure moved by at least this much (what the scheduler can act on).
const (
	cpuMemStep  = 0.01 // one percentage point
	loadStep    = 0.1
	retransStep = 0.1 // per second
	runqRelStep = 0.1 // 10 % of the previous p99
)

// changed reports whether cur differs from prev beyond the resolution
// above, or an optional measure appeared or disappeared.
func changed(prev, cur kubefmt.TelemetrySummary) bool {
	if math.Abs(cur.CPU-prev.CPU) >= cpuMemStep || math.Abs(cur.Mem-prev.Mem) >= cpuMemStep ||
		math.Abs(cur.Load1-prev.Load1) >= loadStep {
		return true
	}
	if (prev.RetransPerS == nil) != (cur.RetransPerS == nil) || (prev.RunQueueP99Us == nil) != (cur.RunQueueP99Us == nil) {
		return true
	}
	if cur.RetransPerS != nil && math.Abs(*cur.RetransPerS-*prev.RetransPerS) >= retransStep {
		return true
	}
	if cur.RunQueueP99Us != nil {
		p, c := *prev.RunQueueP99Us, *cur.RunQueueP99Us
		if math.Abs(c-p) > runqRelStep*math.Max(p, 1) {
			return true
		}
	}
	return false
}
