// Package replica holds the JetStream primitives of the coordinator's
// high availability (docs/federated.md "Highly available coordinator"):
// taking and renewing a lease held in a KV bucket whose entries expire
// (Acquire, Renew, timed by a Clock), compare-and-set writes that
// recognise a write of their own whose answer was lost (CASPut), the
// checkpoint pointer's strict decoder (DecodeCheckpoint) and the restore
// of a checkpoint from an object store within a deadline scaled to its
// size (Restore); and, built on them, the buckets (OpenBuckets), a held
// lease renewed on a goroutine (Hold, Held.Release), an active replica's
// claim on the checkpoint pointer, its checkpoints and its fenced writes
// of the state bucket (Active), and the removal of earlier actives'
// consumers (DeleteEarlierConsumers). Package coordinator drives them.
//
// Checkpoint objects: each attempt stores e<epoch>-g<gen>-<nonce>.db and
// the pointer names the current one, which is never removed. After each
// checkpoint the pointer takes, the active sweeps the object store: it
// removes, at most SweepLimit at a time, the oldest first, the objects
// whose names parse as of an earlier epoch or an earlier generation of
// its own, which attempts left behind when an active crashed between its
// object and its pointer update; before each removal it reads the pointer
// from the HA bucket's leader and stops once the pointer no longer names
// its new checkpoint. A later epoch's objects, this generation's other
// attempts and names that do not parse stay; a failed sweep is logged and
// counted (Active.TakeSweep), and the checkpoint stands.
//
// Concurrency and lifetimes: the functions are safe for concurrent use
// on their own arguments; Acquire blocks until it succeeds or ctx ends
// and starts no goroutine; Renew blocks until it steps down or ctx ends,
// and sends each renewal from a goroutine of its own, which it waits for
// before it returns. Hold starts one goroutine (Renew), which Release
// stops and waits for; call Release exactly once, after everything that
// uses Hold's context is done.
// An Active's methods other than Judged, RegionalJudged (one caller at a
// time each), CatchingUp, Floor, RegionalFloor, Epoch and Status are not
// safe for concurrent use: the coordinator calls them under its state
// mutex. An Active lives as long as its epoch: after ErrDeposed
// it is dropped with the coordinator that used it.
package replica
