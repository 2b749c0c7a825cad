package v1

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestGeneratedCode regenerates zz_generated.deepcopy.go with the pinned
// deepcopy-gen (go.mod's tool) into a copy of the package and requires
// the committed file to be the same: the deep copy cannot drift from the
// type.
func TestGeneratedCode(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: regenerating builds deepcopy-gen")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH to run the generator: %v", err)
	}
	want, err := os.ReadFile("zz_generated.deepcopy.go")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// --output-file names a file in the package directory: a second name
	// there, removed at the end (deepcopy-gen reads no generated file:
	// their build tag excludes them)
	name := "zz_generated.deepcopy.check.go"
	t.Cleanup(func() { _ = os.Remove(name) })
	cmd := exec.CommandContext(ctx, gobin, "tool", "deepcopy-gen", "--output-file", name, "--go-header-file", os.DevNull, ".")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deepcopy-gen: %v\n%s", err, b)
	}
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("zz_generated.deepcopy.go is not what deepcopy-gen generates now: run `make generate`")
	}
}
