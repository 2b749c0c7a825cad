//go:build ignore

// SPDX-License-Identifier: (MIT OR GPL-2.0-only)
//
// sched.c: scheduler telemetry for the edge agent.
//
//   - run-queue latency: the time from a task becoming runnable
//     (sched:sched_wakeup, sched:sched_wakeup_new, or being preempted while
//     still runnable in sched:sched_switch) until it is switched in
//     (sched:sched_switch), as a log2 histogram of microseconds;
//   - per-cgroup CPU time: at every sched:sched_switch the time the leaving
//     task spent on this CPU since the previous switch is added to its cgroup
//     (cgroup v2 id, bpf_get_current_cgroup_id: the tracepoint fires while the
//     leaving task is still current).
//
// Classic tracepoints: the context structs below are written from
// /sys/kernel/tracing/events/sched/{sched_switch,sched_wakeup}/format, whose
// layout has been stable since Linux 4.x. Counters live in per-CPU maps, so
// the programs never contend; user space sums the CPUs.
#include "bpf_defs.h"

#define NUM_BUCKETS 32     // must equal bpf.NumBuckets in Go
#define MAX_QUEUED 16384   // tasks waiting for a CPU, tracked at once
#define MAX_CGROUPS 8192   // cgroups accumulated at once (LRU)

// TASK_REPORT bits of prev_state; zero means the leaving task is still
// runnable (it was preempted or yielded: the kernel reports preemption with
// the extra bit TASK_REPORT_MAX, 0x100, above this mask).
#define TASK_STATE_MASK 0xff

struct trace_common {
	__u16 type;
	__u8 flags;
	__u8 preempt_count;
	__s32 pid;
};

// sched:sched_wakeup and sched:sched_wakeup_new share this layout.
struct sched_wakeup_args {
	struct trace_common common;
	char comm[16];
	__s32 pid;
	__s32 prio;
	__s32 target_cpu;
};

struct sched_switch_args {
	struct trace_common common;
	char prev_comm[16];
	__s32 prev_pid;
	__s32 prev_prio;
	__s64 prev_state;
	char next_comm[16];
	__s32 next_pid;
	__s32 next_prio;
};

struct runq_hist {
	__u64 slots[NUM_BUCKETS];
};

// pid -> time it became runnable (ns, CLOCK_MONOTONIC). A plain hash (an
// entry lives from wakeup to switch-in, so it only fills with 16384 tasks
// runnable at once; then new ones are not measured): cheaper to update and
// delete than an LRU, which matters at every context switch.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_QUEUED);
	__type(key, __u32);
	__type(value, __u64);
} runq_enqueued SEC(".maps");

// One histogram per CPU.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct runq_hist);
} runq_latency SEC(".maps");

// Per CPU: time of the last context switch (0 until the first one seen).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} oncpu_since SEC(".maps");

// cgroup v2 id -> on-CPU nanoseconds, per CPU.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, MAX_CGROUPS);
	__type(key, __u64);
	__type(value, __u64);
} cgroup_cpu_ns SEC(".maps");

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

static __always_inline void mark_runnable(__s32 pid)
{
	__u32 key = pid;
	__u64 now;

	if (pid <= 0) // the idle tasks never wait in a run queue
		return;
	now = bpf_ktime_get_ns();
	bpf_map_update_elem(&runq_enqueued, &key, &now, BPF_ANY);
}

SEC("tracepoint/sched/sched_wakeup")
int sched_wakeup(struct sched_wakeup_args *ctx)
{
	mark_runnable(ctx->pid);
	return 0;
}

SEC("tracepoint/sched/sched_wakeup_new")
int sched_wakeup_new(struct sched_wakeup_args *ctx)
{
	mark_runnable(ctx->pid);
	return 0;
}

static __always_inline void account_cgroup(__u64 delta)
{
	__u64 cgid = bpf_get_current_cgroup_id();
	__u64 *acc;

	acc = bpf_map_lookup_elem(&cgroup_cpu_ns, &cgid);
	if (acc) {
		*acc += delta; // per-CPU value: no other writer
		return;
	}
	if (bpf_map_update_elem(&cgroup_cpu_ns, &cgid, &delta, BPF_NOEXIST) == 0)
		return;
	// Another CPU created the entry in between: add to ours.
	acc = bpf_map_lookup_elem(&cgroup_cpu_ns, &cgid);
	if (acc)
		*acc += delta;
}

SEC("tracepoint/sched/sched_switch")
int sched_switch(struct sched_switch_args *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 zero = 0;
	__u32 pid;
	__u64 *since, *enq, delta, us;
	__u32 slot;
	struct runq_hist *hist;

	// CPU time of the leaving task, charged to its cgroup. The idle task
	// (pid 0) is not work: its time is skipped.
	since = bpf_map_lookup_elem(&oncpu_since, &zero);
	if (since) {
		if (*since != 0 && ctx->prev_pid != 0 && now > *since)
			account_cgroup(now - *since);
		*since = now;
	}

	// A task leaving the CPU while still runnable goes back to a run queue.
	if ((ctx->prev_state & TASK_STATE_MASK) == 0)
		mark_runnable(ctx->prev_pid);

	pid = ctx->next_pid;
	if (ctx->next_pid <= 0)
		return 0;
	enq = bpf_map_lookup_elem(&runq_enqueued, &pid);
	if (!enq)
		return 0; // became runnable before the programs were attached
	delta = now > *enq ? now - *enq : 0;
	bpf_map_delete_elem(&runq_enqueued, &pid);

	us = delta / 1000;
	slot = us == 0 ? 0 : log2_u64(us);
	if (slot >= NUM_BUCKETS)
		slot = NUM_BUCKETS - 1;
	hist = bpf_map_lookup_elem(&runq_latency, &zero);
	if (hist)
		hist->slots[slot]++;
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
