// Package bounds holds the pure checks of one verified site update against
// a round record (Check: shape, finite values, base model, norm bound,
// sample cap) and its preparation for a summing round's exact sums
// (PrepareTerm, Weights). The root's ingest (package coordinator/ingest)
// and the regional aggregators (package coordinator/region) both use it,
// so that a region judges and sums its sites' updates exactly as the root
// would (docs/federated.md "Hierarchical rounds"); the root's judging of a
// regional aggregate (package coordinator/regional) weighs its sites with
// Weights.
//
// Concurrency and lifetimes: the functions keep no state and start no
// goroutine. Check may re-check the payload of the CheckedUpdate it is
// given (it writes to it), so one CheckedUpdate is not shared between
// goroutines while it is checked; the round record and the sums are only
// read.
package bounds
