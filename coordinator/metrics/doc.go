// Package metrics defines edge-coordinator's Prometheus metrics (names
// edgesched_coordinator_*): those of the coordinator (New) and those of a
// high-availability replica (NewReplica). Package coordinator updates
// them; this package holds only their definitions and registration.
//
// Concurrency and lifetimes: the collectors are safe for concurrent use.
// New and NewReplica register on the Registerer once; calling either
// twice on the same Registerer fails (duplicate registration), so a
// process makes one of each for its lifetime.
package metrics
