// Package replica holds the JetStream primitives of the coordinator's
// high availability (docs/federated.md "Highly available coordinator"):
// taking and renewing a lease held in a KV bucket whose entries expire
// (Acquire, Renew), compare-and-set writes that recognise a write of
// their own whose answer was lost (CASPut), the checkpoint pointer's
// strict decoder (DecodeCheckpoint) and the restore of a checkpoint from
// an object store (Restore). Package coordinator drives them.
//
// Concurrency and lifetimes: the functions are safe for concurrent use
// on their own arguments; Acquire and Renew block until they succeed,
// are refused or ctx ends, and start no goroutine.
package replica
