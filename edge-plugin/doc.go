// Package edgeplugin is EdgePolicy, a kube-scheduler framework plugin
// (k8s.io/kube-scheduler/framework, Kubernetes v1.37) that places pods
// with the project's learned int8 policy, making the same choices the
// policy makes in the simulator (int8net.Factory) for the same cluster state.
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
//   - Bind also writes edgesched.io/explanation (package explain): exact
//     Shapley values of feature groups for the chosen node's score.
//
// The Kubernetes conventions (resource names, labels, annotations) are
// in conventions.go and docs/edge-plugin.md.
//
// The plugin is the top of the scheduler's layers (docs/edge-plugin.md,
// "Layers"): package sources holds the model store and the watched
// ConfigMaps, package serving the serving core the extension points call
// (the snapshot's view, scores, devices, the scheduling policy), package
// explain the explanation; package extender serves this plugin over the
// extender protocol.
//
// Concurrency and lifetime:
//   - One EdgePolicy serves a profile for the scheduler's lifetime, over
//     one serving.Core (its caveats are in package serving). Filter runs
//     on many goroutines at once and reads only the NodeInfo and the
//     core's concurrency-safe node cache.
//   - CycleState data is read-only once PreScore returns, so Clone shares
//     it, until Reserve: it releases the cycle's per-node slices to the
//     core (serving.Core.Release), keeping what the Bind-time explanation
//     needs in the explanation's own state, so nothing after Reserve (the
//     binding cycle included) may read them.
//   - Models load from a file polled by a goroutine, or from one ConfigMap
//     watched by an informer (sources.ModelSource), either living until
//     the context given to New ends. A refused model (signature, format,
//     rollback) keeps the previous one (and, from a ConfigMap, is reported
//     as a ModelRefused Event on it).
//   - Score never blocks and never fails; a panic in the core is
//     recovered there (the cycle scores 0 everywhere).
//
// Service dependencies: with dependenciesConfigMap, the site's service
// call graph (kubefmt.DependencyGraph, written by the site leader from the
// agents' flow measurements) is watched in that ConfigMap
// (sources.StartDependencies) and compiled into the core's environment,
// each pod's service (kubefmt.ServiceOf) into its simulator pod, so the
// dependency features see where each service's replicas run; without it
// they are 0. The site topology (topologyConfigMap) and the scheduling
// policy (policyConfigMap) are watched the same way.
//
// Not done yet: SignPlugin (pods are not batched, which is correct because
// scores depend on the cluster state).
package edgeplugin
