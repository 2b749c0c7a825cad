// Package ingest takes site updates from the update stream to their
// verdicts (docs/federated.md "Ingest"): Pipeline fetches them from the
// coordinator's durable consumer, has a pool of workers verify each as it
// arrives (Incoming.Verify: envelope, signature, payload, and the stored
// record made outside the lock) and hands them on in stream order, in
// groups, to the coordinator's judge; Batch holds the rules that judge
// one verified update against the current round inside the group's bbolt
// transaction — unattributable messages, redeliveries and replays (the
// verdicts kept under the site's sequence and the stream's), the round's
// state, base model and bounds (coordinator/bounds), the stored update or
// a summing round's sums (coordinator/aggregation) — and record its
// verdict in coordinator.db (package store). The coordinator owns the
// transaction, the lock, the acks on the stream and the answers to the
// sites.
//
// Concurrency and lifetimes: Run runs on the caller's goroutine until ctx
// ends, Judge reports a store.ErrStore error, or its consumer is gone
// (bus.ErrConsumerGone: a later active deleted it); it owns the fetch
// goroutine, the verification pool and the in-order hand-over, and stops
// them before it returns. Every fetched message holds its bytes of the
// Run's Budget (Pipeline.MaxInflightBytes) until it is judged, refused or
// left to the stream (a store error, or ctx ended: Run releases what it
// drops before it returns); the fetch waits for room, and that wait ends
// with ctx. InflightBytes may be called concurrently with Run; a Pipeline
// is not copied once used. A Budget is safe for concurrent use (the
// regional aggregator's ingest, coordinator/region, has its own). Verify
// is called concurrently from the pool, on different messages; Judge one
// group at a time. An Incoming belongs to one goroutine at a time: the
// pool until verified, then the judge. A Batch lives for one transaction
// and is not safe for concurrent use (nor is the aggregation.Cache its
// Rules share between transactions: the coordinator's state mutex guards
// both).
package ingest
