// Package bpf is the edge agent's eBPF telemetry: small kernel programs,
// written in C beside this loader (sched.c, tcp.c) and compiled to the
// committed objects sched_bpfel.o and tcp_bpfel.o (bpf2go, see gen.go), that
// count on the node
//
//   - run-queue latency, a log2 histogram of the time from a task becoming
//     runnable (sched:sched_wakeup, sched:sched_wakeup_new, or preemption in
//     sched:sched_switch) to running (sched:sched_switch);
//   - on-CPU time per cgroup v2 id (sched:sched_switch);
//   - TCP retransmissions (tcp:tcp_retransmit_skb);
//   - TCP flows, keyed by (client, server, server port), with connections
//     opened (sock:inet_sock_set_state) and payload bytes sent
//     (sock:sock_send_length).
//
// Load checks the node, loads and attaches everything; Snapshot reads the
// cumulative counters (subtract two snapshots for a window); Close
// detaches. When the node cannot run them, Load's error wraps
// ErrUnavailable and names the reason, and the agent falls back to /proc.
//
// # Requirements and caveats
//
//   - Privileges: root, or CAP_BPF and CAP_PERFMON (Linux 5.8+; before
//     that CAP_SYS_ADMIN), in the effective set. The memlock rlimit is
//     raised (rlimit.RemoveMemlock) for kernels before 5.11 that charge
//     maps to it.
//   - tracefs at Config.TracefsPath: the tracepoints are found by name
//     there. A fresh machine may not mount it; with Config.MountTracefs
//     Load mounts it (and leaves it mounted).
//   - Kernel: Linux 4.16+ for the tracepoints, 5.6+ for reading maps in
//     batches (older kernels are read one entry at a time);
//     sock:sock_send_length needs Linux 6.3+, and without it flows are
//     still counted but their Bytes stay 0 (Load logs a warning once).
//     All programs are classic tracepoints with hand-written context
//     structs: no kprobes, no fentry and no kernel BTF are needed (on the
//     machines this was developed on, kprobes are compiled out and loading
//     fentry programs is refused with EPERM, while tracepoints work).
//   - Only little-endian Linux has programs (amd64, arm64, ...); elsewhere
//     Load returns ErrUnavailable.
//   - Bounded kernel memory: 16384 tasks waiting in run queues at once
//     (beyond that, new waits are not measured), and LRU maps for 8192
//     cgroups, Config.MaxFlows flows and 4 × MaxFlows open sockets: when
//     one is full its least recently used entry is evicted, and that
//     cgroup's or flow's cumulative count is lost.
//   - Overhead: a few hash-map operations per context switch and per TCP
//     send; docs/agent-telemetry.md has measured figures.
//
// # Concurrency and lifetimes
//
// A Probes is safe for concurrent use: Snapshot may run in several
// goroutines and concurrently with Close. The programs stay attached until
// Close (or the process exits: the kernel detaches them when the last file
// descriptor closes). Counters start at zero at Load and are shared by the
// whole node: every process's tasks, cgroups and sockets are counted, not
// only the agent's. Snapshot allocates fresh maps and slices; the caller
// owns them.
package bpf
