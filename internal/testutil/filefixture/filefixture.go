// Package filefixture makes the awkward input files tests of size caps
// and file-type checks need: a sparse file larger than a cap (no disk
// used) and a named pipe. Tests only; Linux (syscall.Mkfifo).
//
// Each function fails the test on error and returns the path it made
// under dir; the caller's t.TempDir() owns the files.
package filefixture

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Sparse creates dir/name of size bytes, all holes.
func Sparse(t testing.TB, dir, name string, size int64) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return p
}

// FIFO creates the named pipe dir/name.
func FIFO(t testing.TB, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
