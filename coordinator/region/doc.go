// Package region is the regional aggregator of hierarchical rounds
// (docs/federated.md "Hierarchical rounds"; edge-coordinator region): it
// runs next to a region's NATS leaf-node hub, verifies its sites' updates
// from the region's own update stream exactly as the root would
// (federated.CheckUpdateMsg, bounds.Check and
// bounds.PrepareTerm against the root's round record), adds them to
// exact fixed-point partial sums (federated.FixedSum) and, when the round
// closes for it, forwards one signed RegionalAggregate to the root.
//
// Its state is region.db (bbolt): the current round, each site's highest
// sequence and its verdicts down to store.JudgedWindow below it (so a
// late update below the mark is judged, not refused as a replay), the
// sites counted in each round, the round's partial sums and
// an outbox of sealed aggregates. A group of updates is one transaction,
// committed before the updates are acked on the stream; a sealed
// aggregate stays in the outbox until the root's stream acknowledged it
// (a publish with the aggregate's MsgID, so the stream drops a second
// copy, and the root keeps each aggregate's verdict beyond that window):
// a WAN outage or a restart of the region loses nothing and counts
// nothing twice.
//
// Concurrency and lifetimes: New opens the store; Run serves until its
// context ends and owns every goroutine it starts (ingest, the round
// watch, the forwarder), stopping them before it returns; Close closes
// the store after Run. Run's ingest holds at most Config.MaxInflightBytes
// of fetched updates (ingest.Budget; one larger update alone) until each
// is acked or nacked: its fetch waits for room, and stops with Run's
// context. The methods are safe for concurrent use: state
// changes are serialised by one mutex and each is one bbolt transaction.
// Hierarchical rounds are synchronous rounds of a summing rule (FedAvg,
// FedBuff); for the robust rules sites send to the root directly.
package region
