// Package aggregation is the arithmetic of a closed round as
// coordinator.db holds it (docs/federated.md "Aggregation rules" and
// "Summing rounds"): Stored combines a round's stored updates with the
// configured rule (decoded in parallel, a window at a time, and added in
// key order, so a recomputation after a crash gives the same bytes),
// Summed takes a summing round's mean from its exact running sums, and
// Collected.Stats makes the figures recorded with the round. It also
// keeps those running sums: SumSpec decides whether and how a new round
// sums, Cache holds the current round's sums as committed and Sums.Add
// and Sums.Put store them in the judging transaction. Package
// coordinator applies the result to the base model; coordinator/ingest
// and coordinator/regional add to the sums.
//
// Concurrency and lifetimes: the functions run inside the caller's bbolt
// transaction and keep nothing after it; Stored decodes on goroutines of
// its own and waits for them. A Cache and the Sums it hands out are not
// safe for concurrent use: the coordinator uses them under its state
// mutex, and Forget drops them after a transaction that failed (they may
// hold what was not committed). Sums live as long as their round is the
// current one.
package aggregation
