package v1

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestGeneratedCode regenerates every generated file of the args' two
// packages with the pinned generators (go.mod's tools: deepcopy-gen,
// conversion-gen, defaulter-gen) under another name and requires the
// committed file to be the same: the deep copies, the conversions and
// the defaults' registration cannot drift from the types.
func TestGeneratedCode(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: regenerating builds the code generators")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH to run the generators: %v", err)
	}
	for _, tc := range []struct{ dir, tool, file string }{
		{".", "deepcopy-gen", "zz_generated.deepcopy.go"},
		{".", "conversion-gen", "zz_generated.conversion.go"},
		{".", "defaulter-gen", "zz_generated.defaults.go"},
		{"..", "deepcopy-gen", "zz_generated.deepcopy.go"},
	} {
		t.Run(filepath.Join(tc.dir, tc.file), func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(tc.dir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			// --output-file names a file in the package directory: a
			// second name there, removed at the end (the generators read
			// no generated file: their build tag excludes them)
			name := "zz_generated.check.go"
			t.Cleanup(func() { _ = os.Remove(filepath.Join(tc.dir, name)) })
			cmd := exec.CommandContext(ctx, gobin, "tool", tc.tool, "--output-file", name, "--go-header-file", os.DevNull, ".")
			cmd.Dir = tc.dir
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", tc.tool, err, b)
			}
			got, err := os.ReadFile(filepath.Join(tc.dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s is not what %s generates now: run `make generate`", tc.file, tc.tool)
			}
		})
	}
}
