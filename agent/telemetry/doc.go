// Package telemetry is the edge agent's node telemetry and the wire format
// it shares with the scheduler plugin.
//
// Every edge-agent (one per node) samples its node over a window and
// writes a compact, timestamped Summary to its own Node object as the
// annotation AnnotationKey ("edgesched.io/telemetry"), at a bounded rate
// (at most one update per window, by default every 10 s; agents should
// skip an update when nothing moved by more than their rounding and the
// previous one is still well within the plugin's staleness bound, but must
// refresh it before that bound). The scheduler plugin (edge-plugin) reads
// it: a fresh summary's CPU utilisation becomes the node's measured load;
// a summary that is missing, malformed (Decode fails) or older than the
// plugin's staleness bound (Fresh is false) is ignored and the plugin falls
// back to its request-based usage model for that node, and says so.
//
// The format (version 1, JSON, at most MaxEncodedSize bytes):
//
//	{"v":1,"ts":"2026-07-01T12:00:00Z","window":"10s","cpu":0.4213,"mem":0.6,
//	 "load1":1.52,"runqP99Us":850,"retransPerS":0.2}
//
// See Summary for every field and its unit. Decode is strict: unknown or
// repeated fields, missing required fields, values out of range, another
// version, trailing data and oversized input are refused with one of the
// sentinel errors (all of which wrap ErrInvalid).
//
// The collectors live in subpackages (bpf: eBPF tracepoints through
// cilium/ebpf; procfs: /proc and cgroup files) and the annotation writer
// in package agent. This package stays dependency-light (standard library only) because the scheduler links it:
// it must never import the kube-scheduler, nor client-go.
package telemetry
