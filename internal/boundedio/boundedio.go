package boundedio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Errors, each wrapped with the file's name and the cap.
var (
	// ErrTooLarge: the input has more bytes than its cap.
	ErrTooLarge = errors.New("input exceeds its size limit")
	// ErrTooManyRows: the input has more rows than its cap.
	ErrTooManyRows = errors.New("input exceeds its row limit")
	// ErrNotRegular: the path names a FIFO, device, socket or directory.
	ErrNotRegular = errors.New("not a regular file")
)

// Limits are an input's caps.
type Limits struct {
	// MaxBytes caps the input's size; it must be > 0.
	MaxBytes int64
	// MaxRows caps the rows a row reader takes (0: no row cap).
	MaxRows int
}

// CheckRows refuses row n (counting from 1) of name when it is beyond
// MaxRows.
func (l Limits) CheckRows(name string, n int) error {
	if l.MaxRows > 0 && n > l.MaxRows {
		return fmt.Errorf("%s: %w: more than %d rows", name, ErrTooManyRows, l.MaxRows)
	}
	return nil
}

// Stat refuses a path that is not a regular file or is larger than max
// bytes, without opening it.
func Stat(path string, max int64) (fs.FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err // *PathError names the path
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s): edgesched reads inputs from regular files, or stdin as '-' where a command says so", path, ErrNotRegular, kind(st.Mode()))
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%s: %w: %d bytes, the limit is %d", path, ErrTooLarge, st.Size(), max)
	}
	return st, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return m.Type().String()
}

// File is an open input file read within its cap.
type File struct {
	f *os.File
	r *Reader
}

// Open opens the regular file at path for reading at most max bytes
// (refused first from its size, then while reading should it grow), each
// read checking ctx.
func Open(ctx context.Context, path string, max int64) (*File, error) {
	if _, err := Stat(path, max); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	// the path may have been replaced between Stat and Open
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%s: %w", path, ErrNotRegular)
		}
		return nil, err
	}
	return &File{f: f, r: NewReader(ctx, f, path, max)}, nil
}

// Read reads within the cap (ErrTooLarge beyond it) and the context.
func (f *File) Read(p []byte) (int, error) { return f.r.Read(p) }

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// ReadFile reads the regular file at path whole, at most max bytes.
func ReadFile(ctx context.Context, path string, max int64) ([]byte, error) {
	f, err := Open(ctx, path, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// StatOrPipe is Stat for an input that may also be a pipe or a device
// (ReadFileOrPipe): a regular file over max, a directory or a socket is
// refused.
func StatOrPipe(path string, max int64) (fs.FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	switch {
	case st.Mode().IsRegular():
		return Stat(path, max)
	case st.IsDir() || st.Mode()&fs.ModeSocket != 0:
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, kind(st.Mode()))
	}
	return st, nil
}

// ReadFileOrPipe is ReadFile for an input a user may hand over as a pipe
// or a device (a process substitution, `<(sops -d creds)`, /dev/stdin,
// /dev/null): a regular file is refused from its size as ReadFile does,
// a directory or socket is refused, and anything else is read within max
// bytes and ctx (a pipe nobody writes to blocks the open until ctx's
// owner gives up on the process, as it would for any reader).
func ReadFileOrPipe(ctx context.Context, path string, max int64) ([]byte, error) {
	st, err := StatOrPipe(path, max)
	if err != nil {
		return nil, err
	}
	if st.Mode().IsRegular() {
		return ReadFile(ctx, path, max)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(ctx, f, path, max)
}

// Reader reads at most a cap of bytes from its source: a read beyond it
// fails with ErrTooLarge (never a silent end of input), and every read
// first checks its context.
type Reader struct {
	ctx  context.Context
	src  io.Reader
	name string
	left int64 // bytes still allowed
	max  int64
}

// NewReader caps src (named name in errors) at max bytes under ctx.
func NewReader(ctx context.Context, src io.Reader, name string, max int64) *Reader {
	return &Reader{ctx: ctx, src: src, name: name, left: max, max: max}
}

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", r.name, err)
	}
	if r.left <= 0 {
		// one byte more tells a full input from one over the cap
		var one [1]byte
		n, err := r.src.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("%s: %w: more than %d bytes", r.name, ErrTooLarge, r.max)
		}
		return 0, err
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.src.Read(p)
	r.left -= int64(n)
	return n, err
}

// ReadAll reads src (stdin, or another stream that cannot be refused)
// whole, at most max bytes, returning at once with the context's error
// when ctx ends even while a read blocks (see the package comment).
func ReadAll(ctx context.Context, src io.Reader, name string, max int64) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(NewReader(ctx, src, name, max))
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("read %s: %w", name, ctx.Err())
	}
}
