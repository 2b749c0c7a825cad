package boltcheck

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// writeDB makes a small database with a few buckets and keys.
func writeDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range []string{"a", "b", "c"} {
			b, err := tx.CreateBucket([]byte(name))
			if err != nil {
				return err
			}
			for i := range 500 {
				if err := b.Put([]byte{byte(i >> 8), byte(i)}, make([]byte, 100)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name    string
		damage  func(t *testing.T, path string)
		want    error // nil: consistent
		opening bool  // the error is from opening, not the check
	}{
		{"consistent", func(*testing.T, string) {}, nil, false},
		{"leaf page overwritten", func(t *testing.T, path string) {
			// pages 0 and 1 are the meta pages, 2 the free list, 3 the
			// first root: scribble over page 4 onwards (a bucket's pages)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			junk := make([]byte, 4096)
			for i := range junk {
				junk[i] = 0xa5
			}
			if _, err := f.WriteAt(junk, 4*int64(os.Getpagesize())); err != nil {
				t.Fatal(err)
			}
		}, ErrCorrupt, false},
		{"missing", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, fs.ErrNotExist, true},
		{"not a database", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("hello"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeDB(t)
			tc.damage(t, path)
			err := Check(path)
			switch {
			case tc.opening:
				if err == nil || errors.Is(err, ErrCorrupt) || (tc.want != nil && !errors.Is(err, tc.want)) {
					t.Fatalf("Check = %v, want an error opening the file (%v)", err, tc.want)
				}
				if _, serr := os.Stat(path); tc.want == fs.ErrNotExist && serr == nil {
					t.Fatal("Check created the missing file")
				}
			case tc.want == nil && err != nil:
				t.Fatalf("Check = %v, want nil", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("Check = %v, want %v", err, tc.want)
			}
		})
	}
}
