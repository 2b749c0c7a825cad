// Package regional is the root coordinator's reading of regional
// aggregates (hierarchical rounds, docs/federated.md): the names of the
// reasons an aggregate is refused, the Verdict on one, Decode (the
// aggregate's envelope, its region's signature and the subject it came
// on; no coordinator state) and Consume, the durable consumer of the
// regional stream that hands each aggregate to a Judge (the coordinator,
// which merges it into the round's sums in its store) and acks it once
// judged. A highly available root's active (Stream.Epoch) reads with a
// consumer of its own starting after its checkpoint's regional floor and
// deletes the earlier actives' consumers first (fencing).
//
// Concurrency and lifetimes: Decode keeps no state. Consume runs on the
// caller's goroutine until ctx ends or the Judge reports a fatal error,
// starts no goroutine of its own and calls the Judge, then the Acked
// hook, one aggregate at a time; the Judge is what serialises against
// the rest of the coordinator. The consumer handed to the Opened hook is
// valid until Consume returns.
package regional
