// Package store is the coordinator's bbolt file, coordinator.db: its
// layout and record types (rounds, sites, models, verdicts, the audit
// log), the checksummed, strictly decoded record codec, the binary format
// of stored updates, and the file's integrity — the check before use,
// migration from older layouts, one clear error for a damaged file,
// backups, check and restore (integrity.go).
//
// Concurrency and lifetimes: the functions hold no state and run inside
// the caller's transactions; Open returns a *bolt.DB the caller closes.
// RoundCache is safe for concurrent use. Guard turns bbolt's panics and
// memory faults into errors for the goroutine that calls it only.
package store
