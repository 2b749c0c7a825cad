// Package memlimit sets the Go runtime's soft memory limit from the
// memory limit of the container a program runs in, with headroom.
//
// Kubernetes can hand a container its memory limit in bytes through the
// downward API (resourceFieldRef limits.memory), but not a fraction of
// it, and a Go heap limit equal to the container's limit leaves nothing
// for what the runtime does not count against it (goroutine stacks
// beyond the heap, eBPF maps, page cache charged to the cgroup): the
// kernel's OOM killer would strike before the garbage collector works
// harder. So the chart puts the limit in EDGESCHED_MEMORY_LIMIT and the
// program calls Apply, which sets the runtime's limit to a fraction of it
// (DefaultFraction) — unless GOMEMLIMIT is set, which always wins.
//
// Apply changes process-wide runtime state (debug.SetMemoryLimit): call
// it once, from main's goroutine, before starting work.
package memlimit
