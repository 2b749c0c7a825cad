package history

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	clock := t0
	w, err := Create(path, func() time.Time { clock = clock.Add(time.Millisecond); return clock })
	if err != nil {
		t.Fatal(err)
	}
	in := []Record{
		{Ev: EvStart, PID: 7, SkewNS: -int64(time.Minute), State: &State{Seq: 2, Outbox: []uint64{2}, Installed: 1}},
		{Ev: EvStaged, Seq: 3, Round: 1, BaseVersion: 1},
		{Ev: EvDone, Seq: 2},
		{Ev: EvInstalled, Version: 2, Round: 1, Model: "abc"},
		{Ev: EvStop, State: &State{Seq: 3, RefusedModels: map[string]int{"fetch": 1}}},
	}
	for _, r := range in {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Write(Record{Ev: "bogus"}); !errors.Is(err, ErrRecord) {
		t.Fatalf("writing a bad record: %v, want ErrRecord", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out, torn, err := ReadFile(path)
	if err != nil || torn {
		t.Fatalf("ReadFile: %v (torn %v)", err, torn)
	}
	if len(out) != len(in) {
		t.Fatalf("%d records back, wrote %d", len(out), len(in))
	}
	for i := range out {
		// the clock stamped record i at t0 + (i+1) ms
		if want := t0.Add(time.Duration(i+1) * time.Millisecond); !out[i].T.Equal(want) || out[i].Ev != in[i].Ev {
			t.Errorf("record %d: %+v, want event %s at %v", i, out[i], in[i].Ev, want)
		}
	}
	if out[0].State.Outbox[0] != 2 || out[4].State.RefusedModels["fetch"] != 1 || out[3].Model != "abc" {
		t.Errorf("fields lost: %+v %+v %+v", out[0].State, out[4].State, out[3])
	}
}

func TestReadRefusals(t *testing.T) {
	good := `{"t":"2025-01-02T03:04:05Z","ev":"staged","seq":1}` + "\n"
	cases := []struct {
		name    string
		in      string
		records int
		torn    bool
		err     string // substring; "" for no error
	}{
		{"empty", "", 0, false, ""},
		{"one record", good, 1, false, ""},
		{"torn last line", good + `{"t":"2025-01-02T03:04:05Z","ev":"sta`, 1, true, ""},
		{"unknown field", `{"t":"2025-01-02T03:04:05Z","ev":"done","seq":1,"x":1}` + "\n", 0, false, "line 1"},
		{"unknown event", good + `{"t":"2025-01-02T03:04:05Z","ev":"boom"}` + "\n", 1, false, `line 2: history: bad record: unknown event "boom"`},
		{"no time", `{"ev":"done","seq":1}` + "\n", 0, false, "no time"},
		{"staged without seq", `{"t":"2025-01-02T03:04:05Z","ev":"staged"}` + "\n", 0, false, "staged without seq"},
		{"start without state", `{"t":"2025-01-02T03:04:05Z","ev":"start"}` + "\n", 0, false, "start without state"},
		{"trailing data", `{"t":"2025-01-02T03:04:05Z","ev":"done","seq":1} {}` + "\n", 0, false, "trailing data"},
		{"not JSON", "hello\n", 0, false, "line 1"},
		{"too long", `{"t":"` + strings.Repeat("x", MaxLine+10) + "\n", 0, false, "longer than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			recs, torn, err := Read(strings.NewReader(tc.in))
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Read: %v, want error %q", err, tc.err)
			}
			if len(recs) != tc.records || torn != tc.torn {
				t.Fatalf("%d records (torn %v), want %d (torn %v)", len(recs), torn, tc.records, tc.torn)
			}
		})
	}
}

// FuzzDecode: no input makes Decode panic, and whatever it accepts
// encodes and decodes to the same record.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"t":"2025-01-02T03:04:05Z","ev":"staged","seq":1,"round":2,"base_version":1}`,
		`{"t":"2025-01-02T03:04:05Z","ev":"start","pid":9,"skew_ns":-60000000000,"state":{"seq":2,"outbox":[2],"installed":1,"dropped_full":0,"published":1}}`,
		`{"t":"2025-01-02T03:04:05Z","ev":"installed","version":3,"round":2,"model":"ab"}`,
		`{"t":"2025-01-02T03:04:05Z","ev":"stop","state":{"seq":0,"outbox":null,"installed":0,"dropped_full":0,"refused_models":{"fetch":2},"published":0}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := Decode(line)
		if err != nil {
			if !errors.Is(err, ErrRecord) {
				t.Fatalf("error %v does not wrap ErrRecord", err)
			}
			return
		}
		b, err := jsonLine(*r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(bytes.TrimSuffix(b, []byte("\n")))
		if err != nil {
			t.Fatalf("re-encoded record refused: %v (%s)", err, b)
		}
		if back.Ev != r.Ev || back.Seq != r.Seq || back.Version != r.Version || !back.T.Equal(r.T) {
			t.Fatalf("round trip changed the record: %+v -> %+v", r, back)
		}
	})
}
