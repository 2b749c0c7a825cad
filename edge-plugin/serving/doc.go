// Package serving is edge-scheduler's serving core (serving.Core): it
// turns the scheduler's snapshot into the simulator's types (sim.Env,
// sim.State), so that the features and the int8 policy see exactly what
// they see in the simulator for the same cluster, and scores a pod's
// candidate nodes with the model in use through the policy code path the
// simulator runs (policy.Extractor, the model's decision rule), with one
// score cache. It also chooses a GPU pod's devices (FGD's device for a
// share, as in the simulator), evaluates the scheduling policy
// (PolicyCycle) and holds the measured node telemetry. The framework
// plugin (package edgeplugin) and the HTTP extender (package extender)
// drive it; it reads the framework's NodeInfo and knows no extension
// point, CycleState, Status or Handle.
//
// Concurrency and lifetime:
//   - One Core serves for the scheduler's lifetime. NodeGPUs (Filter) runs
//     on many goroutines at once; it only reads the NodeInfo and a
//     concurrency-safe cache of converted nodes keyed by the NodeInfo's
//     generation (immutable entries).
//   - The converter keeps one sim.State (with its Extractor) across cycles
//     and brings it up to date in Score, re-binding only the nodes whose
//     generation changed. State and Extractor are not safe for concurrent
//     use: every use happens under the converter's mutex (Score's feature
//     extraction and scoring, PickDevices, explain.Capture through
//     WithCurrent). PickDevices only reuses the State if no later cycle
//     changed it (an epoch check); otherwise it models the node alone. The
//     scheduler runs one scheduling cycle at a time, so the mutex is
//     uncontended in practice.
//   - A Cycle is read-only once Score returns, until Release returns its
//     per-node slices to the core's pool: nothing may read them after.
//   - The model sits behind the sources.ModelStore's atomic pointer; a
//     cycle loads it once and uses it throughout, even if a swap happens
//     meanwhile. Without a model every node scores 0 (neutral) and a
//     fallback is counted.
//   - A panic in conversion, features or model code is recovered: that
//     cycle scores 0 everywhere and panics_total and fallbacks_total count
//     it.
//   - Device reservations live in memory until the pod's annotation is in
//     the snapshot or 10 minutes pass; after a restart the annotations
//     (written at Bind) are the record. GPU pods without one get a
//     deterministic best-fit assignment.
//   - Node telemetry: a fresh edgesched.io/telemetry summary written by
//     the node's agent (format in kubefmt) gives the node's measured load;
//     a missing, malformed or stale one falls back to the usage model and
//     is counted (telemetry_fallbacks_total).
package serving
