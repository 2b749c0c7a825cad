// Package coordinator is edge-coordinator, the cloud side of federated
// learning (docs/federated.md): the round manager (synchronous rounds
// with deadline and quorum, or buffered asynchronous aggregation), ingest
// of site updates (parallel verification, group commits, bounds),
// aggregation and the model check before a model is stored, model
// signing and publication, the NATS micro-service admin API (package
// coordinator/admin answers it through a Backend the coordinator
// implements) and Prometheus metrics (defined in coordinator/metrics),
// and the root's side of hierarchical rounds (regional.go: regional
// aggregates judged and merged; their decoding and stream consumer are
// coordinator/regional, the aggregators coordinator/region). An update's
// checks against a round are coordinator/bounds. Its state is
// coordinator.db (package store).
//
// Concurrency and lifetimes: a Coordinator is created by New, which
// opens and checks the store; Run serves on one NATS connection until its
// context ends and owns every goroutine it starts (ingest, the deadline
// ticker, the stream trimmer, backups and, with regions, the regional
// stream's consumer), stopping them before it
// returns; Close closes the store after Run. Its methods are safe for
// concurrent use: state changes are serialised by one mutex and each is
// one bbolt transaction (a group of update verdicts is one). A damaged
// store stops Run with a *DamagedError.
//
// High availability (Config.HA, ha.go; its JetStream side is package
// coordinator/replica): RunReplica waits as a standby
// for the lease, restores the newest checkpoint into DataDir, then opens
// the store (New) and runs it (Run) as the active while a goroutine it
// owns renews the lease; it waits for that goroutine and closes the store
// before it returns. A Coordinator is active at most once: after
// ErrDeposed the process is meant to exit and start again as a standby.
// Checkpoints are taken under the state mutex, so ingest waits for one.
package coordinator
