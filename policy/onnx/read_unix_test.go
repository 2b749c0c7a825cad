//go:build unix

package onnx

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgesched/edgesched/internal/boundedio"
)

// TestReadFileBounded: ReadFile reads regular files only, within
// MaxFileBytes. A FIFO used to block it in open until a writer came
// (and Ctrl-C did nothing: no context); now it is refused from its mode
// without being opened. A file over the cap is refused from its size.
func TestReadFileBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "m.onnx")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadFile(fifo); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, boundedio.ErrNotRegular) || !strings.Contains(err.Error(), "named pipe") {
			t.Fatalf("ReadFile(FIFO): %v, want boundedio.ErrNotRegular naming a named pipe", err)
		}
	case <-time.After(time.Minute): // a failsafe, not a wait: the refusal is immediate
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil { // let the blocked open return
			f.Close()
		}
		<-done
		t.Fatal("ReadFile(FIFO) blocked")
	}

	big := filepath.Join(dir, "big.onnx")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxFileBytes + 1); err != nil { // sparse
		t.Fatal(err)
	}
	f.Close()
	if _, err := ReadFile(big); !errors.Is(err, boundedio.ErrTooLarge) {
		t.Fatalf("ReadFile(%d bytes): %v, want boundedio.ErrTooLarge", MaxFileBytes+1, err)
	}

}
