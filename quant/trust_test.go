package quant

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKeyRotation walks a rotation: old key only, both keys (overlap),
// new key with the old one retired. An artifact signed by the retired key
// is refused with ErrRetiredKey (also ErrUnknownKey) even when its .pub
// file is still in the keyring directory.
func TestKeyRotation(t *testing.T) {
	oldKey, _ := testSigner(t, 11)
	newKey, _ := testSigner(t, 12)
	a := floatArtifact(t, 1)
	byOld, err := a.Encode(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	byNew, err := a.Encode(newKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mustKeyPair := func(name string, s *Signer) {
		t.Helper()
		if _, _, err := WriteKeyPair(dir, name, s); err != nil {
			t.Fatal(err)
		}
	}
	mustKeyPair("old", oldKey)
	type verdict struct{ old, new error }
	step := func(t *testing.T, want verdict) {
		t.Helper()
		k, err := LoadKeyring(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			raw  []byte
			want error
		}{{"signed by old", byOld, want.old}, {"signed by new", byNew, want.new}} {
			_, err := Decode(c.raw, DecodeOptions{Keys: k})
			switch {
			case c.want == nil && err != nil:
				t.Errorf("%s: refused: %v", c.name, err)
			case c.want != nil && !errors.Is(err, c.want):
				t.Errorf("%s: got %v, want %v", c.name, err, c.want)
			}
		}
	}
	t.Run("before rotation", func(t *testing.T) { step(t, verdict{nil, ErrUnknownKey}) })
	mustKeyPair("new", newKey)
	t.Run("overlap", func(t *testing.T) { step(t, verdict{nil, nil}) })
	// retire: the .pub becomes .retired; a stale copy of old.pub left
	// behind (another directory synced late) must not bring it back
	if err := os.Rename(filepath.Join(dir, "old.pub"), filepath.Join(dir, "old"+RetiredSuffix)); err != nil {
		t.Fatal(err)
	}
	t.Run("retired", func(t *testing.T) { step(t, verdict{ErrRetiredKey, nil}) })
	b, _ := os.ReadFile(filepath.Join(dir, "old"+RetiredSuffix))
	if err := os.WriteFile(filepath.Join(dir, "old-copy.pub"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("retired with a stale .pub copy", func(t *testing.T) { step(t, verdict{ErrRetiredKey, nil}) })

	k, err := LoadKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ids := k.IDs(); len(ids) != 1 || ids[0] != newKey.ID {
		t.Errorf("trusted IDs %v, want only %s", ids, newKey.ID)
	}
	if r := k.Retired(); len(r) != 1 || r[0] != oldKey.ID {
		t.Errorf("retired IDs %v, want %s", r, oldKey.ID)
	}
	_, err = Decode(byOld, DecodeOptions{Keys: k})
	if err == nil || !strings.Contains(err.Error(), "retired") || !strings.Contains(err.Error(), oldKey.ID) {
		t.Errorf("refusal does not name the retired key: %v", err)
	}
}

func TestRetiredFileGivenDirectly(t *testing.T) {
	s, _ := testSigner(t, 13)
	dir := t.TempDir()
	_, pub, err := WriteKeyPair(dir, "k", s)
	if err != nil {
		t.Fatal(err)
	}
	retired := filepath.Join(dir, "k"+RetiredSuffix)
	if err := os.Rename(pub, retired); err != nil {
		t.Fatal(err)
	}
	k, err := LoadKeyring(retired)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Lookup(s.ID); !errors.Is(err, ErrRetiredKey) {
		t.Fatalf("lookup of a retired key: %v", err)
	}
	if _, err := k.Retire([]byte{1, 2}); !errors.Is(err, ErrKey) {
		t.Fatalf("retiring a 2-byte key: %v", err)
	}
}

func TestCheckFresh(t *testing.T) {
	created := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	h := &Header{Version: 7, ModelID: strings.Repeat("ab", 32), Created: created}
	for _, tc := range []struct {
		name   string
		h      *Header
		now    time.Time
		maxAge time.Duration
		stale  bool
	}{
		{"off", h, created.Add(1000 * time.Hour), 0, false},
		{"fresh", h, created.Add(time.Hour), 24 * time.Hour, false},
		{"exactly the maximum age", h, created.Add(24 * time.Hour), 24 * time.Hour, false},
		{"one second too old", h, created.Add(24*time.Hour + time.Second), 24 * time.Hour, true},
		{"no creation time", &Header{Version: 1}, created, time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckFresh(tc.h, tc.now, tc.maxAge)
			if tc.stale != errors.Is(err, ErrStale) || (!tc.stale && err != nil) {
				t.Fatalf("got %v, stale %v", err, tc.stale)
			}
		})
	}
}
