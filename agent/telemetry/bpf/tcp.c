//go:build ignore

// SPDX-License-Identifier: (MIT OR GPL-2.0-only)
//
// tcp.c: TCP telemetry for the edge agent.
//
//   - retransmissions: tcp:tcp_retransmit_skb events (segments the kernel
//     retransmitted, SYNs included; attempts that failed are skipped where
//     the event reports them), one per-CPU counter;
//   - flows: TCP connections and payload bytes, keyed by
//     (client address, server address, server port), the edges of the
//     service-dependency graph. sock:inet_sock_set_state tells when a socket
//     becomes ESTABLISHED and which side opened it: SYN_SENT -> ESTABLISHED is
//     the client (active open: one connection counted), SYN_RECV ->
//     ESTABLISHED the server (passive open: no count, so a connection whose
//     two ends are on one node counts once). Either way the socket is
//     remembered with its flow key until it reaches CLOSE, and
//     sock:sock_send_length (Linux 6.3+) adds the bytes each end sends:
//     every payload byte is counted once, by the node that sends it.
//
// All three are classic tracepoints, so neither kprobes, fentry nor kernel
// BTF are needed. The context structs are written from
// /sys/kernel/tracing/events/{tcp/tcp_retransmit_skb,sock/inet_sock_set_state,
// sock/sock_send_length}/format (ports there are in host byte order).
#include "bpf_defs.h"

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6

#define TCP_ESTABLISHED 1
#define TCP_SYN_SENT 2
#define TCP_SYN_RECV 3
#define TCP_CLOSE 7

// Sizes; the loader overrides max_entries of flows (Config.MaxFlows) and
// tcp_socks (4 x MaxFlows) before loading.
#define DEFAULT_MAX_FLOWS 4096
#define DEFAULT_MAX_SOCKS 16384

// Set by the loader to 1 when this kernel's tcp_retransmit_skb event has
// the "err" field (offset 76, Linux 6.13+): failed attempts are then not
// counted. Older kernels only report attempts that were sent.
volatile const __u32 retrans_has_err = 0;

struct trace_common {
	__u16 type;
	__u8 flags;
	__u8 preempt_count;
	__s32 pid;
};

struct tcp_retransmit_skb_args {
	struct trace_common common;
	__u64 skbaddr;
	__u64 skaddr;
	__s32 state;
	__u16 sport;
	__u16 dport;
	__u16 family;
	__u8 saddr[4];
	__u8 daddr[4];
	__u8 saddr_v6[16];
	__u8 daddr_v6[16];
	__s32 err; // only when retrans_has_err
};
_Static_assert(__builtin_offsetof(struct tcp_retransmit_skb_args, saddr_v6) == 42, "tcp_retransmit_skb layout");
_Static_assert(__builtin_offsetof(struct tcp_retransmit_skb_args, err) == 76, "tcp_retransmit_skb layout");

struct inet_sock_set_state_args {
	struct trace_common common;
	__u64 skaddr;
	__s32 oldstate;
	__s32 newstate;
	__u16 sport;
	__u16 dport;
	__u16 family;
	__u16 protocol;
	__u8 saddr[4];
	__u8 daddr[4];
	__u8 saddr_v6[16];
	__u8 daddr_v6[16];
};
_Static_assert(__builtin_offsetof(struct inet_sock_set_state_args, saddr) == 32, "inet_sock_set_state layout");
_Static_assert(__builtin_offsetof(struct inet_sock_set_state_args, daddr_v6) == 56, "inet_sock_set_state layout");

struct sock_send_length_args {
	struct trace_common common;
	__u64 sk;
	__u16 family;
	__u16 protocol;
	__s32 ret;
	__s32 flags;
};
_Static_assert(__builtin_offsetof(struct sock_send_length_args, ret) == 20, "sock_send_length layout");

// IPv4 addresses use the first 4 bytes of src/dst, the rest is zero.
struct flow_key {
	__u8 src[16];   // client
	__u8 dst[16];   // server
	__u16 dport;    // server port, host byte order
	__u16 family;   // AF_INET or AF_INET6
	__u32 pad;
};

struct flow_value {
	__u64 bytes; // payload bytes sent by either end on this node
	__u64 conns; // connections opened from this node (active opens)
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} tcp_retransmits SEC(".maps");

// socket address -> its flow, while the socket is open.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, DEFAULT_MAX_SOCKS);
	__type(key, __u64);
	__type(value, struct flow_key);
} tcp_socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, DEFAULT_MAX_FLOWS);
	__type(key, struct flow_key);
	__type(value, struct flow_value);
} tcp_flows SEC(".maps");

SEC("tracepoint/tcp/tcp_retransmit_skb")
int tcp_retransmit_skb(struct tcp_retransmit_skb_args *ctx)
{
	__u32 zero = 0;
	__u64 *n;

	if (retrans_has_err && ctx->err != 0)
		return 0;
	n = bpf_map_lookup_elem(&tcp_retransmits, &zero);
	if (n)
		*n += 1;
	return 0;
}

static __always_inline struct flow_value *flow_get(struct flow_key *key)
{
	struct flow_value zero = {};
	struct flow_value *v;

	v = bpf_map_lookup_elem(&tcp_flows, key);
	if (v)
		return v;
	// NOEXIST: when another CPU wins the race, use its entry.
	bpf_map_update_elem(&tcp_flows, key, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&tcp_flows, key);
}

SEC("tracepoint/sock/inet_sock_set_state")
int inet_sock_set_state(struct inet_sock_set_state_args *ctx)
{
	struct flow_key key = {};
	struct flow_value *v;
	__u64 sk = ctx->skaddr;
	__u16 sport = ctx->sport, dport = ctx->dport;
	int active;

	if (ctx->protocol != IPPROTO_TCP)
		return 0;
	if (ctx->newstate == TCP_CLOSE) {
		bpf_map_delete_elem(&tcp_socks, &sk);
		return 0;
	}
	if (ctx->newstate != TCP_ESTABLISHED)
		return 0;
	if (ctx->oldstate == TCP_SYN_SENT)
		active = 1;
	else if (ctx->oldstate == TCP_SYN_RECV)
		active = 0;
	else
		return 0;

	// The event's saddr/sport are this socket's local end. Copy with
	// constant offsets first: the verifier refuses moved context pointers.
	__u8 local[16] = {}, remote[16] = {};
	if (ctx->family == AF_INET) {
		__builtin_memcpy(local, ctx->saddr, 4);
		__builtin_memcpy(remote, ctx->daddr, 4);
	} else if (ctx->family == AF_INET6) {
		__builtin_memcpy(local, ctx->saddr_v6, 16);
		__builtin_memcpy(remote, ctx->daddr_v6, 16);
	} else {
		return 0;
	}
	key.family = ctx->family;
	if (active) {
		__builtin_memcpy(key.src, local, 16);
		__builtin_memcpy(key.dst, remote, 16);
	} else {
		__builtin_memcpy(key.src, remote, 16);
		__builtin_memcpy(key.dst, local, 16);
	}
	key.dport = active ? dport : sport;

	bpf_map_update_elem(&tcp_socks, &sk, &key, BPF_ANY);
	v = flow_get(&key);
	if (v && active)
		__sync_fetch_and_add(&v->conns, 1);
	return 0;
}

// Bytes each end sends: sock:sock_send_length fires in sock_sendmsg for
// every socket send (write, send*; splice and sendfile too since Linux
// 6.5), with the count sent or a negative errno.
SEC("tracepoint/sock/sock_send_length")
int sock_send_length(struct sock_send_length_args *ctx)
{
	__u64 sk = ctx->sk;
	__s32 ret = ctx->ret;
	struct flow_key *key;
	struct flow_value *v;

	if (ctx->protocol != IPPROTO_TCP || ret <= 0)
		return 0;
	key = bpf_map_lookup_elem(&tcp_socks, &sk);
	if (!key)
		return 0; // not an established socket we saw opening
	v = flow_get(key);
	if (v)
		__sync_fetch_and_add(&v->bytes, (__u64)ret);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
