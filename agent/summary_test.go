package agent

import (
	"math"
	"testing"
	"time"

	"github.com/edgesched/edgesched/agent/telemetry/bpf"
	"github.com/edgesched/edgesched/agent/telemetry/procfs"
	"github.com/edgesched/edgesched/kubefmt"
)

var t0 = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

// rec builds a record at t0+at with two online CPUs.
func rec(at time.Duration, user, idle uint64, memTotal, memAvail uint64) *record {
	r := &record{At: t0.Add(at)}
	r.Proc.Stat.Total = procfs.CPUTimes{User: user, Idle: idle}
	r.Proc.Stat.CPUs = make([]procfs.CPUTimes, 2)
	r.Proc.Stat.Online = []bool{true, true}
	r.Proc.Mem = procfs.Meminfo{MemTotal: memTotal, MemFree: memAvail, MemAvailable: memAvail}
	r.Proc.Load.Load1 = 1.5
	return r
}

func withTCP(r *record, retrans uint64) *record {
	r.Proc.HasTCP, r.Proc.TCP.RetransSegs = true, retrans
	return r
}

func withKernel(r *record, bucket int, count, retrans uint64) *record {
	r.HasKern = true
	r.Kernel.RunQueue.Buckets[bucket] = count
	r.Kernel.Retransmits = retrans
	return r
}

func withCgroup(r *record, cpu time.Duration, mem, memLimit uint64, cpuLimit float64) *record {
	r.Proc.HasCgroup = true
	r.Proc.Cgroup = procfs.CgroupSample{CPU: cpu, Memory: mem, HasMemory: true, MemoryLimit: memLimit, CPULimit: cpuLimit}
	return r
}

func f64(x float64) *float64 { return &x }

func TestBuildSummary(t *testing.T) {
	const gib = 1 << 30
	cases := []struct {
		name       string
		base, last *record
		cgroup     bool
		want       kubefmt.TelemetrySummary
		ok         bool
	}{
		{
			// busy 400-100 = 300 ticks, idle 1600-900 = 700: CPU 300/1000 = 0.3;
			// memory (10 - 4) / 10 GiB = 0.6; retransmits (105 - 100) / 10 s = 0.5/s.
			name: "host from /proc",
			base: withTCP(rec(0, 100, 900, 10*gib, 4*gib), 100),
			last: withTCP(rec(10*time.Second, 400, 1600, 10*gib, 4*gib), 105),
			want: kubefmt.TelemetrySummary{Time: t0.Add(10 * time.Second), Window: 10 * time.Second, CPU: 0.3, Mem: 0.6, Load1: 1.5, RetransPerS: f64(0.5)},
			ok:   true,
		},
		{
			// The histogram grew by 100 observations, all in bucket 3 = [8, 16) µs:
			// the 99th is rank 0.99 × 100 = 99 of 100 in the bucket, interpolated
			// 8 + 99/100 × (16 - 8) = 15.92 µs. Retransmits from eBPF:
			// (30 - 10) / 10 s = 2/s (the /proc counters, +5, are not used).
			name: "host with eBPF",
			base: withKernel(withTCP(rec(0, 100, 900, 10*gib, 4*gib), 100), 3, 10, 10),
			last: withKernel(withTCP(rec(10*time.Second, 400, 1600, 10*gib, 4*gib), 105), 3, 110, 30),
			want: kubefmt.TelemetrySummary{Time: t0.Add(10 * time.Second), Window: 10 * time.Second, CPU: 0.3, Mem: 0.6, Load1: 1.5,
				RunQueueP99Us: f64(15.92), RetransPerS: f64(2)},
			ok: true,
		},
		{
			// No wakeups in the window: p99 0; no retransmits: 0/s.
			name: "eBPF idle window",
			base: withKernel(rec(0, 100, 900, 10*gib, 4*gib), 3, 10, 10),
			last: withKernel(rec(10*time.Second, 400, 1600, 10*gib, 4*gib), 3, 10, 10),
			want: kubefmt.TelemetrySummary{Time: t0.Add(10 * time.Second), Window: 10 * time.Second, CPU: 0.3, Mem: 0.6, Load1: 1.5,
				RunQueueP99Us: f64(0), RetransPerS: f64(0)},
			ok: true,
		},
		{
			// A cgroup limited to 0.5 CPU used 4 s of CPU in 10 s:
			// 4 / (10 × 0.5) = 0.8. Memory 256 MiB of its 512 MiB limit: 0.5.
			name:   "cgroup with limits",
			base:   withCgroup(rec(0, 100, 900, 10*gib, 4*gib), 1*time.Second, 256<<20, 512<<20, 0.5),
			last:   withCgroup(rec(10*time.Second, 400, 1600, 10*gib, 4*gib), 5*time.Second, 256<<20, 512<<20, 0.5),
			cgroup: true,
			want:   kubefmt.TelemetrySummary{Time: t0.Add(10 * time.Second), Window: 10 * time.Second, CPU: 0.8, Mem: 0.5, Load1: 1.5},
			ok:     true,
		},
		{
			// No limits: 5 s of CPU in 10 s on 2 online CPUs: 5 / (10 × 2) =
			// 0.25; 1 GiB of the host's 10 GiB: 0.1.
			name:   "cgroup without limits",
			base:   withCgroup(rec(0, 100, 900, 10*gib, 4*gib), 0, gib, 0, 0),
			last:   withCgroup(rec(10*time.Second, 400, 1600, 10*gib, 4*gib), 5*time.Second, gib, 0, 0),
			cgroup: true,
			want:   kubefmt.TelemetrySummary{Time: t0.Add(10 * time.Second), Window: 10 * time.Second, CPU: 0.25, Mem: 0.1, Load1: 1.5},
			ok:     true,
		},
		{
			// A 4-CPU limit on a 2-CPU host counts as 2: 10 s / (10 × 2) = 0.5;
			// a 20 GiB limit above the host's 10 GiB counts as 10 GiB: 5/10.
			name:   "cgroup limits above the host",
			base:   withCgroup(rec(0, 100, 900, 10*gib, 4*gib), 0, 5*gib, 20*gib, 4),
			last:   withCgroup(rec(10*time.Second, 400, 1600, 10*gib, 4*gib), 10*time.Second, 5*gib, 20*gib, 4),
			cgroup: true,
			want:   kubefmt.TelemetrySummary{Time: t0.Add(10 * time.Second), Window: 10 * time.Second, CPU: 0.5, Mem: 0.5, Load1: 1.5},
			ok:     true,
		},
		{
			// 0.5 CPU limit, 6 s used in 10 s (burst accounting): 6/5 = 1.2, clamped to 1.
			name:   "cgroup over its limit",
			base:   withCgroup(rec(0, 100, 900, 10*gib, 4*gib), 0, 0, 0, 0.5),
			last:   withCgroup(rec(10*time.Second, 400, 1600, 10*gib, 4*gib), 6*time.Second, 0, 0, 0.5),
			cgroup: true,
			want:   kubefmt.TelemetrySummary{Time: t0.Add(10 * time.Second), Window: 10 * time.Second, CPU: 1, Mem: 0, Load1: 1.5},
			ok:     true,
		},
		{
			// 10.04 s rounds to 10 s; 9.96 s rounds to 10 s too (100 ms steps).
			name: "window rounding",
			base: rec(40*time.Millisecond, 100, 900, 10*gib, 4*gib),
			last: rec(10*time.Second+80*time.Millisecond, 400, 1600, 10*gib, 4*gib),
			want: kubefmt.TelemetrySummary{Time: t0.Add(10*time.Second + 80*time.Millisecond), Window: 10 * time.Second, CPU: 0.3, Mem: 0.6, Load1: 1.5},
			ok:   true,
		},
		{name: "window below a second", base: rec(0, 100, 900, gib, gib), last: rec(999*time.Millisecond, 110, 990, gib, gib)},
		{name: "no tick elapsed", base: rec(0, 100, 900, gib, gib), last: rec(2*time.Second, 100, 900, gib, gib)},
		{name: "no base", last: rec(2*time.Second, 100, 900, gib, gib)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := buildSummary(summaryInput{base: tc.base, last: tc.last, cgroup: tc.cgroup})
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (%+v)", ok, tc.ok, got)
			}
			if !ok {
				return
			}
			if !sameSummary(got, tc.want) {
				t.Fatalf("got  %s\nwant %s", show(got), show(tc.want))
			}
			if _, err := kubefmt.EncodeTelemetry(got); err != nil {
				t.Fatalf("summary does not encode: %v", err)
			}
		})
	}
}

func sameSummary(a, b kubefmt.TelemetrySummary) bool {
	eq := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	opt := func(x, y *float64) bool { return (x == nil) == (y == nil) && (x == nil || eq(*x, *y)) }
	return a.Time.Equal(b.Time) && a.Window == b.Window && eq(a.CPU, b.CPU) && eq(a.Mem, b.Mem) && eq(a.Load1, b.Load1) &&
		opt(a.RunQueueP99Us, b.RunQueueP99Us) && opt(a.RetransPerS, b.RetransPerS)
}

func show(s kubefmt.TelemetrySummary) string {
	v, err := kubefmt.EncodeTelemetry(s)
	if err != nil {
		return err.Error()
	}
	return v
}

func TestRingBase(t *testing.T) {
	r := newRing(13) // a 10 s window at 1 s plus slack, as New sizes it
	for i := range 20 {
		rec := r.next()
		rec.At = t0.Add(time.Duration(i) * time.Second)
		r.push()
	}
	// 13 records kept: 7 s .. 19 s. The base of a 10 s window ending at 19 s
	// is the newest record at least 10 s older: 9 s.
	if r.len() != 13 || !r.at(0).At.Equal(t0.Add(7*time.Second)) || !r.last().At.Equal(t0.Add(19*time.Second)) {
		t.Fatalf("ring holds %d records from %v to %v", r.len(), r.at(0).At, r.last().At)
	}
	if b := r.base(10 * time.Second); !b.At.Equal(t0.Add(9 * time.Second)) {
		t.Fatalf("base = %v, want t0+9s", b.At.Sub(t0))
	}
	// A window longer than the ring holds: the oldest record.
	if b := r.base(time.Minute); !b.At.Equal(t0.Add(7 * time.Second)) {
		t.Fatalf("base = %v, want the oldest (t0+7s)", b.At.Sub(t0))
	}
}

func TestChanged(t *testing.T) {
	base := kubefmt.TelemetrySummary{Time: t0, Window: 10 * time.Second, CPU: 0.30, Mem: 0.50, Load1: 1.0, RetransPerS: f64(0.5), RunQueueP99Us: f64(100)}
	mod := func(f func(*kubefmt.TelemetrySummary)) kubefmt.TelemetrySummary {
		s := base
		s.RetransPerS, s.RunQueueP99Us = f64(*base.RetransPerS), f64(*base.RunQueueP99Us)
		f(&s)
		return s
	}
	cases := []struct {
		name string
		cur  kubefmt.TelemetrySummary
		want bool
	}{
		{"identical but later", mod(func(s *kubefmt.TelemetrySummary) { s.Time = t0.Add(time.Minute) }), false},
		{"cpu +0.009", mod(func(s *kubefmt.TelemetrySummary) { s.CPU = 0.309 }), false},
		{"cpu +0.01", mod(func(s *kubefmt.TelemetrySummary) { s.CPU = 0.31 }), true},
		{"mem -0.02", mod(func(s *kubefmt.TelemetrySummary) { s.Mem = 0.48 }), true},
		{"load +0.05", mod(func(s *kubefmt.TelemetrySummary) { s.Load1 = 1.05 }), false},
		{"load +0.1", mod(func(s *kubefmt.TelemetrySummary) { s.Load1 = 1.1 }), true},
		{"retrans +0.05/s", mod(func(s *kubefmt.TelemetrySummary) { *s.RetransPerS = 0.55 }), false},
		{"retrans gone", mod(func(s *kubefmt.TelemetrySummary) { s.RetransPerS = nil }), true},
		// 10 % of 100 µs is 10 µs: 109 is within, 111 beyond.
		{"p99 +9%", mod(func(s *kubefmt.TelemetrySummary) { *s.RunQueueP99Us = 109 }), false},
		{"p99 +11%", mod(func(s *kubefmt.TelemetrySummary) { *s.RunQueueP99Us = 111 }), true},
		{"p99 appears", mod(func(s *kubefmt.TelemetrySummary) { s.RunQueueP99Us = nil }), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := changed(base, tc.cur); got != tc.want {
				t.Fatalf("changed = %v, want %v", got, tc.want)
			}
		})
	}
	// Histogram helpers as the agent uses them (bpf's own tests cover Quantile).
	var h bpf.Histogram
	if h.Quantile(0.99) != 0 {
		t.Fatal("empty histogram p99 is not 0")
	}
}
