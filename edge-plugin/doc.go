// Package edgeplugin is EdgePolicy, a kube-scheduler framework plugin
// (k8s.io/kube-scheduler/framework, Kubernetes v1.37) that places pods
// with the project's learned int8 policy, making the same choices the
// policy makes in the simulator (quant.Factory) for the same cluster state.
//
// Extension points:
//   - PreFilter/Filter: the hard GPU constraints upstream plugins do not
//     model: accepted GPU models and per-device fit (whole free devices,
//     or one device with the requested share free). Totals, CPU, memory,
//     architecture, selectors and taints stay with the upstream plugins.
//   - PreScore: converts the scheduler's snapshot into the simulator's
//     types (sim.Env, sim.State), extracts the features of the pod on
//     every feasible node (policy.Extractor) and runs the int8 network
//     once over the batch; normalised scores go to CycleState.
//   - Score: 0; NormalizeScore copies PreScore's scores into the
//     framework's list by position (by name if the list is in another
//     order). With a scheduling policy, Score scores each node and
//     NormalizeScore clamps.
//   - Reserve/Unreserve/Bind: the pod's GPU devices (FGD's device for
//     a share, as in the simulator) are chosen at Reserve and recorded in
//     the pod annotation edgesched.io/gpu-devices at Bind, which binds
//     the pod with a Binding carrying the annotations (one API write; pods
//     with nothing to record are left to DefaultBinder).
//   - Bind also writes edgesched.io/explanation (explain.go): exact
//     Shapley values of feature groups for the chosen node's score.
//
// The Kubernetes conventions (resource names, labels, annotations) are
// in conventions.go and docs/edge-plugin.md.
//
// Concurrency and lifetime:
//   - One EdgePolicy serves a profile for the scheduler's lifetime. Filter
//     runs on many goroutines at once; it only reads the NodeInfo and a
//     concurrency-safe cache of converted nodes keyed by the NodeInfo's
//     generation (immutable entries).
//   - The converter keeps one sim.State (with its Extractor) across cycles
//     and brings it up to date in PreScore, re-binding only the nodes whose
//     generation changed. State and Extractor are not safe for concurrent
//     use: every use happens under the converter's mutex (PreScore's
//     feature extraction and scoring, Reserve's device choice). Reserve only
//     reuses the State if no later PreScore changed it (an epoch check);
//     otherwise it models the node alone. The scheduler runs one scheduling
//     cycle at a time, so the mutex is uncontended in practice. CycleState
//     data is read-only once PreScore returns, so Clone shares it, until
//     Reserve: it returns the cycle's per-node slices (candidates, raw and
//     normalised scores) to a pool, keeping what the Bind-time explanation
//     needs in the explanation's own state, so nothing after Reserve
//     (the binding cycle included) may read them (scoreOf then finds no
//     node).
//   - The model sits behind an atomic.Pointer. A cycle loads it once and
//     uses that model throughout, even if a swap happens meanwhile; swaps
//     never wait for cycles and cycles never wait for swaps. Each model
//     hands out scorers (scratch buffers) from its own sync.Pool.
//   - Models load from a file polled by a goroutine, or from one ConfigMap
//     watched by an informer (model_configmap.go), either living until the
//     context given to New ends; both share one verify-and-swap path. A
//     refused model (signature, format, rollback) keeps the previous one
//     (and, from a ConfigMap, is reported as a ModelRefused Event on it);
//     without any model the plugin scores every node 0 (neutral) and
//     counts a fallback.
//   - A panic in conversion, features or model code is recovered: that
//     cycle scores 0 everywhere and panics_total and fallbacks_total
//     count it. Score never blocks and never fails.
//   - Device reservations live in memory until the pod's annotation is in
//     the snapshot or 10 minutes pass; after a restart the annotations
//     (written at Bind) are the record. GPU pods without one get a
//     deterministic best-fit assignment.
//
// extender.go serves the same Filter and Score decisions over the
// kube-scheduler HTTP extender protocol (`edge-scheduler extender`) for
// K3s's embedded scheduler, and extender_bind.go the bind verb: GPU pods
// bound with the policy's devices in their annotation. An Extender is safe
// for concurrent requests; the pods it bound stay "assumed" on their
// nodes until its informers show them (at most AssumeTTL).
//
// Node telemetry (telemetry.go): a fresh edgesched.io/telemetry summary
// written by the node's agent (format in kubefmt) gives the node's
// measured CPU load; a missing, malformed or stale one falls back to the
// usage model and is counted (telemetry_fallbacks_total).
//
// Service dependencies (dependencies.go): with dependenciesConfigMap, the
// site's service call graph (kubefmt.DependencyGraph, written by the
// site leader from the agents' flow measurements) is watched in that
// ConfigMap and compiled into the converted environment, each pod's
// service (kubefmt.ServiceOf) into its simulator pod, so the
// dependency features see where each service's replicas run; without it
// they are 0.
//
// Not done yet: SignPlugin (pods are not batched, which is correct because
// scores depend on the cluster state).
package edgeplugin
