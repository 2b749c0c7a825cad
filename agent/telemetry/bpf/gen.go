package bpf

// The eBPF objects (*_bpfel.o) and their Go bindings (*_bpfel.go) are
// generated from sched.c and tcp.c and committed, so building needs no
// clang. Regenerate with `make bpf-generate` (installs Debian's clang when
// missing) or `go generate ./agent/telemetry/bpf/` with clang on PATH.
// bpf2go is pinned in go.mod as a tool; -target bpfel covers every
// little-endian architecture (amd64, arm64, ...).

//go:generate go tool bpf2go -tags linux -target bpfel -cflags "-O2 -g -Wall -Werror" -type runq_hist sched sched.c
//go:generate go tool bpf2go -tags linux -target bpfel -cflags "-O2 -g -Wall -Werror" -type flow_key -type flow_value tcp tcp.c
