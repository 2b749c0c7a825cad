// Package release makes and reads back the coordinator's model versions
// (docs/federated.md "Round lifecycle"): Maker.Make turns a float model
// into a version — its float32 artifact, its int8 artifact calibrated on
// the fleet's rows, quantized and checked (quant/sanity), both signed,
// and its registry record, pending publication or a candidate — or an
// *Error naming why the model cannot be made (a round fails with it); Put
// stores a made version in coordinator.db as the next one; LoadFloat
// decodes a stored version's float32 artifact back into a model
// (signed by this coordinator, or by a key of ModelKeys before a key
// rotation); Artifacts copies both out for publication, which ObjectName
// names in the model object store. Putting them on the bus is package
// coordinator's.
//
// Concurrency and lifetimes: the functions keep no state and start no
// goroutine; Put, Next, Artifacts and LoadFloat run inside the caller's
// bbolt transaction, and the versions they make or return are the
// caller's. Make calls Calibrate on the caller's goroutine, and what it
// makes stays valid as the next version only while nothing else stores
// one (the coordinator holds its state mutex from Make to Put).
package release
