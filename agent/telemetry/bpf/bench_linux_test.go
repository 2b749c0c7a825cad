//go:build (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm) && linux

package bpf

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// BenchmarkSnapshot measures one Snapshot with the flow map holding
// b's flows: one per loopback client address 127.0.1.x-127.0.y.z.
func BenchmarkSnapshot(b *testing.B) {
	for _, flows := range []int{16, 1024} {
		b.Run(fmt.Sprintf("flows=%d", flows), func(b *testing.B) {
			p := loadProbes(b, Config{})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
			for i := range flows {
				src := netip.AddrFrom4([4]byte{127, 0, byte(1 + i/250), byte(1 + i%250)})
				d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}
				c, err := d.Dial("tcp", ln.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
			s := snapshot(b, p)
			if len(s.Flows) < flows {
				b.Fatalf("%d flows in the map, want >= %d", len(s.Flows), flows)
			}
			for b.Loop() {
				if s, err = p.Snapshot(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(s.Flows)), "flows")
			b.ReportMetric(float64(len(s.CgroupCPU)), "cgroups")
		})
	}
}

// BenchmarkLoad measures Load + Close: parsing the objects, the
// verifier, creating the maps, attaching the tracepoints.
func BenchmarkLoad(b *testing.B) {
	if err := checkPrivileges(); err != nil {
		b.Skipf("skipping: needs root: %v", err)
	}
	for b.Loop() {
		p, err := Load(Config{MountTracefs: true}, nil)
		if err != nil {
			b.Fatal(err)
		}
		p.Close()
	}
}

// BenchmarkLoopbackTCPOverhead measures what the attached programs cost a
// TCP-heavy workload: a 64-byte request/response ping-pong over one
// loopback connection (two sends, two wakeups and at least two context
// switches per op, the events the programs run on). cpu-ns/op is this
// process's CPU time (user + system, both ends are in it) per round trip;
// compare probes=off with probes=on.
func BenchmarkLoopbackTCPOverhead(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("probes=%v", map[bool]string{false: "off", true: "on"}[on]), func(b *testing.B) {
			var p *Probes
			if on {
				p = loadProbes(b, Config{})
				// The kernel times every program run while this is open.
				stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
				if err != nil {
					b.Fatalf("enable BPF run-time statistics: %v", err)
				}
				defer stats.Close()
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				buf := make([]byte, 64)
				for {
					if _, err := io.ReadFull(c, buf); err != nil {
						return
					}
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := make([]byte, 64)
			var cpu0 time.Duration
			var prog0 map[string]*ebpf.ProgramStats
			for b.Loop() {
				if cpu0 == 0 {
					cpu0 = selfCPU()
					prog0 = programStats(b, p)
				}
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(selfCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			if on {
				// Time spent in the programs themselves (all of the node's
				// events while the loop ran, the round trips' included).
				var total time.Duration
				for name, st := range programStats(b, p) {
					d := st.Runtime - prog0[name].Runtime
					runs := st.RunCount - prog0[name].RunCount
					total += d
					if runs > 0 {
						b.Logf("%-20s %9d runs, %6.0f ns/run", name, runs, float64(d)/float64(runs))
					}
				}
				b.ReportMetric(float64(total)/float64(b.N), "bpf-ns/op")
			}
		})
	}
}

// programStats reads the kernel's run-time statistics of every program
// (nil for nil p).
func programStats(b *testing.B, p *Probes) map[string]*ebpf.ProgramStats {
	if p == nil {
		return nil
	}
	out := make(map[string]*ebpf.ProgramStats)
	for name, prog := range map[string]*ebpf.Program{
		"sched_wakeup": p.sched.SchedWakeup, "sched_wakeup_new": p.sched.SchedWakeupNew,
		"sched_switch": p.sched.SchedSwitch, "tcp_retransmit_skb": p.tcp.TcpRetransmitSkb,
		"inet_sock_set_state": p.tcp.InetSockSetState, "sock_send_length": p.tcp.SockSendLength,
	} {
		st, err := prog.Stats()
		if err != nil {
			b.Fatalf("stats of %s: %v", name, err)
		}
		out[name] = st
	}
	return out
}
