package carbon

import (
	"errors"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawCSV reads a data file the plain way (split lines and commas), for
// reference values independent of Parse: the hour's timestamp string and
// its value, or ok=false when empty.
func rawCSV(t *testing.T, grid string) map[string]float64 {
	t.Helper()
	b, err := os.ReadFile("data/" + grid + "-2022.csv")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
		f := strings.Split(line, ",")
		if f[1] == "" {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		out[f[0]] = v
	}
	return out
}

func hourAt(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestGapRule: the embedded files' real gaps are filled or refused as the
// package documents. Expected values are computed here from the raw CSV
// rows around each gap: a single missing hour is the mean of its
// neighbours; the k-th of n missing hours is a + (b − a)·k/(n+1).
func TestGapRule(t *testing.T) {
	cases := []struct {
		grid, before, after string
		missing             []string
	}{
		{"CISO", "2022-01-05T09:00:00Z", "2022-01-05T11:00:00Z", []string{"2022-01-05T10:00:00Z"}},
		{"CISO", "2022-05-17T17:00:00Z", "2022-05-17T19:00:00Z", []string{"2022-05-17T18:00:00Z"}},
		{"MISO", "2022-06-09T19:00:00Z", "2022-06-09T22:00:00Z", []string{"2022-06-09T20:00:00Z", "2022-06-09T21:00:00Z"}},
		{"PJM", "2022-11-07T04:00:00Z", "2022-11-07T06:00:00Z", []string{"2022-11-07T05:00:00Z"}},
	}
	for _, c := range cases {
		raw := rawCSV(t, c.grid)
		s, err := Load(c.grid)
		if err != nil {
			t.Fatal(err)
		}
		a, b := raw[c.before], raw[c.after]
		for k, m := range c.missing {
			if _, ok := raw[m]; ok {
				t.Fatalf("%s %s: the CSV has a value; the case is wrong", c.grid, m)
			}
			want := a + (b-a)*float64(k+1)/float64(len(c.missing)+1)
			w, err := s.Window(hourAt(m), 1)
			if err != nil {
				t.Fatalf("%s %s: %v", c.grid, m, err)
			}
			if math.Abs(w[0]-want) > 1e-9 {
				t.Errorf("%s %s = %v, want %v (between %v and %v)", c.grid, m, w[0], want, a, b)
			}
		}
	}
	// PJM's 22 missing hours on 13-14 March are longer than MaxFillHours:
	// a window touching them is refused, the hours just outside are not.
	pjm, err := Load("PJM")
	if err != nil {
		t.Fatal(err)
	}
	raw := rawCSV(t, "PJM")
	refused := []struct {
		start string
		hours int
	}{{"2022-03-13T07:00:00Z", 1}, {"2022-03-14T04:00:00Z", 1}, {"2022-03-12T00:00:00Z", 48}, {"2022-03-01T00:00:00Z", 24 * 30}}
	for _, r := range refused {
		if _, err := pjm.Window(hourAt(r.start), r.hours); !errors.Is(err, ErrGap) || !strings.Contains(err.Error(), "22 h from 2022-03-13T07:00Z") {
			t.Errorf("PJM window %d h from %s: %v, want ErrGap naming the 22 h gap", r.hours, r.start, err)
		}
	}
	w, err := pjm.Window(hourAt("2022-03-12T07:00:00Z"), 24)
	if err != nil || w[23] != raw["2022-03-13T06:00:00Z"] || w[0] != raw["2022-03-12T07:00:00Z"] {
		t.Errorf("PJM day before the gap: %v (last %v, want %v)", err, w[len(w)-1], raw["2022-03-13T06:00:00Z"])
	}
	if w, err := pjm.Window(hourAt("2022-03-14T05:00:00Z"), 1); err != nil || w[0] != raw["2022-03-14T05:00:00Z"] {
		t.Errorf("PJM hour after the gap: %v %v", w, err)
	}
	want := []Gap{{Start: hourAt("2022-03-13T07:00:00Z"), Hours: 22}, {Start: hourAt("2022-11-07T05:00:00Z"), Hours: 1, Filled: true}}
	if len(pjm.Gaps) != 2 || pjm.Gaps[0] != want[0] || pjm.Gaps[1] != want[1] {
		t.Errorf("PJM gaps %v, want %v", pjm.Gaps, want)
	}
}

// TestEveryGridMatchesItsFile: every hour of every grid equals the raw CSV
// where the CSV has a value, and only the documented gaps differ.
func TestEveryGridMatchesItsFile(t *testing.T) {
	grids := Grids()
	if strings.Join(grids, ",") != "AZPS,BPAT,CISO,ERCO,MISO,NYIS,PJM,SOCO" {
		t.Fatalf("grids %v", grids)
	}
	missing := map[string]int{"CISO": 3, "MISO": 3, "PJM": 23}
	for _, g := range grids {
		raw := rawCSV(t, g)
		s, err := Load(g)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Values) != Hours || len(raw) != Hours-missing[g] {
			t.Fatalf("%s: %d values, %d in the CSV", g, len(s.Values), len(raw))
		}
		var gapHours int
		for _, gp := range s.Gaps {
			gapHours += gp.Hours
		}
		if gapHours != missing[g] {
			t.Errorf("%s: gaps %v cover %d h, the CSV misses %d", g, s.Gaps, gapHours, missing[g])
		}
		for h, v := range s.Values {
			ts := Year0.Add(time.Duration(h) * time.Hour).Format(time.RFC3339)
			if r, ok := raw[ts]; ok && r != v {
				t.Fatalf("%s %s = %v, CSV %v", g, ts, v, r)
			}
		}
	}
}

// TestLocalWindow: a local clock at UTC−7 starts 7 hours later in UTC.
func TestLocalWindow(t *testing.T) {
	s, err := Load("CISO")
	if err != nil {
		t.Fatal(err)
	}
	raw := rawCSV(t, "CISO")
	w, err := s.LocalWindow(time.Date(2022, 6, 1, 0, 0, 0, 0, time.UTC), -7, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, ts := range []string{"2022-06-01T07:00:00Z", "2022-06-01T08:00:00Z", "2022-06-01T09:00:00Z"} {
		if w[i] != raw[ts] {
			t.Errorf("hour %d = %v, want %s's %v", i, w[i], ts, raw[ts])
		}
	}
}

func TestParseRefuses(t *testing.T) {
	row := func(h int, v string) string {
		return Year0.Add(time.Duration(h)*time.Hour).Format(time.RFC3339) + "," + v + "\n"
	}
	full := func(edit func(h int) string) string {
		var b strings.Builder
		b.WriteString(header + "\n")
		for h := range Hours {
			b.WriteString(edit(h))
		}
		return b.String()
	}
	good := func(h int) string { return row(h, "100") }
	cases := []struct {
		name, in, want string
		err            error
	}{
		{"empty", "", "empty file", ErrFormat},
		{"header", "time,value\n", "header", ErrFormat},
		{"short", header + "\n" + row(0, "1"), "1 hourly rows", ErrFormat},
		{"out of order", full(func(h int) string { return row((h+1)%Hours, "1") }), "want 2022-01-01T00:00:00Z", ErrFormat},
		{"negative", full(func(h int) string { return row(h, map[bool]string{true: "-3", false: "1"}[h == 5]) }), "line 7: value \"-3\"", ErrFormat},
		{"nan", full(func(h int) string { return row(h, map[bool]string{true: "NaN", false: "1"}[h == 5]) }), "value \"NaN\"", ErrFormat},
		{"extra column", full(func(h int) string { return row(h, "1,2") }), "want 2 columns", ErrFormat},
		{"too many", full(good) + row(0, "1"), "more than 8760", ErrFormat},
		{"long line", header + "\n" + strings.Repeat("x", 1000) + "\n", "256 bytes", ErrFormat},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(c.in), "T")
			if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %v containing %q", err, c.err, c.want)
			}
		})
	}
	// a gap at the very start is never filled, whatever its length
	s, err := Parse(strings.NewReader(full(func(h int) string { return row(h, map[bool]string{true: "", false: "7"}[h == 0]) })), "T")
	if err != nil || s.Gaps[0].Filled || !math.IsNaN(s.Values[0]) {
		t.Fatalf("leading gap: %v %+v", err, s.Gaps)
	}
	if _, err := s.Window(Year0, 2); !errors.Is(err, ErrGap) {
		t.Errorf("window over the leading gap: %v", err)
	}
	if _, err := s.Window(Year0.Add(30*time.Minute), 2); !errors.Is(err, ErrRange) {
		t.Errorf("half-hour start: %v", err)
	}
	if _, err := s.Window(Year0.Add((Hours-1)*time.Hour), 2); !errors.Is(err, ErrRange) {
		t.Errorf("past the year: %v", err)
	}
	if _, err := Load("XX"); !errors.Is(err, ErrUnknownGrid) {
		t.Errorf("unknown grid: %v", err)
	}
}

// FuzzParse: Parse never panics and what it accepts has Hours values,
// each NaN (a long gap) or in [0, MaxIntensity].
func FuzzParse(f *testing.F) {
	b, err := os.ReadFile("data/CISO-2022.csv")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:500])
	f.Add([]byte(header + "\n2022-01-01T00:00:00Z,\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := Parse(strings.NewReader(string(in)), "F")
		if err != nil {
			return
		}
		if len(s.Values) != Hours {
			t.Fatalf("%d values", len(s.Values))
		}
		for _, v := range s.Values {
			if !math.IsNaN(v) && (v < 0 || v > MaxIntensity) {
				t.Fatalf("value %v", v)
			}
		}
	})
}
