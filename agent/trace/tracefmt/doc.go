// Package tracefmt is the workload trace's record format: the events
// agent/trace records (Event, one per Kind: pod arrivals, bindings and
// deletions with the pod in the simulator's terms, node usage samples,
// pod-to-pod call rates, node attributes) and their on-disk encoding, a
// small versioned binary format (EncodeEvent, DecodeEvent; fuzzed by
// FuzzDecodeEvent). Its one job is that format: what a record holds, its
// limits (MaxString, MaxModels, MaxShare, MaxRate, MaxRecordBytes, and
// the times int64 Unix nanoseconds hold) and the refusal of anything
// beyond them (Event.Validate; ErrRecord wraps every refusal). Where the
// records come from (trace.Recorder, trace.PodRecord, trace.NodeRecord,
// which cut GPU model names to MaxGPUModel) and where they are kept and
// how they are read (trace.Store, the export) is agent/trace's.
//
// EncodeEvent writes version 2; DecodeEvent also reads version 1 (node
// records without a failure rate) and refuses unknown versions and
// kinds, truncation, trailing bytes, oversized strings and out-of-range
// values: everything EncodeEvent would refuse to write. RecordHeader and
// RecordTime read a record's kind and time without decoding the rest, for
// a store that skips records by them. docs/site-leader.md ("On disk")
// describes the format.
//
// Concurrency and lifetimes: the package has no state. Its functions are
// safe for concurrent use; DecodeEvent's result shares no memory with its
// input (the caller may reuse the bytes, e.g. a bbolt value valid only in
// its transaction), and EncodeEvent returns a new slice. An Event's
// payload is a pointer: events are values to build, encode and read, not
// to share while another goroutine changes them.
package tracefmt
