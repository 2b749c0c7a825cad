package bpf

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"
)

// NumBuckets is the number of run-queue latency buckets (NUM_BUCKETS in
// sched.c). Bucket i counts latencies in [2^i, 2^(i+1)) µs; bucket 0 also
// holds those below 1 µs and the last bucket everything from 2^31 µs
// (about 36 minutes) up.
const NumBuckets = 32

// Defaults and limits of Config.
const (
	DefaultTracefsPath = "/sys/kernel/tracing"
	DefaultMaxFlows    = 4096
	// MaxMaxFlows bounds Config.MaxFlows: the flow map (MaxFlows entries)
	// and the socket map (4 × MaxFlows entries) are preallocated kernel
	// memory, roughly 100 bytes an entry: about 130 MiB at this bound,
	// 2 MiB at the default.
	MaxMaxFlows = 1 << 18
)

// Errors. Load's errors wrap ErrUnavailable with the reason when eBPF
// cannot be used on this node (the agent then falls back to /proc), and
// ErrInvalidConfig when the Config is wrong.
var (
	ErrUnavailable   = errors.New("bpf: eBPF telemetry unavailable")
	ErrInvalidConfig = errors.New("bpf: invalid config")
	ErrClosed        = errors.New("bpf: probes closed")
)

// Config configures Load. The zero value is usable: it means the defaults
// noted on each field, with MountTracefs off.
type Config struct {
	// TracefsPath is where tracefs is (or is to be) mounted; the
	// tracepoints are looked up under TracefsPath/events. "" means
	// DefaultTracefsPath. Must be absolute.
	TracefsPath string
	// MaxFlows bounds the TCP flow map (an LRU: the least recently
	// updated flow is evicted when full, and its counts are lost). 0
	// means DefaultMaxFlows; at most MaxMaxFlows.
	MaxFlows int
	// MountTracefs lets Load mount tracefs at TracefsPath (unix.Mount,
	// "tracefs" type) when nothing is mounted there. It stays mounted
	// after Close.
	MountTracefs bool
}

// DefaultConfig returns the configuration the edge agent uses: tracefs at
// DefaultTracefsPath, mounted when missing, DefaultMaxFlows flows.
func DefaultConfig() Config {
	return Config{TracefsPath: DefaultTracefsPath, MaxFlows: DefaultMaxFlows, MountTracefs: true}
}

// Validate reports the first problem with c; every error wraps
// ErrInvalidConfig.
func (c Config) Validate() error {
	if c.TracefsPath != "" && !filepath.IsAbs(c.TracefsPath) {
		return fmt.Errorf("%w: tracefs path %q is not absolute", ErrInvalidConfig, c.TracefsPath)
	}
	if c.MaxFlows < 0 || c.MaxFlows > MaxMaxFlows {
		return fmt.Errorf("%w: max flows %d outside [0, %d]", ErrInvalidConfig, c.MaxFlows, MaxMaxFlows)
	}
	return nil
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.TracefsPath == "" {
		c.TracefsPath = DefaultTracefsPath
	}
	if c.MaxFlows == 0 {
		c.MaxFlows = DefaultMaxFlows
	}
	return c
}

// Snapshot is what the programs counted since Load, all values cumulative
// (subtract an earlier Snapshot for a window: Histogram.Sub, or per key).
type Snapshot struct {
	// RunQueue is the run-queue latency histogram: wakeup (sched_wakeup,
	// sched_wakeup_new) or preemption to running (sched_switch), for
	// every task on the node.
	RunQueue Histogram
	// CgroupCPU is the on-CPU time per cgroup v2 id (the inode number of
	// the cgroup's directory in the cgroup2 mount). The idle task is not
	// counted. At most 8192 cgroups are tracked at once (LRU).
	CgroupCPU map[uint64]time.Duration
	// Retransmits counts TCP segments retransmitted on the node
	// (tcp:tcp_retransmit_skb; SYN retransmissions included).
	Retransmits uint64
	// Flows are the TCP flows seen since Load, sorted by Src, Dst,
	// DstPort.
	Flows []Flow
}

// Flow is the TCP traffic from a client address to a server address and
// port, in the eyes of one node.
type Flow struct {
	// Src is the client (the end that opened the connections), Dst the
	// server. IPv4-mapped IPv6 addresses are reported as IPv4.
	Src, Dst netip.Addr
	// DstPort is the server's port.
	DstPort uint16
	// Bytes is the TCP payload sent by both ends on this node (each byte
	// is counted by the node that sends it: a flow between two nodes is
	// split between their agents; one within a node is counted once).
	Bytes uint64
	// Conns is the number of connections opened from this node (active
	// opens that reached ESTABLISHED). Connections accepted here from a
	// client on another node are counted by that node's agent.
	Conns uint64
}
