// Package sim is the heterogeneous edge-cluster simulator every scheduling
// policy of edgesched is trained and judged in: its model of a cluster and
// the state a run changes. The run engine that evaluates policies on it is
// sim/engine.
//
// A Cluster (nodes with CPU, memory, GPUs of a model with per-device
// milli-GPU sharing, architecture, zone, labels, taints, failure rate and
// power; zones with carbon-intensity curves and round-trip times) and a
// Workload (pods with requests, GPU share and accepted models, QoS,
// priority, times, service, and the services' call graph) compile into an
// immutable Env. A State is the cluster during one run: pods added, bound
// and unbound, with the running totals the measures need (allocation,
// fragmentation, per-zone service replicas, power by carbon zone) and
// CheckInvariants to audit them.
//
// A Policy scores the feasible nodes of a pod. State.Feasible is the hard
// filter (CPU, memory, GPU count and share, GPU model, architecture, node
// selector, taints); sim/engine asks the policy to score what passes and
// binds the pod to the highest score, in replay or inflate mode, and
// records the measures (sim/engine's Measures). The baselines live in
// sim/baseline, inputs in sim/openb and sim/scenario, and reports and plots
// in sim/report.
//
// Use is not requests: State.Telemetry(n) gives what node n measures now
// (the edge agent's CPU, memory, load, run-queue p99 and retransmits, and
// its network), from the pods' usage, load profiles, interference and
// network, the node's background load (work outside Kubernetes,
// NodeSpec.Background) and the zone uplink's loss, through the model of
// sim/nodeload;
// the latency proxy (State.LatencyProxy, NodeLatency) uses the same terms.
// Disruptions (sim/disrupt) fail nodes (State.SetDown) and flap zone
// uplinks (State.SetFlap); the engine applies them in replay. Without any
// of this (Env.Dynamic false) every measure is computed as before it
// existed.
//
// Concurrency: an Env is read-only and may be shared by concurrent runs; a
// State and a Policy belong to one run.
//
// Determinism: everything here is a pure function of its inputs; a State's
// load-profile bursts are seeded by State.NoiseSeed, which the engine sets
// from the run's seed.
package sim
