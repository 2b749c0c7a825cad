// Package boltcheck runs bbolt's consistency check (what `bbolt check`
// does) on a database file, for tests that kill processes holding one.
//
// Check opens the file read-only, so the process that writes it must have
// exited (or not hold bbolt's lock): a live writer makes Check wait for
// the lock up to its timeout and fail.
package boltcheck
