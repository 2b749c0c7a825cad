//go:build (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm) && linux

package bpf

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// spinEnv makes the test binary a CPU spinner (see TestMain): its value is
// how much CPU time to burn, in GOMAXPROCS goroutines, however long that
// takes on a busy machine (at most spinWallCap).
const (
	spinEnv     = "EDGESCHED_BPF_TEST_SPIN"
	spinWallCap = 20 * time.Second
)

func TestMain(m *testing.M) {
	if v := os.Getenv(spinEnv); v != "" {
		target, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bad", spinEnv, err)
			os.Exit(2)
		}
		ctx, cancel := context.WithTimeout(context.Background(), spinWallCap)
		defer cancel()
		for ctx.Err() == nil && selfCPU() < target {
			spin(ctx, 10*time.Millisecond, runtime.GOMAXPROCS(0))
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// selfCPU is this process's user + system CPU time.
func selfCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// spin keeps n goroutines busy for d (wall clock) or until ctx ends.
func spin(ctx context.Context, d time.Duration, n int) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			x := uint64(1)
			for ctx.Err() == nil {
				for range 10000 {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
			_ = x
		})
	}
	wg.Wait()
}

// loadProbes loads the programs for a test, or skips it when this process
// lacks the privileges (the only reason a test may skip: on a privileged
// run every other failure to load is a test failure).
func loadProbes(t testing.TB, cfg Config) *Probes {
	t.Helper()
	if err := checkPrivileges(); err != nil {
		t.Skipf("skipping: needs root: %v", err)
	}
	cfg.MountTracefs = true
	p, err := Load(cfg, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatalf("Load as a privileged process: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func snapshot(t testing.TB, p *Probes) Snapshot {
	t.Helper()
	s, err := p.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return s
}

// poll calls cond until it returns nil or the deadline passes, and fails
// with cond's last error.
func poll(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLoadAttachesEveryProgram(t *testing.T) {
	p := loadProbes(t, Config{})
	want := len(requiredTracepoints)
	if tracepointExists(DefaultTracefsPath, sendLength) {
		want++
	} else {
		t.Logf("%s missing on this kernel: flow bytes are not counted", sendLength)
	}
	if len(p.links) != want {
		t.Fatalf("%d programs attached, want %d", len(p.links), want)
	}
	for _, l := range p.links {
		info, err := l.Info()
		if err != nil {
			t.Fatalf("link info: %v", err)
		}
		prog, err := ebpf.NewProgramFromID(info.Program)
		if err != nil {
			t.Fatalf("program %d of link %d: %v", info.Program, info.ID, err)
		}
		pi, err := prog.Info()
		prog.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("link %d (%v) -> program %q (%v)", info.ID, info.Type, pi.Name, pi.Type)
		if pi.Type != ebpf.TracePoint {
			t.Errorf("program %q is a %v, want a tracepoint program", pi.Name, pi.Type)
		}
	}
	s := snapshot(t, p)
	t.Logf("right after Load: run queue %d, cgroups %d, retransmits %d, flows %d",
		s.RunQueue.Count(), len(s.CgroupCPU), s.Retransmits, len(s.Flows))
}

// threadTimeslices sums the "timeslices" (times a thread was switched in)
// of every thread of this process, /proc/self/task/*/schedstat.
func threadTimeslices(t *testing.T) uint64 {
	t.Helper()
	paths, err := filepath.Glob("/proc/self/task/*/schedstat")
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(b))
		if len(f) != 3 {
			t.Fatalf("%s: %q", p, b)
		}
		v, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		n += v
	}
	return n
}

func TestRunQueueLatency(t *testing.T) {
	p := loadProbes(t, Config{})
	before := snapshot(t, p)
	slicesBefore := threadTimeslices(t)

	// Twice as many busy threads as CPUs (half of them in a child
	// process, which has its own GOMAXPROCS and burns 500 ms of CPU):
	// runnable threads wait for one another, a scheduler slice
	// (milliseconds) at a time.
	ncpu := runtime.NumCPU()
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), spinEnv+"=500ms")
	child.Stderr = testWriter{t}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	spin(t.Context(), 500*time.Millisecond, ncpu)
	if err := child.Wait(); err != nil {
		t.Fatalf("spinner: %v", err)
	}

	after := snapshot(t, p)
	slicesAfter := threadTimeslices(t)
	d := after.RunQueue.Sub(before.RunQueue)
	ours := slicesAfter - slicesBefore
	t.Logf("run-queue latency over the window: %d switch-ins (this process's threads: %d), p50 %v, p90 %v, p99 %v, max bucket %v",
		d.Count(), ours, d.Quantile(0.5), d.Quantile(0.9), d.Quantile(0.99), d.Quantile(1))
	t.Logf("buckets: %v", d.Buckets)
	// Every switch-in of this process's threads was preceded by a wakeup
	// or preemption seen by the programs (all after Load), so the node-wide
	// count is at least this process's.
	if d.Count() < ours {
		t.Errorf("histogram grew by %d, fewer than this process's own %d switch-ins", d.Count(), ours)
	}
	// 2×CPUs busy threads for 0.5 s: some thread waited at least a
	// fraction of a slice (128 µs is the bottom of bucket 7).
	if d.Quantile(1) < 128*time.Microsecond {
		t.Errorf("longest wait %v, want >= 128µs with %d busy threads on %d CPUs", d.Quantile(1), 2*ncpu, ncpu)
	}
	if d.Quantile(0.5) > 10*time.Second {
		t.Errorf("median wait %v is implausible", d.Quantile(0.5))
	}
}

// cgroup2Mount finds the cgroup v2 hierarchy (/sys/fs/cgroup on
// unified systems, /sys/fs/cgroup/unified on hybrid ones).
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent maj:min root mountpoint options ... - fstype source opts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields := strings.Fields(pre)
		if !ok || len(fields) < 5 || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		return fields[4], nil
	}
	return "", errors.New("no cgroup2 mount in /proc/self/mountinfo")
}

func TestCgroupCPUTime(t *testing.T) {
	p := loadProbes(t, Config{})
	root, err := cgroup2Mount()
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	dir := filepath.Join(root, fmt.Sprintf("edgesched-bpf-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create a cgroup: %v", err)
	}
	t.Cleanup(func() {
		// The child has been reaped; its cgroup empties right after.
		deadline := time.Now().Add(5 * time.Second)
		for {
			err := unix.Rmdir(dir)
			if err == nil || time.Now().After(deadline) {
				if err != nil {
					t.Errorf("remove cgroup %s: %v", dir, err)
				}
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	cgid := st.Ino // a cgroup v2 id is its directory's inode number
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)

	// A child process born in the new cgroup (clone3 CLONE_INTO_CGROUP)
	// burns 300 ms of CPU; the kernel's own account of its CPU time
	// (rusage) is what the programs must have charged to that cgroup.
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), spinEnv+"=300ms")
	child.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	child.Stderr = testWriter{t}
	if err := child.Run(); err != nil {
		t.Fatalf("spinner in cgroup %d: %v", cgid, err)
	}
	want := child.ProcessState.UserTime() + child.ProcessState.SystemTime()
	if want < 300*time.Millisecond {
		t.Fatalf("the spinner used only %v of CPU (given %v)", want, spinWallCap)
	}
	// Within 10% + 20 ms: the programs count on-CPU wall time between
	// switches, which also holds interrupts served meanwhile.
	// The parent is woken before the child's last context switch, which
	// charges the child's final slice: wait until two reads agree.
	tol := want/10 + 20*time.Millisecond
	var got, prev time.Duration = 0, -1
	poll(t, 3*time.Second, func() error {
		got = snapshot(t, p).CgroupCPU[cgid]
		stable := got == prev
		prev = got
		if diff := got - want; diff < -tol || diff > tol {
			return fmt.Errorf("cgroup %d: %v of CPU counted, the kernel's rusage says %v (tolerance %v)", cgid, got, want, tol)
		}
		if !stable {
			return fmt.Errorf("cgroup %d: count still moving (%v)", cgid, got)
		}
		return nil
	})
	t.Logf("cgroup %d: counted %v on CPU, rusage of its only process %v (%.1f%% apart)",
		cgid, got, want, 100*float64(got-want)/float64(want))
}

// exchange opens conns connections from client to the listener, sends req
// bytes on each, reads the server's resp-byte answer, and closes.
func exchange(t *testing.T, ln net.Listener, dialer *net.Dialer, conns, req, resp int) {
	t.Helper()
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, 2*conns)
	wg.Go(func() {
		for range conns {
			c, err := ln.Accept()
			if err != nil {
				errs <- err
				return
			}
			wg.Go(func() {
				defer c.Close()
				n, err := io.Copy(io.Discard, c)
				if err == nil && n != int64(req) {
					err = fmt.Errorf("server read %d bytes, want %d", n, req)
				}
				if err == nil {
					_, err = c.Write(bytes.Repeat([]byte{'r'}, resp))
				}
				if err != nil {
					errs <- err
				}
			})
		}
	})
	for range conns {
		c, err := dialer.DialContext(ctx, "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(bytes.Repeat([]byte{'q'}, req)); err != nil {
			t.Fatal(err)
		}
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, c)
		if err != nil || n != int64(resp) {
			t.Fatalf("client read %d bytes (%v), want %d", n, err, resp)
		}
		c.Close()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func findFlow(s Snapshot, src, dst netip.Addr, port uint16) (Flow, bool) {
	for _, f := range s.Flows {
		if f.Src == src && f.Dst == dst && f.DstPort == port {
			return f, true
		}
	}
	return Flow{}, false
}

func TestLoopbackFlows(t *testing.T) {
	p := loadProbes(t, Config{})
	countsBytes := tracepointExists(DefaultTracefsPath, sendLength)
	tests := []struct {
		name, listen, client string
	}{
		{"ipv4", "127.0.0.1:0", "127.0.0.1"},
		// A second loopback source address: a distinct client.
		{"ipv4 second client", "127.0.0.1:0", "127.0.0.2"},
		{"ipv6", "[::1]:0", "::1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", tt.listen)
			if err != nil {
				if strings.Contains(tt.listen, "::1") {
					t.Skipf("skipping: no IPv6 loopback: %v", err)
				}
				t.Fatal(err)
			}
			defer ln.Close()
			src := netip.MustParseAddr(tt.client)
			dialer := &net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}
			srv := ln.Addr().(*net.TCPAddr).AddrPort()

			// 3 connections, each 100000 bytes up and 2500 down.
			const conns, req, resp = 3, 100000, 2500
			exchange(t, ln, dialer, conns, req, resp)

			// The flow client -> server:port: the three active opens are
			// counted once each (the server's passive opens are not), and
			// every byte once by its sender: 3 × (100000 + 2500) = 307500.
			wantBytes := uint64(conns * (req + resp))
			if !countsBytes {
				wantBytes = 0
			}
			var f Flow
			poll(t, 3*time.Second, func() error {
				var ok bool
				f, ok = findFlow(snapshot(t, p), src, srv.Addr(), srv.Port())
				if !ok {
					return fmt.Errorf("no flow %v -> %v", src, srv)
				}
				if f.Conns != conns || f.Bytes != wantBytes {
					return fmt.Errorf("flow %v -> %v: %d conns, %d bytes; want %d, %d", src, srv, f.Conns, f.Bytes, conns, wantBytes)
				}
				return nil
			})
			t.Logf("flow %+v", f)
		})
	}
}

// retransSegs reads the kernel's own count of retransmitted TCP segments
// (RetransSegs in /proc/net/snmp).
func retransSegs(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Tcp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "RetransSegs" && i < len(f) {
				v, err := strconv.ParseUint(f[i], 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
		}
	}
	t.Fatal("no Tcp: RetransSegs in /proc/net/snmp")
	return 0
}

// TestRetransmits provokes SYN retransmissions: a listener with backlog 0
// holds one unaccepted connection, so its full accept queue makes the
// kernel drop the next client's SYN, which the client retransmits after
// its initial RTO (1 s).
func TestRetransmits(t *testing.T) {
	p := loadProbes(t, Config{})
	lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(lfd)
	if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(lfd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(lfd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port)

	before := snapshot(t, p).Retransmits
	kernelBefore := retransSegs(t)
	first, err := net.Dial("tcp", addr) // fills the accept queue
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	dialed := make(chan error, 1)
	go func() {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if c != nil {
			c.Close()
		}
		dialed <- err
	}()
	var got uint64
	poll(t, 5*time.Second, func() error {
		got = snapshot(t, p).Retransmits - before
		if got == 0 {
			return errors.New("no retransmission counted after a dropped SYN")
		}
		return nil
	})
	kernel := retransSegs(t) - kernelBefore
	cancel()
	<-dialed
	t.Logf("retransmissions counted by tcp:tcp_retransmit_skb: %d; the kernel's RetransSegs grew by %d meanwhile", got, kernel)
	if kernel == 0 {
		t.Errorf("the kernel counted no retransmission, yet the programs counted %d", got)
	}
}

func TestCloseDetaches(t *testing.T) {
	p := loadProbes(t, Config{})
	var ids []ebpf.ProgramID
	for _, prog := range []*ebpf.Program{p.sched.SchedSwitch, p.tcp.InetSockSetState} {
		info, err := prog.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := info.ID()
		ids = append(ids, id)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := p.Snapshot(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Snapshot after Close = %v, want ErrClosed", err)
	}
	// Nothing holds the programs any more: the kernel frees them (after
	// an RCU grace period).
	for _, id := range ids {
		poll(t, 5*time.Second, func() error {
			prog, err := ebpf.NewProgramFromID(id)
			if err == nil {
				prog.Close()
				return fmt.Errorf("program %d still loaded after Close", id)
			}
			return nil
		})
	}
}

// TestSnapshotConcurrentWithClose runs Snapshots in goroutines while
// Close happens: each returns a snapshot or ErrClosed, never a crash.
func TestSnapshotConcurrentWithClose(t *testing.T) {
	p := loadProbes(t, Config{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				_, err := p.Snapshot()
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Snapshot: %v", err)
					return
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

func TestUnavailableReasons(t *testing.T) {
	if checkPrivileges() != nil {
		// Without privileges, Load says so before anything else.
		_, err := Load(DefaultConfig(), nil)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "not root") {
			t.Fatalf("Load without privileges = %v", err)
		}
		t.Skipf("skipping the rest: needs root: %v", err)
	}
	// Make sure the library has found the system's tracefs before a
	// second one is mounted below (it looks it up once per process).
	p := loadProbes(t, Config{})
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	empty := t.TempDir()
	_, err := Load(Config{TracefsPath: empty}, nil)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "tracefs not mounted at "+empty) {
		t.Fatalf("Load with no tracefs = %v, want ErrUnavailable naming tracefs", err)
	}
	t.Logf("no tracefs: %v", err)

	// With MountTracefs, Load mounts it there itself and works.
	p, err = Load(Config{TracefsPath: empty, MountTracefs: true}, nil)
	if err != nil {
		t.Fatalf("Load mounting tracefs at %s: %v", empty, err)
	}
	defer func() {
		if err := unix.Unmount(empty, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", empty, err)
		}
	}()
	p.Close()
	var st unix.Statfs_t
	if err := unix.Statfs(empty, &st); err != nil || st.Type != unix.TRACEFS_MAGIC {
		t.Fatalf("%s is not a tracefs after Load (%v)", empty, err)
	}
}

// TestVerifierRefusalReason: a program the verifier refuses (it reads
// R0 before writing it) is reported as such, wrapping ErrUnavailable.
func TestVerifierRefusalReason(t *testing.T) {
	if err := checkPrivileges(); err != nil {
		t.Skipf("skipping: needs root: %v", err)
	}
	spec := &ebpf.ProgramSpec{
		Name:         "bad",
		Type:         ebpf.TracePoint,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Return()},
	}
	prog, err := ebpf.NewProgram(spec)
	if err == nil {
		prog.Close()
		t.Fatal("the verifier accepted a program returning an unset R0")
	}
	got := loadError("bad", err, slog.New(slog.DiscardHandler))
	if !errors.Is(got, ErrUnavailable) || !strings.Contains(got.Error(), "the verifier refused bad.c") {
		t.Fatalf("loadError = %v", got)
	}
	t.Log(got)
}
