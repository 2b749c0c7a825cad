package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for i, c := range []struct {
		data string
		perm os.FileMode
	}{{"first", 0o600}, {"second, longer", 0o644}} {
		if err := Write(path, []byte(c.data), c.perm); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != c.data {
			t.Fatalf("write %d: read %q, %v; want %q", i, got, err, c.data)
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != c.perm {
			t.Fatalf("write %d: mode %v, want %v", i, st.Mode().Perm(), c.perm)
		}
	}
	// failed writes leave nothing behind: no such directory; a target
	// that is a directory with something in it (the rename fails)
	if err := Write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
	if err := os.MkdirAll(filepath.Join(dir, "d", "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(dir, "d"), []byte("x"), 0o600); err == nil {
		t.Fatal("write over a non-empty directory succeeded")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %v, want only f and d (no temporary files)", names)
	}
}

// TestWriteUmask: the mode is perm less the umask, as os.WriteFile makes
// it (a temporary file chmod-ed to perm gave 0644 under umask 077).
// Not parallel: the umask is the process's.
func TestWriteUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "f")
	if err := Write(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v (%v), want 0600 under umask 077", st.Mode().Perm(), err)
	}
}

// TestWriteFunc: what fn writes replaces the file, streamed (more than
// the writer's buffer); a fn that fails after writing leaves the earlier
// content whole, returns fn's error, and leaves no temporary file.
func TestWriteFunc(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	big := bytes.Repeat([]byte("0123456789abcdef"), 20<<10) // 320 KiB
	if err := WriteFunc(path, 0o644, func(w io.Writer) error { _, err := w.Write(big); return err }); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read %d bytes, %v; want the %d written", len(got), err, len(big))
	}
	boom := errors.New("boom")
	err := WriteFunc(path, 0o644, func(w io.Writer) error {
		if _, err := w.Write(big); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("WriteFunc: %v, want fn's error", err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("after a failed write: %d bytes, %v; want the earlier %d", len(got), err, len(big))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("directory holds %d entries: a temporary file was left", len(ents))
	}
}
