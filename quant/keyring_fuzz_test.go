package quant

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzLoadKeyring: no trusted-keys directory makes LoadKeyring panic,
// whatever the directory is called, the extra key file is called and
// holds. A refusal wraps ErrKey; an accepted keyring trusts the real
// key's ID, and the extra file's key exactly when it is named *.pub and
// not also retired; a *.retired file's key is refused (ErrRetiredKey).
// Seeded with key files WriteKeyPair wrote, in directories named as
// operators name them, glob metacharacters included.
func FuzzLoadKeyring(f *testing.F) {
	real, _ := testSigner(f, 11)
	extra, _ := testSigner(f, 12)
	seedDir := f.TempDir()
	if _, _, err := WriteKeyPair(seedDir, "extra", extra); err != nil {
		f.Fatal(err)
	}
	pub, err := os.ReadFile(filepath.Join(seedDir, "extra.pub"))
	if err != nil {
		f.Fatal(err)
	}
	for _, dir := range []string{"keys", "keys[1]", "trusted-keys*", "k?", "a b"} {
		f.Add(dir, "coordinator-2.pub", pub)
		f.Add(dir, "coordinator-1"+RetiredSuffix, pub)
	}
	f.Add("keys", "notes.txt", pub)
	f.Add("keys", "x.pub", pub[:len(pub)-4])
	f.Fuzz(func(t *testing.T, dirName, file string, content []byte) {
		if !validFileName(dirName) || !validFileName(file) || file == "real.pub" || file == "real.key" {
			t.Skipf("%q or %q is not a plain file name the fuzz test can create (or names the real key pair)", dirName, file)
		}
		dir := filepath.Join(t.TempDir(), dirName)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Skipf("the file system refused directory %q: %v", dirName, err)
		}
		if _, _, err := WriteKeyPair(dir, "real", real); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), content, 0o600); err != nil {
			t.Skipf("the file system refused the key file: %v", err)
		}
		k, err := LoadKeyring(dir)
		if err != nil {
			if k != nil || !errors.Is(err, ErrKey) {
				t.Fatalf("refusal %v does not wrap ErrKey, or returned a keyring", err)
			}
			return
		}
		isPub, isRetired := strings.HasSuffix(file, ".pub"), strings.HasSuffix(file, RetiredSuffix)
		var filePub []byte
		if isPub || isRetired {
			p, err := ReadPublicKey(filepath.Join(dir, file))
			if err != nil {
				t.Fatalf("keyring accepted %s, which ReadPublicKey refuses: %v", file, err)
			}
			filePub = p
		}
		realID := KeyID(real.Public())
		want := []string{realID}
		switch {
		case isRetired && KeyID(filePub) == realID:
			want = nil
		case isPub && KeyID(filePub) != realID:
			want = append(want, KeyID(filePub))
		}
		got := k.IDs()
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("keyring of %q with %q: trusts %q, want %q", dirName, file, got, want)
		}
		if isRetired {
			if _, err := k.Lookup(KeyID(filePub)); !errors.Is(err, ErrRetiredKey) {
				t.Fatalf("the retired key %s: %v, want ErrRetiredKey", KeyID(filePub), err)
			}
		}
	})
}

// validFileName reports whether s can name one file in a directory.
func validFileName(s string) bool {
	return s != "" && s != "." && s != ".." && len(s) < 200 && !strings.ContainsAny(s, "/\x00")
}

// TestLoadKeyringGlobDir: a trusted-keys directory whose path holds glob
// metacharacters is read as the directory it names: "keys[1]" is not read
// as empty, and "keys*" does not trust a sibling directory's keys too.
func TestLoadKeyringGlobDir(t *testing.T) {
	base := t.TempDir()
	signers := map[string]*Signer{}
	for i, dir := range []string{"keys[1]", "keys*", "keys-old"} {
		s, _ := testSigner(t, uint64(20+i))
		signers[dir] = s
		if err := os.Mkdir(filepath.Join(base, dir), 0o700); err != nil {
			t.Fatal(err)
		}
		if _, _, err := WriteKeyPair(filepath.Join(base, dir), "k", s); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{"keys[1]", "keys*"} {
		k, err := LoadKeyring(filepath.Join(base, dir))
		if err != nil {
			t.Fatal(err)
		}
		if got := k.IDs(); !slices.Equal(got, []string{signers[dir].ID}) {
			t.Errorf("LoadKeyring(%q) trusts %q, want only %s", dir, got, signers[dir].ID)
		}
	}
}
