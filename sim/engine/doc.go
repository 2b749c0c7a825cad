// Package engine runs scheduling policies in the simulator of package sim
// and measures them: Run evaluates one sim.Policy (made by a sim.Factory)
// on a sim.Env, Compare runs several policies over several seeds, and
// Measures lists what a Result reports.
//
// A run is in one of two modes:
//
//   - Replay: pods arrive and leave at their trace times; pods that fit
//     nowhere wait and are retried when capacity frees up. Scenarios with
//     disruptions fail nodes (their pods are evicted and rescheduled) and
//     flap zone uplinks (sim/disrupt).
//   - Inflate: the FGD paper's method: pods are sampled from the workload
//     (seeded) and placed one by one until the arrived demand reaches a
//     target share of capacity, recording the share of GPUs left
//     unallocated at every step.
//
// Each pod is filtered (sim.State.Feasible, plus the policy's own
// sim.NodeFilter) and the policy scores the feasible nodes; the highest
// score wins, ties broken with the run's seeded random stream (TieRandom)
// or by the lowest node index (TieFirst). Measures cover allocation,
// failures, fragmentation, utilisation, a latency proxy, cross-zone
// traffic, carbon and decision time; docs/sim.md documents each.
//
// Lifetime: a Run owns its sim.State: it makes a fresh one from the Env,
// changes it pod by pod, and drops it when it returns. The RunConfig hooks
// (OnBind, OnOutcome) see that State during the call only; they may read
// it but must neither change it nor keep it. The policy value a Factory
// makes belongs to that one run.
//
// Concurrency: an Env is read-only and may be shared by concurrent runs.
// Run itself does not start goroutines and calls the hooks and Progress
// from the caller's goroutine. Compare runs policies and seeds on a
// bounded pool of goroutines it owns, so hooks in its RunConfig are called
// from several runs at once and must be safe for concurrent use.
//
// Determinism: a run is a pure function of the Env, the policy and the
// RunConfig (its Seed feeds separate random streams for sampling,
// tie-breaking, the policy and disruptions, and seeds the load profiles'
// bursts), except for the measured decision latency. Compare's results,
// decision latency aside, do not depend on its parallelism.
package engine
