// Package procfs reads node telemetry from the kernel's text interfaces:
// /proc/stat (per-CPU and total tick counters, from which Utilisation
// computes the busy share between two samples), /proc/meminfo (MemTotal,
// MemFree, MemAvailable), /proc/loadavg, /proc/pressure/{cpu,memory,io}
// (PSI, when the kernel has it), /proc/net/dev (per-device bytes, packets,
// errors and drops), /proc/net/snmp (TCP segments and retransmissions),
// and the CPU time, memory and limits of one cgroup (v1 cpuacct/cpu/memory
// controllers, or v2 cpu.stat, memory.current, memory.max, cpu.max). It is
// the edge-agent's fallback when eBPF is unavailable and its source for
// what the eBPF programs do not measure. It uses the standard library only.
//
// A Collector reads the files under Config.ProcRoot and Config.SysRoot
// (default /proc and /sys; tests point them at captured files in
// testdata/). The parsers (ParseStat, ParseMeminfo, ...) are exported and
// strict: input that is not what the kernel writes fails with a
// *ParseError naming the file and line, wrapping ErrMalformed. Optional
// sources (PSI, network) that are absent are reported as absent, never as
// zeros.
//
// Caveats: counters are cumulative since boot, so rates and utilisation
// need two samples; the cgroup path is resolved once by New (a cgroup
// deleted later makes Sample fail). A Collector reuses one read buffer and
// is not safe for concurrent use; a Sample's slices are reused by the next
// Collector.Sample into it (Sample.CopyTo keeps one). Parsers are safe for
// concurrent use.
package procfs
