package history

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

// FuzzRead: no history file makes Read panic, and Read agrees with
// Decode line by line: it returns the records of the complete lines in
// order until the first line Decode refuses (or one over MaxLine), which
// is an error wrapping ErrRecord and naming that line's number; a last
// line without its newline is reported torn and skipped. Seeded with a
// real history (Writer's output) and its torn and damaged forms.
func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	for _, r := range []Record{
		{T: t0, Ev: EvStart, PID: 7, SkewNS: -int64(time.Minute), State: &State{Seq: 2, Outbox: []uint64{2}, Installed: 1}},
		{T: t0.Add(time.Millisecond), Ev: EvStaged, Seq: 3, Round: 2, BaseVersion: 1},
		{T: t0.Add(2 * time.Millisecond), Ev: EvInstalled, Version: 3, Round: 2, Model: "ab"},
		{T: t0.Add(3 * time.Millisecond), Ev: EvStop, State: &State{RefusedModels: map[string]int{"fetch": 2}}},
	} {
		b, err := jsonLine(r)
		if err != nil {
			f.Fatal(err)
		}
		buf.Write(b)
	}
	h := buf.Bytes()
	f.Add(h)
	f.Add(h[:len(h)-1])                                      // a torn last line
	f.Add(h[:len(h)-20])                                     // torn mid-record
	f.Add(bytes.Replace(h, []byte("\n"), []byte("\r\n"), 1)) // CRLF
	f.Add(append(bytes.Clone(h), "\n"...))                   // an empty line
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, torn, err := Read(bytes.NewReader(b))
		var want []Record
		var wantErr int // the line number of the expected error, 0 for none
		lines := bytes.SplitAfter(b, []byte("\n"))
		wantTorn := false
		for i, line := range lines {
			if len(line) > MaxLine {
				wantErr = i + 1
				break
			}
			if !bytes.HasSuffix(line, []byte("\n")) {
				wantTorn = len(line) > 0
				break
			}
			r, derr := Decode(bytes.TrimSuffix(line, []byte("\n")))
			if derr != nil {
				wantErr = i + 1
				break
			}
			want = append(want, *r)
		}
		if wantErr != 0 {
			if err == nil || !errors.Is(err, ErrRecord) || !strings.HasPrefix(err.Error(), fmt.Sprintf("line %d: ", wantErr)) || torn {
				t.Fatalf("Read: %v (torn %v), want an ErrRecord on line %d", err, torn, wantErr)
			}
		} else if err != nil || torn != wantTorn {
			t.Fatalf("Read: %v (torn %v), want torn %v", err, torn, wantTorn)
		}
		if len(recs) != len(want) || len(want) > 0 && !reflect.DeepEqual(recs, want) {
			t.Fatalf("Read returned %d records, Decode line by line %d", len(recs), len(want))
		}
	})
}

// countingReader is an endless run of 'a' that counts what it gave.
type countingReader struct{ n int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	c.n += int64(len(p))
	return len(p), nil
}

// TestReadLineCap: a line over MaxLine is refused without reading on: an
// endless line costs Read at most MaxLine and a buffer more.
func TestReadLineCap(t *testing.T) {
	c := &countingReader{}
	_, _, err := Read(c)
	if !errors.Is(err, ErrRecord) || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("an endless line: %v, want ErrRecord on line 1", err)
	}
	if c.n > MaxLine+2*64<<10 {
		t.Fatalf("read %d bytes of an endless line (cap %d)", c.n, MaxLine)
	}
	_, _, err = Read(io.MultiReader(strings.NewReader(strings.Repeat(" ", MaxLine)), strings.NewReader("\n")))
	if !errors.Is(err, ErrRecord) {
		t.Fatalf("a line of %d bytes and its newline: %v, want ErrRecord", MaxLine, err)
	}
}
