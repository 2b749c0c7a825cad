package report

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/sim/engine"
)

// dirNames lists dir's entries (a temporary file atomicfile left would
// show).
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// createMode is the mode os.Create gives a new file in dir (0666 less
// the umask): the mode the report files always had.
func createMode(t *testing.T, dir string) os.FileMode {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "reference"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	st, err := os.Stat(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(f.Name()); err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// TestWriteFile: a writer that fails part-way leaves nothing under the
// file's name (or its earlier content, whole) and no temporary file; a
// writer that succeeds replaces the file with exactly what it wrote, at
// os.Create's mode.
func TestWriteFile(t *testing.T) {
	errDisk := errors.New("disk on fire")
	halfThenFail := func(w io.Writer) error {
		if _, err := io.WriteString(w, "first half,"); err != nil {
			return err
		}
		return errDisk
	}
	writes := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	cases := []struct {
		name    string
		earlier string // "": no file before
		fn      func(io.Writer) error
		want    string // the file after ("": none)
		wantErr error
	}{
		{"fails part-way, no file before", "", halfThenFail, "", errDisk},
		{"fails part-way over an earlier file", "earlier, whole", halfThenFail, "earlier, whole", errDisk},
		// past the writer's buffer: part of it is in the temporary file
		// when the writer fails
		{"fails after 200 KiB", "earlier, whole", func(w io.Writer) error {
			if _, err := w.Write(make([]byte, 200<<10)); err != nil {
				return err
			}
			return errDisk
		}, "earlier, whole", errDisk},
		{"replaces an earlier file", "earlier, longer than the new", writes("new"), "new", nil},
		{"empty", "earlier", writes(""), "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			mode := createMode(t, dir)
			path := filepath.Join(dir, "runs.csv")
			if c.earlier != "" {
				if err := os.WriteFile(path, []byte(c.earlier), 0o666); err != nil {
					t.Fatal(err)
				}
			}
			err := writeFile(path, c.fn)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) || !strings.Contains(err.Error(), "write runs.csv: ") {
					t.Fatalf("writeFile: %v; want %v naming runs.csv", err, c.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			got, rerr := os.ReadFile(path)
			switch {
			case c.wantErr != nil && c.earlier == "":
				if !errors.Is(rerr, os.ErrNotExist) {
					t.Fatalf("a failed write left %q under the file's name", got)
				}
			case rerr != nil || string(got) != c.want && !(c.want == "" && len(got) == 0):
				t.Fatalf("file holds %q (%v), want %q", got, rerr, c.want)
			}
			if names := dirNames(t, dir); len(names) > 1 || len(names) == 1 && names[0] != "runs.csv" {
				t.Fatalf("directory holds %v: a temporary file was left", names)
			}
			if c.wantErr == nil {
				if st, err := os.Stat(path); err != nil || st.Mode().Perm() != mode {
					t.Fatalf("mode %v (%v), want os.Create's %v", st.Mode().Perm(), err, mode)
				}
			}
		})
	}
}

// TestWriteFilesFailure: a document whose JSON fails to encode (a NaN
// measure) makes WriteFiles fail without touching results.json: an
// earlier one stays whole, and without one there is none (os.Create
// left an empty file, truncating an earlier one).
func TestWriteFilesFailure(t *testing.T) {
	doc := compare(t, smallEnv(t), engine.Inflate, "fgd")
	doc.Runs[0].Measures = map[string]float64{"failure_rate": math.NaN()}
	for _, earlier := range []string{"", `{"schema":"edgesched.sim/v1"}`} {
		dir := t.TempDir()
		path := filepath.Join(dir, "results.json")
		if earlier != "" {
			if err := os.WriteFile(path, []byte(earlier), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		err := doc.WriteFiles(dir)
		if err == nil || !strings.Contains(err.Error(), "write results.json: ") || !strings.Contains(err.Error(), "NaN") {
			t.Fatalf("WriteFiles with a NaN measure: %v", err)
		}
		got, rerr := os.ReadFile(path)
		if earlier == "" && !errors.Is(rerr, os.ErrNotExist) {
			t.Fatalf("a failed write left results.json (%d bytes: %q, %v)", len(got), got, rerr)
		}
		if earlier != "" && string(got) != earlier {
			t.Fatalf("results.json after the failure: %q (%v), want the earlier %q", got, rerr, earlier)
		}
		if names := dirNames(t, dir); len(names) > 1 || earlier == "" && len(names) != 0 {
			t.Fatalf("directory holds %v", names)
		}
	}
}

// TestWriteFilesContent: each file WriteFiles writes holds exactly what
// its writer streams (the bytes os.Create's file got), at os.Create's
// mode, and rewriting a directory replaces every file with the same
// bytes.
func TestWriteFilesContent(t *testing.T) {
	doc := compare(t, smallEnv(t), engine.Inflate, "random-fit", "fgd")
	dir := t.TempDir()
	mode := createMode(t, dir)
	files := map[string]func(io.Writer) error{
		"results.json": doc.WriteJSON, "runs.csv": doc.writeRunsCSV, "failures.csv": doc.writeFailuresCSV,
		"curve.csv": doc.writeCurveCSV, "series.csv": doc.writeSeriesCSV,
	}
	for range 2 {
		if err := doc.WriteFiles(dir); err != nil {
			t.Fatal(err)
		}
		var want []string
		for name, fn := range files {
			want = append(want, name)
			var buf bytes.Buffer
			if err := fn(&buf); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || buf.Len() == 0 || !bytes.Equal(got, buf.Bytes()) {
				t.Fatalf("%s: %d bytes (%v), want the writer's %d", name, len(got), err, buf.Len())
			}
			if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Mode().Perm() != mode {
				t.Fatalf("%s: mode %v (%v), want os.Create's %v", name, st.Mode().Perm(), err, mode)
			}
		}
		slices.Sort(want)
		if got := dirNames(t, dir); !slices.Equal(got, want) {
			t.Fatalf("directory holds %v, want %v", got, want)
		}
	}
}
