package onnx

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadFileContext: a cancelled context stops the read (edgectl model
// import passes its command's, so Ctrl-C ends it); a regular file that is
// not ONNX is refused with ErrFormat naming the file.
func TestReadFileContext(t *testing.T) {
	small := filepath.Join(t.TempDir(), "small.onnx")
	if err := os.WriteFile(small, []byte("not onnx"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ReadFileContext(ctx, small); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadFileContext(cancelled): %v, want context.Canceled", err)
	}
	if _, err := ReadFileContext(context.Background(), small); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), small) {
		t.Fatalf("ReadFileContext(not onnx): %v, want ErrFormat naming the file", err)
	}
}
