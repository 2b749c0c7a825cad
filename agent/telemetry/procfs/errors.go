package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// ErrMalformed is wrapped by every parse error: the file exists but its
// content is not what the kernel writes.
var ErrMalformed = errors.New("procfs: malformed file")

// ParseError names the file and line (1-based; 0 when the problem is the
// file as a whole, e.g. a missing required field) of malformed input.
type ParseError struct {
	File string
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("procfs: %s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("procfs: %s: %s", e.File, e.Msg)
}

// Unwrap makes errors.Is(err, ErrMalformed) hold.
func (e *ParseError) Unwrap() error { return ErrMalformed }

func perr(file string, line int, format string, args ...any) error {
	return &ParseError{File: file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// maxFileSize bounds what is read from one file: the largest file read
// here, /proc/stat, is a few KiB per CPU (its intr line grows with the
// interrupt count); 4 MiB covers thousands of CPUs.
const maxFileSize = 4 << 20

// readFile reads the whole of path into buf (reused; grown as needed).
// /proc files report size 0, so it reads until EOF. A missing file's
// error satisfies errors.Is(err, fs.ErrNotExist).
func readFile(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return buf[:0], err
	}
	defer f.Close()
	buf = buf[:0]
	if cap(buf) < 4096 {
		buf = make([]byte, 0, 4096)
	}
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= maxFileSize {
				return buf, perr(path, 0, "larger than %d bytes", maxFileSize)
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				return buf, nil
			}
			return buf, fmt.Errorf("read %s: %w", path, err)
		}
		if n == 0 {
			return buf, nil
		}
	}
}

// lines calls fn for every line of b (without the newline), numbered from
// 1; it stops at the first error. A final line without a newline counts.
func lines(b []byte, fn func(n int, line []byte) error) error {
	n := 0
	for len(b) > 0 {
		n++
		i := bytes.IndexByte(b, '\n')
		var line []byte
		if i < 0 {
			line, b = b, nil
		} else {
			line, b = b[:i], b[i+1:]
		}
		if err := fn(n, line); err != nil {
			return err
		}
	}
	return nil
}

// fields splits line at runs of spaces and tabs into dst (reused).
func fields(dst [][]byte, line []byte) [][]byte {
	dst = dst[:0]
	start := -1
	for i, c := range line {
		if c == ' ' || c == '\t' {
			if start >= 0 {
				dst = append(dst, line[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		dst = append(dst, line[start:])
	}
	return dst
}

// parseUint parses a decimal unsigned integer (digits only).
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var x uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if x > (^uint64(0)-d)/10 {
			return 0, false
		}
		x = x*10 + d
	}
	return x, true
}

// parseInt parses a decimal signed integer.
func parseInt(b []byte) (int64, bool) {
	x, err := strconv.ParseInt(string(b), 10, 64)
	return x, err == nil
}

// parseFloat parses a finite, non-negative decimal such as "0.27".
func parseFloat(b []byte) (float64, bool) {
	if len(b) == 0 || len(b) > 32 {
		return 0, false
	}
	for _, c := range b {
		if (c < '0' || c > '9') && c != '.' {
			return 0, false // refuses signs, exponents, inf, nan
		}
	}
	x, err := strconv.ParseFloat(string(b), 64)
	return x, err == nil
}
