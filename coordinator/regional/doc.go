// Package regional is the root coordinator's reading of regional
// aggregates (hierarchical rounds, docs/federated.md): the names of the
// reasons an aggregate is refused, the Verdict on one, Decode (the
// aggregate's envelope, its region's signature and the subject it came
// on; no coordinator state) and Consume, the durable consumer of the
// regional stream that hands each aggregate to a Judge (the coordinator,
// which merges it into the round's sums in its store).
//
// Concurrency and lifetimes: Decode keeps no state. Consume runs on the
// caller's goroutine until ctx ends or the Judge reports a fatal error,
// starts no goroutine of its own and calls the Judge one aggregate at a
// time; the Judge is what serialises against the rest of the
// coordinator.
package regional
