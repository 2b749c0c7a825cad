package atomicfile

import (
	"os"
	"path/filepath"
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
	// a failed write (no such directory) leaves nothing behind
	if err := Write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want only f (no temporary files)", len(ents))
	}
}
