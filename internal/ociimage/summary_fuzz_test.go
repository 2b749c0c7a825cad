package ociimage

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// summarySeed is images.json as Build writes it (json.MarshalIndent and a
// newline) for the testdata/hello component on two platforms.
func summarySeed(t testing.TB) []byte {
	t.Helper()
	s := &Summary{Key: "0123456789abcdef01234567", Version: "v1", Commit: "0123456789abcdef0123456789abcdef01234567",
		Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	cs := ComponentSummary{Name: "hello", Image: "ghcr.io/edgesched/hello:v1", User: "65532:65532",
		Digest: "sha256:" + strings.Repeat("ab", 32)}
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		flat := strings.ReplaceAll(p, "/", "-")
		cs.Platforms = append(cs.Platforms, PlatformSummary{Platform: p, Digest: "sha256:" + strings.Repeat("cd", 32),
			CompressedSize: 1 << 20, BinarySize: 2 << 20, Binary: filepath.Join("bin", flat, "hello"),
			Archive: filepath.Join("archives", "hello-"+flat+".tar")})
	}
	s.Components = append(s.Components, cs)
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// FuzzReadSummary: no images.json makes ReadSummary panic; a refusal of
// the file returns nothing and wraps ErrSummary; an accepted summary
// names only files inside the build directory, and written back as Build
// writes it, it reads back the same. Seeded with a summary as Build
// writes it, torn and with an escaping path.
func FuzzReadSummary(f *testing.F) {
	seed := summarySeed(f)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add(bytes.Replace(seed, []byte(`"bin/`), []byte(`"../../bin/`), 1))
	f.Add(bytes.Replace(seed, []byte(`"archives/`), []byte(`"/archives/`), 1))
	f.Add([]byte("null"))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "images.json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := ReadSummary(dir)
		if err != nil {
			if s != nil || !errors.Is(err, ErrSummary) {
				t.Fatalf("refusal %v (summary %+v) does not wrap ErrSummary or returned a summary", err, s)
			}
			return
		}
		for _, cs := range s.Components {
			for _, p := range cs.Platforms {
				if !filepath.IsLocal(p.Binary) || !filepath.IsLocal(p.Archive) {
					t.Fatalf("accepted files outside the build directory: %q, %q", p.Binary, p.Archive)
				}
			}
		}
		again, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			t.Fatalf("an accepted summary does not encode: %v", err)
		}
		if err := os.WriteFile(path, append(again, '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
		back, err := ReadSummary(dir)
		if err != nil || !reflect.DeepEqual(back, s) {
			t.Fatalf("round trip: %+v (%v), read %+v", back, err, s)
		}
	})
}

// TestReadSummaryCap: an images.json over MaxSummaryBytes is refused from
// its size, and one that is not a regular file is refused unopened.
func TestReadSummaryCap(t *testing.T) {
	dir := t.TempDir()
	seed := summarySeed(t)
	big := append(bytes.Clone(seed), bytes.Repeat([]byte(" "), MaxSummaryBytes+1-len(seed))...)
	if err := os.WriteFile(filepath.Join(dir, "images.json"), big, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSummary(dir); !errors.Is(err, ErrSummary) {
		t.Fatalf("a %d-byte images.json: %v, want ErrSummary", len(big), err)
	}
	if err := os.WriteFile(filepath.Join(dir, "images.json"), big[:MaxSummaryBytes], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSummary(dir); err != nil {
		t.Fatalf("an images.json of exactly %d bytes: %v", MaxSummaryBytes, err)
	}
	other := t.TempDir()
	if err := os.Mkdir(filepath.Join(other, "images.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSummary(other); !errors.Is(err, ErrSummary) {
		t.Fatalf("a directory named images.json: %v, want ErrSummary", err)
	}
	if _, err := ReadSummary(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("no images.json: %v, want os.ErrNotExist", err)
	}
}
