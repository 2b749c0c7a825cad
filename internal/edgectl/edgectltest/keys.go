package edgectltest

import (
	"path/filepath"
	"strings"
	"testing"
)

// KeyDir makes a key pair with the CLI and returns the directory.
func KeyDir(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "keys")
	out, _, err := Run(t, "model", "keygen", "--dir", dir, "--name", name)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "key ed25519:") {
		t.Fatalf("keygen output:\n%s", out)
	}
	return dir
}
