package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// Write replaces path with b, mode perm less the process's umask (as
// os.WriteFile), atomically (see the package doc). On error the target is
// unchanged and no temporary file is left.
func Write(path string, b []byte, perm os.FileMode) error {
	return WriteFunc(path, perm, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// WriteFunc replaces path with what fn writes, as Write does, streaming
// to the temporary file (buffered): nothing is held in memory, so the
// file may be larger than memory. When fn fails the target is unchanged
// and no temporary file is left, and the error is fn's.
func WriteFunc(path string, perm os.FileMode, fn func(w io.Writer) error) error {
	tmp, err := createTemp(path, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename: a no-op
	bw := bufio.NewWriterSize(tmp, 64<<10)
	if err := fn(bw); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// createTemp creates a new file beside path (.NAME.tmpRANDOM) with mode
// perm, which the kernel reduces by the umask (os.CreateTemp's 0600 and a
// chmod would give exactly perm, ignoring the umask, and a chmod fails on
// file systems without modes). The random names are not an experiment's:
// the source is math/rand/v2's own.
func createTemp(path string, perm os.FileMode) (*os.File, error) {
	dir, base := filepath.Split(path)
	for range 100 {
		name := filepath.Join(dir, "."+base+".tmp"+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("no unused temporary name beside %s", path)
}
