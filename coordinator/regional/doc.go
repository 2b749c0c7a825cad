// Package regional is the root coordinator's side of regional aggregates
// (hierarchical rounds, docs/federated.md): the names of the reasons an
// aggregate is refused, the Verdict on one, Decode (the aggregate's
// envelope, its region's signature and the subject it came on; no
// coordinator state), Ledger.Record, which judges a decoded aggregate
// against the current round inside the root's bbolt transaction — every
// site it lists counted, its exact partial sums merged into the round's
// sums (coordinator/aggregation), or none, the refusal named — and keeps
// its verdict under its digest in Bucket, so the same aggregate again
// gets the same verdict and counts nothing; and Consume, the durable
// consumer of the regional stream that hands each aggregate to a Judge
// (the coordinator, which locks its state and runs Ledger.Record in one
// transaction) and acks it once judged. A highly available root's active
// (Stream.Epoch) reads with a consumer of its own starting after its
// checkpoint's regional floor and deletes the earlier actives' consumers
// first (fencing).
//
// Concurrency and lifetimes: Decode and Digest keep no state. A Ledger
// runs inside its caller's transaction, under the coordinator's state
// mutex (its Sums cache is not safe for concurrent use), and keeps
// nothing after it. Consume runs on the caller's goroutine until ctx ends
// or the Judge reports a fatal error, starts no goroutine of its own and
// calls the Judge, then the Acked hook, one aggregate at a time; the
// Judge is what serialises against the rest of the coordinator. The
// consumer handed to the Opened hook is valid until Consume returns.
package regional
