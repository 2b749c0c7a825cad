package natsauth_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/federated/natsauth"
)

// FuzzReadSeedFile: no NKey seed file makes ReadSeedFile panic; a
// refusal wraps ErrSecret; an accepted file holds a user key, and its
// seed written back (WriteSeedFile) reads as the same key. Seeded with a
// file WriteSeedFile wrote, and the same seed in a credentials file's
// decorated block.
func FuzzReadSeedFile(f *testing.F) {
	kp, err := natsauth.NewUserKey(rand.NewChaCha8([32]byte{7}))
	if err != nil {
		f.Fatal(err)
	}
	path := filepath.Join(f.TempDir(), "user.nk")
	if err := natsauth.WriteSeedFile(path, kp); err != nil {
		f.Fatal(err)
	}
	written, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	seed := strings.TrimSpace(string(written))
	f.Add(written)
	f.Add([]byte("-----BEGIN NATS USER JWT-----\neyJ0eXAiOiJKV1QifQ.e30.sig\n------END NATS USER JWT------\n\n" +
		"************************* IMPORTANT *************************\n\n" +
		"-----BEGIN USER NKEY SEED-----\n" + seed + "\n------END USER NKEY SEED------\n"))
	f.Add([]byte("S" + strings.Repeat("A", 57)))
	f.Add([]byte(strings.Replace(seed, "SU", "SO", 1))) // an operator seed
	f.Add(bytes.Repeat([]byte("S"), 4097))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "user.nk")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		kp, err := natsauth.ReadSeedFile(path)
		if err != nil {
			if kp != nil || !errors.Is(err, natsauth.ErrSecret) {
				t.Fatalf("refusal %v (key %v) does not wrap ErrSecret or returned a key", err, kp)
			}
			return
		}
		pub, err := kp.PublicKey()
		if err != nil || !strings.HasPrefix(pub, "U") || len(b) > 4096 {
			t.Fatalf("accepted %d bytes as key %q (%v)", len(b), pub, err)
		}
		again := filepath.Join(dir, "again.nk")
		if err := natsauth.WriteSeedFile(again, kp); err != nil {
			t.Fatalf("an accepted key does not write: %v", err)
		}
		back, err := natsauth.ReadSeedFile(again)
		if err != nil {
			t.Fatalf("its seed file does not read back: %v", err)
		}
		if p, err := back.PublicKey(); err != nil || p != pub {
			t.Fatalf("read back as %q (%v), want %q", p, err, pub)
		}
	})
}
