package procfs

import (
	"bytes"
	"strconv"
)

// CPUTimes are the cumulative times of one CPU (or of all CPUs, summed)
// from /proc/stat, in USER_HZ ticks (1/100 s on every architecture Linux
// exports it for). Guest and GuestNice are already included in User and
// Nice by the kernel.
type CPUTimes struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal, Guest, GuestNice uint64
}

// Busy is the time the CPU did work: user, nice, system, irq, softirq and
// steal (time a hypervisor gave to someone else counts as unavailable,
// hence busy).
func (t CPUTimes) Busy() uint64 {
	return t.User + t.Nice + t.System + t.IRQ + t.SoftIRQ + t.Steal
}

// IdleAll is idle plus iowait (a CPU waiting for I/O could run something).
func (t CPUTimes) IdleAll() uint64 { return t.Idle + t.IOWait }

// Utilisation is the busy share of the time between prev and cur, in
// [0, 1]; ok is false when no tick elapsed. Each counter is differenced
// on its own and a decrease counts as zero: the kernel's per-CPU iowait
// is known to step backwards.
func Utilisation(prev, cur CPUTimes) (u float64, ok bool) {
	busy := sub(cur.User, prev.User) + sub(cur.Nice, prev.Nice) + sub(cur.System, prev.System) +
		sub(cur.IRQ, prev.IRQ) + sub(cur.SoftIRQ, prev.SoftIRQ) + sub(cur.Steal, prev.Steal)
	idle := sub(cur.Idle, prev.Idle) + sub(cur.IOWait, prev.IOWait)
	if busy+idle == 0 {
		return 0, false
	}
	return float64(busy) / float64(busy+idle), true
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// Stat is what the agent uses of /proc/stat.
type Stat struct {
	// Total is the "cpu" line: all CPUs summed.
	Total CPUTimes
	// CPUs are the "cpuN" lines, indexed by N. A CPU that is offline has
	// no line; its entry is zero and Online[N] is false.
	CPUs   []CPUTimes
	Online []bool
	// ContextSwitches is "ctxt"; ProcsRunning and ProcsBlocked are the
	// instantaneous counts of runnable and blocked-on-I/O tasks.
	ContextSwitches, ProcsRunning, ProcsBlocked uint64
}

// maxCPUs bounds the CPU numbers accepted (Linux's NR_CPUS maximum is 8192).
const maxCPUs = 8192

// ParseStat parses /proc/stat (name is used in errors). The "cpu" line is
// required; lines other than cpu, cpuN, ctxt, procs_running and
// procs_blocked are skipped (their number and order vary by kernel). st's
// slices are reused.
func ParseStat(name string, b []byte, st *Stat) error {
	st.Total = CPUTimes{}
	st.CPUs, st.Online = st.CPUs[:0], st.Online[:0]
	st.ContextSwitches, st.ProcsRunning, st.ProcsBlocked = 0, 0, 0
	var f [][]byte
	seenTotal := false
	err := lines(b, func(n int, line []byte) error {
		key := firstField(line)
		if len(key) == 0 {
			return perr(name, n, "empty line")
		}
		if !bytes.HasPrefix(key, []byte("cpu")) && !bytes.Equal(key, []byte("ctxt")) && !bytes.HasPrefix(key, []byte("procs_")) {
			return nil // intr, softirq (hundreds of fields), btime, processes, ...
		}
		f = fields(f, line)
		switch {
		case bytes.Equal(key, []byte("cpu")):
			if seenTotal {
				return perr(name, n, "second cpu line")
			}
			seenTotal = true
			return parseCPUTimes(name, n, f[1:], &st.Total)
		case bytes.HasPrefix(key, []byte("cpu")):
			id, ok := parseUint(key[3:])
			if !ok || id >= maxCPUs {
				return perr(name, n, "bad CPU name %q", key)
			}
			for uint64(len(st.CPUs)) <= id {
				st.CPUs = append(st.CPUs, CPUTimes{})
				st.Online = append(st.Online, false)
			}
			if st.Online[id] {
				return perr(name, n, "%s repeated", key)
			}
			st.Online[id] = true
			return parseCPUTimes(name, n, f[1:], &st.CPUs[id])
		case bytes.Equal(key, []byte("ctxt")), bytes.Equal(key, []byte("procs_running")), bytes.Equal(key, []byte("procs_blocked")):
			if len(f) != 2 {
				return perr(name, n, "%s: want 1 value, got %d", key, len(f)-1)
			}
			x, ok := parseUint(f[1])
			if !ok {
				return perr(name, n, "%s: bad number %q", key, f[1])
			}
			switch string(key) {
			case "ctxt":
				st.ContextSwitches = x
			case "procs_running":
				st.ProcsRunning = x
			default:
				st.ProcsBlocked = x
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !seenTotal {
		return perr(name, 0, "no cpu line")
	}
	return nil
}

// firstField is the first space-separated field of line.
func firstField(line []byte) []byte {
	line = bytes.TrimLeft(line, " \t")
	if i := bytes.IndexAny(line, " \t"); i >= 0 {
		return line[:i]
	}
	return line
}

// parseCPUTimes reads the 4 to 10 tick counters of a cpu line (kernels
// before 2.6.11 wrote 4; later ones add fields at the end, which are
// ignored beyond the tenth).
func parseCPUTimes(name string, n int, f [][]byte, t *CPUTimes) error {
	if len(f) < 4 {
		return perr(name, n, "cpu line has %d counters, want at least 4", len(f))
	}
	dst := [...]*uint64{&t.User, &t.Nice, &t.System, &t.Idle, &t.IOWait, &t.IRQ, &t.SoftIRQ, &t.Steal, &t.Guest, &t.GuestNice}
	*t = CPUTimes{}
	for i, v := range f {
		x, ok := parseUint(v)
		if !ok {
			return perr(name, n, "counter %d: bad number %s", i+1, strconv.Quote(string(v)))
		}
		if i < len(dst) {
			*dst[i] = x
		}
	}
	return nil
}
