// Package sim is the heterogeneous edge-cluster simulator every scheduling
// policy of edgesched is trained and judged in.
//
// A Cluster (nodes with CPU, memory, GPUs of a model with per-device
// milli-GPU sharing, architecture, zone, labels, taints, failure rate and
// power; zones with carbon-intensity curves and round-trip times) and a
// Workload (pods with requests, GPU share and accepted models, QoS,
// priority, times, service, and the services' call graph) compile into an
// immutable Env. Run evaluates one Policy on an Env in one of two modes:
//
//   - Replay: pods arrive and leave at their trace times; pods that fit
//     nowhere wait and are retried when capacity frees up.
//   - Inflate: the FGD paper's method: pods are sampled from the workload
//     (seeded) and placed one by one until the arrived demand reaches a
//     target share of capacity, recording the share of GPUs left
//     unallocated at every step.
//
// Each pod is filtered (hard feasibility: CPU, memory, GPU count and share,
// GPU model, architecture, node selector, taints) and the policy scores the
// feasible nodes; the highest score wins, ties broken with the run's seeded
// random stream. Measures (see Measures) cover allocation, failures,
// fragmentation, utilisation, a latency proxy, cross-zone traffic, carbon
// and decision time. The baselines live in sim/baseline, inputs in
// sim/openb and sim/scenario, and reports and plots in sim/report.
//
// Use is not requests: State.Telemetry(n) gives what node n measures now
// (the edge agent's CPU, memory, load, run-queue p99 and retransmits, and
// its network), from the pods' usage, load profiles, interference and
// network and the zone uplink's loss, through the model of sim/nodeload;
// the latency proxy (State.LatencyProxy) uses the same terms. In replay,
// scenarios with disruptions fail nodes (their pods are evicted and
// rescheduled) and flap zone uplinks (sim/disrupt). Without any of this
// (Env.Dynamic false) every measure is computed as before it existed.
//
// Concurrency: an Env is read-only and may be shared by concurrent runs; a
// State and a Policy belong to one run. Compare runs policies and seeds on a
// bounded pool of goroutines it owns.
//
// Determinism: a run is a pure function of the Env, the policy and the
// RunConfig (its Seed feeds separate random streams for sampling,
// tie-breaking, the policy and disruptions, and seeds the load profiles'
// bursts), except for the measured decision latency.
package sim
