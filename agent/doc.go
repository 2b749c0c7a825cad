// Package agent is the runtime of edge-agent, the process installed on
// every K3s node. It samples the node, summarises the samples into the
// telemetry annotation the scheduler plugin reads, and hosts the agent's
// other long-running parts.
//
// What an Agent does (see Config for every knob and its default):
//
//   - Samples every SampleInterval (1 s) the /proc collector
//     (agent/telemetry/procfs: CPU ticks, memory, load, PSI, network
//     devices, TCP counters, and optionally one cgroup's CPU and memory)
//     and, when Config.LoadProbes loads them, the eBPF probes
//     (agent/telemetry/bpf, through the small Probes interface): run-queue
//     latency histogram and TCP retransmits. When eBPF cannot be loaded,
//     or fails later, it logs one warning with the reason and continues on
//     /proc; the gauge edgesched_agent_telemetry_source says which.
//   - Keeps the samples of the last Window in a ring of at most
//     MaxRingSamples (4,096): Validate refuses a Window and SampleInterval
//     that would need more (Window/SampleInterval + 3), so the agent's
//     memory is bounded whatever the settings.
//   - Builds a kubefmt.TelemetrySummary over the last Window (10 s): CPU
//     utilisation and memory in use (of the host, or of Config.Proc.Cgroup
//     against its limits), the 1-minute load, the run-queue p99 from the
//     histogram's growth (eBPF only) and TCP retransmits per second (eBPF,
//     else /proc/net/snmp).
//   - Writes it to its Node's edgesched.io/telemetry annotation (a JSON
//     merge patch touching only that annotation) at most once per
//     AnnotateInterval (10 s): skipped when no measure moved beyond the
//     resolution the scheduler acts on (a percentage point of CPU or
//     memory, 0.1 of load or retransmits/s, 10 % of the p99) and the last
//     write is younger than StaleAfter/2 (1 min, half the plugin's 2 min
//     staleness bound), always rewritten once it is that old. Failed
//     writes are retried with capped, jittered exponential backoff
//     (internal/backoff) and counted.
//   - Serves Prometheus /metrics (its own registry: the sampled values,
//     the last summary, annotation writes, skips and failures, sampling
//     duration and errors, Go and process metrics) and /healthz, which
//     fails (503) when no sample succeeded for StallAfter.
//   - Runs Config.Components (the site leader, the trace recorder) under
//     its context: the first one to fail stops the agent with its error.
//
// Lifetimes and concurrency: New prepares an Agent without starting
// anything; Run (once) owns every goroutine it starts — the sampler, the
// annotator, the metrics server and one per component — each under a
// context derived from Run's, and returns only after all of them ended:
// nil when its context was cancelled (graceful stop), or the first error.
// The eBPF probes are loaded at the start of Run and closed at its end.
// Handler and Healthy may be called from any goroutine.
//
// The agent binary must not link the kube-scheduler (this package imports
// client-go, never edge-plugin).
package agent
