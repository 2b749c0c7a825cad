//go:build unix

package boundedio

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadFile: a regular file within its limit is read whole; one byte
// over, refused from its size before a byte is read (a sparse 1 GiB file
// costs nothing); a FIFO, a character device and a directory are refused
// without being opened (opening a FIFO would block until a writer came).
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(context.Background(), ok, 5); err != nil || string(b) != "12345" {
		t.Fatalf("file at its limit: %q %v", b, err)
	}
	if _, err := ReadFile(context.Background(), ok, 4); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "5 bytes, the limit is 4") {
		t.Fatalf("one byte over: %v", err)
	}
	big := filepath.Join(dir, "big")
	f, _ := os.Create(big)
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := ReadFile(context.Background(), big, 1<<20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("1 GiB: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero", dir} {
		done := make(chan error, 1)
		go func() { _, err := ReadFile(context.Background(), p, 1<<20); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), p) {
				t.Fatalf("%s: %v, want ErrNotRegular naming it", p, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: ReadFile blocked", p)
		}
	}
	if _, err := ReadFile(context.Background(), filepath.Join(dir, "none"), 10); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestReader: a stream longer than the limit fails with ErrTooLarge (not
// a silent end), a stream of exactly the limit is read whole, and a
// cancelled context stops reading.
func TestReader(t *testing.T) {
	b, err := io.ReadAll(NewReader(context.Background(), strings.NewReader("abcdef"), "s", 6))
	if err != nil || string(b) != "abcdef" {
		t.Fatalf("at the limit: %q %v", b, err)
	}
	if _, err := io.ReadAll(NewReader(context.Background(), strings.NewReader("abcdefg"), "s", 6)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := io.ReadAll(NewReader(ctx, strings.NewReader("abc"), "s", 6)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestReadAllCancel: a read blocked on a pipe nobody writes returns with
// the context's error as soon as the context ends; a pipe that is closed
// is read whole.
func TestReadAllCancel(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := ReadAll(ctx, r, "stdin", 10); done <- err }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled read: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadAll did not return when its context ended")
	}
	r2, w2, _ := os.Pipe()
	w2.WriteString("hello")
	w2.Close()
	if b, err := ReadAll(context.Background(), r2, "stdin", 10); err != nil || string(b) != "hello" {
		t.Fatalf("closed pipe: %q %v", b, err)
	}
	r2.Close()
}

func TestCheckRows(t *testing.T) {
	l := Limits{MaxBytes: 1, MaxRows: 3}
	if l.CheckRows("f", 3) != nil || !errors.Is(l.CheckRows("f", 4), ErrTooManyRows) || (Limits{}).CheckRows("f", 1e9) != nil {
		t.Fatal("CheckRows")
	}
}
