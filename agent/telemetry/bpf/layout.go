package bpf

import "fmt"

// fieldLayout is one tracepoint field the programs read, where sched.c and
// tcp.c expect it (their context structs; tcp.c also checks these offsets
// with _Static_assert).
type fieldLayout struct {
	group, event string
	decl         string // as in the format file: "pid_t pid"
	offset, size int
}

// layouts lists every field the programs read. Load compares them with the
// running kernel's format files and refuses to attach to an event whose
// layout differs (the programs would read the wrong bytes).
var layouts = []fieldLayout{
	{"sched", "sched_wakeup", "pid_t pid", 24, 4},
	{"sched", "sched_wakeup_new", "pid_t pid", 24, 4},
	{"sched", "sched_switch", "pid_t prev_pid", 24, 4},
	{"sched", "sched_switch", "long prev_state", 32, 8},
	{"sched", "sched_switch", "pid_t next_pid", 56, 4},
	{"sock", "inet_sock_set_state", "const void * skaddr", 8, 8},
	{"sock", "inet_sock_set_state", "int oldstate", 16, 4},
	{"sock", "inet_sock_set_state", "int newstate", 20, 4},
	{"sock", "inet_sock_set_state", "__u16 sport", 24, 2},
	{"sock", "inet_sock_set_state", "__u16 dport", 26, 2},
	{"sock", "inet_sock_set_state", "__u16 family", 28, 2},
	{"sock", "inet_sock_set_state", "__u16 protocol", 30, 2},
	{"sock", "inet_sock_set_state", "__u8 saddr[4]", 32, 4},
	{"sock", "inet_sock_set_state", "__u8 daddr[4]", 36, 4},
	{"sock", "inet_sock_set_state", "__u8 saddr_v6[16]", 40, 16},
	{"sock", "inet_sock_set_state", "__u8 daddr_v6[16]", 56, 16},
	{"sock", "sock_send_length", "void * sk", 8, 8},
	{"sock", "sock_send_length", "__u16 protocol", 18, 2},
	{"sock", "sock_send_length", "int ret", 20, 4},
}

// retransmitErr is the optional "err" field of tcp:tcp_retransmit_skb
// (Linux 6.13+), read only when present at this place.
var retransmitErr = fieldLayout{"tcp", "tcp_retransmit_skb", "int err", 76, 4}

// check compares l with an event's format file.
func (l fieldLayout) check(format []byte) error {
	off, size, ok := formatField(format, l.decl)
	if !ok {
		return fmt.Errorf("tracepoint %s:%s has no field %q", l.group, l.event, l.decl)
	}
	if off != l.offset || size != l.size {
		return fmt.Errorf("tracepoint %s:%s field %q is at offset %d size %d, the programs expect offset %d size %d",
			l.group, l.event, l.decl, off, size, l.offset, l.size)
	}
	return nil
}
