//go:build (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm) && linux

package bpf

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// tracepoint is one program's attach point.
type tracepoint struct{ group, name string }

func (tp tracepoint) String() string { return tp.group + ":" + tp.name }

// Attach points. The required ones are checked in tracefs before loading,
// so that a missing one is reported by name; without sendLength (Linux
// before 6.3) flows are still counted, with Bytes 0.
var (
	requiredTracepoints = [...]tracepoint{
		{"sched", "sched_wakeup"},
		{"sched", "sched_wakeup_new"},
		{"sched", "sched_switch"},
		{"tcp", "tcp_retransmit_skb"},
		{"sock", "inet_sock_set_state"},
	}
	sendLength = tracepoint{"sock", "sock_send_length"}
)

// Probes are the loaded and attached programs. Snapshot may be called
// from any goroutine, also concurrently with Close.
type Probes struct {
	log *slog.Logger

	mu     sync.RWMutex // write-held by Close; read-held while maps are read
	closed bool
	sched  schedObjects
	tcp    tcpObjects
	links  []link.Link
	ncpu   int
}

// unavailable wraps ErrUnavailable with a reason.
func unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnavailable, fmt.Sprintf(format, args...))
}

// Load checks that this node can run the telemetry programs (privileges,
// tracefs and the tracepoints), loads them into the kernel and
// attaches them. When the node cannot, the error wraps ErrUnavailable and
// says why; a nil log discards logs.
func Load(cfg Config, log *slog.Logger) (*Probes, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := checkPrivileges(); err != nil {
		return nil, err
	}
	if err := ensureTracefs(cfg, log); err != nil {
		return nil, err
	}
	for _, tp := range requiredTracepoints {
		if !tracepointExists(cfg.TracefsPath, tp) {
			return nil, unavailable("tracepoint %s not found in %s/events (kernel too old? needs Linux 4.16+)", tp, cfg.TracefsPath)
		}
	}
	countBytes := tracepointExists(cfg.TracefsPath, sendLength)
	if !countBytes {
		log.Warn("tracepoint missing (Linux before 6.3): TCP flow bytes are not counted, connections are", "tracepoint", sendLength.String())
	}
	hasErr, err := checkLayouts(cfg.TracefsPath, countBytes)
	if err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, unavailable("raise the memlock rlimit: %v", err)
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, unavailable("count possible CPUs: %v", err)
	}

	p := &Probes{log: log, ncpu: ncpu}
	if err := p.load(cfg, hasErr); err != nil {
		p.closeAll()
		return nil, err
	}
	if err := p.attach(countBytes); err != nil {
		p.closeAll()
		return nil, err
	}
	log.Info("eBPF telemetry attached", "programs", len(p.links), "maxFlows", cfg.MaxFlows, "retransmitErrField", hasErr, "tracefs", cfg.TracefsPath)
	return p, nil
}

// checkPrivileges requires CAP_BPF with CAP_PERFMON (Linux 5.8+) or
// CAP_SYS_ADMIN in the effective set: tracing programs need both.
func checkPrivileges() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return unavailable("read capabilities: %v", err)
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	if has(unix.CAP_SYS_ADMIN) || (has(unix.CAP_BPF) && has(unix.CAP_PERFMON)) {
		return nil
	}
	return unavailable("not root: needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN) in the effective set (euid %d)", os.Geteuid())
}

// tracepointExists tells whether tracefs lists the event.
func tracepointExists(tracefs string, tp tracepoint) bool {
	_, err := os.Stat(filepath.Join(tracefs, "events", tp.group, tp.name, "id"))
	return err == nil
}

// ensureTracefs checks that tracefs is mounted at cfg.TracefsPath and
// mounts it there when allowed.
func ensureTracefs(cfg Config, log *slog.Logger) error {
	var st unix.Statfs_t
	err := unix.Statfs(cfg.TracefsPath, &st)
	if err == nil && st.Type == unix.TRACEFS_MAGIC {
		return nil
	}
	if !cfg.MountTracefs {
		return unavailable("tracefs not mounted at %s (mount -t tracefs tracefs %s, or let the agent mount it)", cfg.TracefsPath, cfg.TracefsPath)
	}
	if err := unix.Mount("tracefs", cfg.TracefsPath, "tracefs", 0, ""); err != nil {
		return unavailable("tracefs not mounted at %s, and mounting it failed: %v", cfg.TracefsPath, err)
	}
	log.Info("mounted tracefs", "path", cfg.TracefsPath)
	return nil
}

// checkLayouts compares the fields the programs read with this kernel's
// format files, and tells whether tcp:tcp_retransmit_skb has the "err"
// field (Linux 6.13+) where tcp.c reads it, so that failed attempts are
// left out.
func checkLayouts(tracefs string, countBytes bool) (retransmitHasErr bool, err error) {
	formats := make(map[string][]byte)
	read := func(group, event string) ([]byte, error) {
		path := filepath.Join(tracefs, "events", group, event, "format")
		if f, ok := formats[path]; ok {
			return f, nil
		}
		f, err := os.ReadFile(path)
		if err != nil {
			return nil, unavailable("read %s: %v", path, err)
		}
		formats[path] = f
		return f, nil
	}
	for _, l := range layouts {
		if l.event == sendLength.name && !countBytes {
			continue
		}
		f, err := read(l.group, l.event)
		if err != nil {
			return false, err
		}
		if err := l.check(f); err != nil {
			return false, unavailable("%v", err)
		}
	}
	f, err := read(retransmitErr.group, retransmitErr.event)
	if err != nil {
		return false, err
	}
	return retransmitErr.check(f) == nil, nil
}

func (p *Probes) load(cfg Config, retransHasErr bool) error {
	sched, err := loadSched()
	if err != nil {
		return unavailable("parse embedded sched object: %v", err)
	}
	tcp, err := loadTcp()
	if err != nil {
		return unavailable("parse embedded tcp object: %v", err)
	}
	tcp.Maps[tcpMapTcpFlows].MaxEntries = uint32(cfg.MaxFlows)
	tcp.Maps[tcpMapTcpSocks].MaxEntries = uint32(4 * cfg.MaxFlows)
	var flag uint32
	if retransHasErr {
		flag = 1
	}
	if err := tcp.Variables[tcpVarRetransHasErr].Set(flag); err != nil {
		return unavailable("set retrans_has_err: %v", err)
	}
	if err := sched.LoadAndAssign(&p.sched, nil); err != nil {
		return loadError("sched", err, p.log)
	}
	if err := tcp.LoadAndAssign(&p.tcp, nil); err != nil {
		return loadError("tcp", err, p.log)
	}
	return nil
}

// loadError names why the kernel refused an object.
func loadError(object string, err error, log *slog.Logger) error {
	var ve *ebpf.VerifierError
	switch {
	case errors.As(err, &ve):
		log.Debug("eBPF verifier log", "object", object, "log", fmt.Sprintf("%+v", ve))
		return unavailable("the verifier refused %s.c: %v", object, err)
	case errors.Is(err, unix.EPERM), errors.Is(err, os.ErrPermission):
		return unavailable("load %s.c: permission denied (needs root or CAP_BPF+CAP_PERFMON; a seccomp or LSM policy may forbid bpf()): %v", object, err)
	case errors.Is(err, ebpf.ErrNotSupported):
		return unavailable("load %s.c: kernel lacks a needed feature: %v", object, err)
	default:
		return unavailable("load %s.c: %v", object, err)
	}
}

func (p *Probes) attach(countBytes bool) error {
	progs := []*ebpf.Program{
		p.sched.SchedWakeup, p.sched.SchedWakeupNew, p.sched.SchedSwitch,
		p.tcp.TcpRetransmitSkb, p.tcp.InetSockSetState,
	}
	tps := requiredTracepoints[:]
	if countBytes {
		progs = append(progs, p.tcp.SockSendLength)
		tps = append(tps, sendLength)
	}
	for i, tp := range tps {
		l, err := link.Tracepoint(tp.group, tp.name, progs[i], nil)
		if err != nil {
			return unavailable("attach tracepoint %s: %v", tp, err)
		}
		p.links = append(p.links, l)
	}
	return nil
}

// closeAll detaches the programs and frees the maps. Detaching a
// tracepoint waits for an RCU grace period (tens of milliseconds), so the
// links are closed in parallel, each by a goroutine joined before return.
func (p *Probes) closeAll() error {
	errs := make([]error, len(p.links), len(p.links)+2)
	var wg sync.WaitGroup
	for i, l := range p.links {
		wg.Go(func() { errs[i] = l.Close() })
	}
	wg.Wait()
	p.links = nil
	errs = append(errs, p.sched.Close(), p.tcp.Close())
	return errors.Join(errs...)
}

// Close detaches every program and frees the maps. Later calls return nil;
// Snapshot then returns ErrClosed.
func (p *Probes) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if err := p.closeAll(); err != nil {
		return fmt.Errorf("bpf: close: %w", err)
	}
	return nil
}

// Snapshot reads the counters (cumulative since Load), summing the per-CPU
// values.
func (p *Probes) Snapshot() (Snapshot, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return Snapshot{}, ErrClosed
	}
	var s Snapshot
	var err error
	if s.RunQueue, err = p.runQueue(); err != nil {
		return Snapshot{}, fmt.Errorf("bpf: read run-queue histogram: %w", err)
	}
	if s.CgroupCPU, err = p.cgroupCPU(); err != nil {
		return Snapshot{}, fmt.Errorf("bpf: read cgroup CPU time: %w", err)
	}
	if s.Retransmits, err = p.retransmits(); err != nil {
		return Snapshot{}, fmt.Errorf("bpf: read retransmits: %w", err)
	}
	if s.Flows, err = p.flows(); err != nil {
		return Snapshot{}, fmt.Errorf("bpf: read flows: %w", err)
	}
	return s, nil
}

func (p *Probes) runQueue() (Histogram, error) {
	var perCPU []schedRunqHist
	if err := p.sched.RunqLatency.Lookup(uint32(0), &perCPU); err != nil {
		return Histogram{}, err
	}
	var h Histogram
	for _, c := range perCPU {
		for i, n := range c.Slots {
			h.Buckets[i] += n
		}
	}
	return h, nil
}

func (p *Probes) retransmits() (uint64, error) {
	var perCPU []uint64
	if err := p.tcp.TcpRetransmits.Lookup(uint32(0), &perCPU); err != nil {
		return 0, err
	}
	var n uint64
	for _, c := range perCPU {
		n += c
	}
	return n, nil
}

// batchSize is how many entries one BPF_MAP_LOOKUP_BATCH call reads; it
// must exceed the longest hash bucket (ENOSPC otherwise), which is tiny.
const batchSize = 256

func (p *Probes) cgroupCPU() (map[uint64]time.Duration, error) {
	out := make(map[uint64]time.Duration)
	m := p.sched.CgroupCpuNs
	keys := make([]uint64, batchSize)
	vals := make([]uint64, batchSize*p.ncpu)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
		for i := range n {
			var ns uint64
			for _, v := range vals[i*p.ncpu : (i+1)*p.ncpu] {
				ns += v
			}
			out[keys[i]] = time.Duration(ns) // one entry per cgroup: a key seen twice is not counted twice
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return out, nil
		}
		if errors.Is(err, ebpf.ErrNotSupported) {
			return p.cgroupCPUIterate()
		}
		if err != nil {
			return nil, err
		}
	}
}

// cgroupCPUIterate is cgroupCPU for kernels without batch operations
// (before 5.6): one lookup per entry.
func (p *Probes) cgroupCPUIterate() (map[uint64]time.Duration, error) {
	out := make(map[uint64]time.Duration)
	var id uint64
	var perCPU []uint64
	it := p.sched.CgroupCpuNs.Iterate()
	for it.Next(&id, &perCPU) {
		var ns uint64
		for _, v := range perCPU {
			ns += v
		}
		out[id] = time.Duration(ns)
	}
	return out, it.Err()
}

func (p *Probes) flows() ([]Flow, error) {
	m := p.tcp.TcpFlows
	keys := make([]tcpFlowKey, batchSize)
	vals := make([]tcpFlowValue, batchSize)
	var raw []Flow
	add := func(k tcpFlowKey, v tcpFlowValue) {
		if f, ok := flowFrom(k.Src, k.Dst, k.Family, k.Dport, v.Bytes, v.Conns); ok {
			raw = append(raw, f)
		}
	}
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
		for i := range n {
			add(keys[i], vals[i])
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		}
		if errors.Is(err, ebpf.ErrNotSupported) {
			raw = raw[:0]
			var k tcpFlowKey
			var v tcpFlowValue
			it := m.Iterate()
			for it.Next(&k, &v) {
				add(k, v)
			}
			if err := it.Err(); err != nil {
				return nil, err
			}
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return mergeFlows(raw), nil
}
