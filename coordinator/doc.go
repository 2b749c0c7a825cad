// Package coordinator is edge-coordinator, the cloud side of federated
// learning (docs/federated.md): the round manager (synchronous rounds
// with deadline and quorum, or buffered asynchronous aggregation), the
// judging of site updates under its lock in group commits, aggregation
// and the model check before a model is stored, publication of models
// and rounds on NATS, the NATS micro-service admin API (package
// coordinator/admin answers it through a Backend the coordinator
// implements) and Prometheus metrics (defined in coordinator/metrics). It
// drives these subpackages, which do not import it:
//
//   - coordinator/ingest: the update pipeline (fetch, parallel
//     verification, groups) and the verdict rules on one update;
//   - coordinator/bounds: an update's checks against a round;
//   - coordinator/aggregation: a closed round's aggregate and a summing
//     round's running sums;
//   - coordinator/release: making, storing and reading back model
//     versions (quantized, checked, signed);
//   - coordinator/bus: the JetStream stream, buckets and update consumer;
//   - coordinator/regional: the root's side of hierarchical rounds
//     (regional.go drives it);
//   - coordinator/replica: high availability's JetStream primitives;
//   - coordinator/store: its state, coordinator.db.
//
// The regional aggregators themselves (edge-coordinator region) are
// package coordinator/region, which uses this package's types.
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
