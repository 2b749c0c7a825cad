// Package scenario reads scenario files: YAML documents (kind Scenario,
// apiVersion edgesched.io/v1alpha1) that describe zones with carbon curves
// and round-trip times, node pools (or an imported openb node list), and a
// workload made of an imported openb pod list, explicit pods, replicated
// services and a generator (Poisson or even arrivals with a daily cycle and
// bursts), plus the service-dependency graph. docs/scenario.md documents
// every field.
//
// Decoding is strict: unknown or duplicate keys, wrong types, negative or
// non-finite numbers and references to undeclared zones, models or services
// are *sim.LineError values naming file, line and field. Files are capped at
// MaxFileBytes and expand to at most MaxNodes nodes and MaxPods pods.
//
// Built-in scenarios (Builtins; "builtin:NAME" in Load) are embedded; the
// loaded edge-fleet families (Families, sim/scenario/family) are generated
// for the seed of Options (or their default) and load the same way. Carbon
// zones may take a window of a real grid (sim/carbon); workload.apps places
// service graphs from sim/scenario/apps (App documents, ParseApp). The
// generator and usageSpread draw from the scenario's seed, so a file always
// yields the same workload.
package scenario
