// Package gobuild builds this module's programs (and tools go.mod pins)
// for tests that run them as processes: one `go build` run for a set of
// packages, from the module root, without the race detector (the
// programs under test run at their real speed; the test binary may still
// use -race).
//
// Build is safe for concurrent use; concurrent calls build concurrently
// (the Go build cache serialises the shared work).
package gobuild
