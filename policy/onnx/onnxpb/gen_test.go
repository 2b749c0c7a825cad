package onnxpb

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestGeneratedCode regenerates onnxpb.pb.go from onnxpb.proto with the
// pinned generators (the go:generate line of doc.go, into a temporary
// directory) and requires the committed file to be the same: the
// generated code cannot drift from its schema or its generator.
func TestGeneratedCode(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: regenerating builds protoc-gen-go")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH to run the generator: %v", err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "run", "../../../internal/protogen", "-I", ".",
		"-opt", "paths=source_relative", "-out", dir, "onnxpb.proto")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "onnxpb.pb.go"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("onnxpb.pb.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("onnxpb.pb.go is not what the pinned generators make of onnxpb.proto: run make onnx-generate")
	}
}
