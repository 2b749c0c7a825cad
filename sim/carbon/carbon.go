package carbon

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

//go:embed data/*.csv
var files embed.FS

// Errors. Problems in a file wrap ErrFormat; a window over missing data
// wraps ErrGap; a window outside the year wraps ErrRange.
var (
	ErrUnknownGrid = errors.New("carbon: unknown grid")
	ErrFormat      = errors.New("carbon: malformed file")
	ErrGap         = errors.New("carbon: no data")
	ErrRange       = errors.New("carbon: outside the data")
)

// Limits and the gap rule.
const (
	// Hours is the length of every series: the hours of 2022.
	Hours = 8760
	// MaxFillHours is the longest run of missing hours that is filled by
	// interpolation; longer runs stay missing.
	MaxFillHours = 6
	// MaxIntensity bounds a value (g/kWh); the dirtiest grids are near 1,000.
	MaxIntensity = 5000
	// maxFileBytes caps a file read by Parse (the real files are ~230 KB).
	maxFileBytes = 4 << 20
	header       = "timestamp_utc,gco2_per_kwh"
)

// Year0 is the first hour of every series (2022-01-01T00:00Z).
var Year0 = time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)

// Gap is a run of hours the source has no data for.
type Gap struct {
	// Start is the first missing hour (UTC) and Hours the run's length.
	Start time.Time
	Hours int
	// Filled reports that the run was interpolated (short, inside the year).
	Filled bool
}

func (g Gap) String() string {
	state := "left missing"
	if g.Filled {
		state = "interpolated"
	}
	return fmt.Sprintf("%d h from %s (%s)", g.Hours, g.Start.Format("2006-01-02T15:04Z"), state)
}

// Series is one grid's hourly intensity over 2022.
type Series struct {
	Grid string
	// Values has Hours entries, hour 0 at Year0; NaN marks an hour left
	// missing by the gap rule.
	Values []float64
	// Gaps lists every run of missing hours in the file, filled or not.
	Gaps []Gap
}

// Grids lists the embedded grids (balancing-authority codes), sorted.
func Grids() []string {
	entries, _ := files.ReadDir("data")
	var out []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), "-2022.csv"); ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

var cache sync.Map // grid -> func() (*Series, error)

// Load returns an embedded grid's series (parsed once, then shared).
func Load(grid string) (*Series, error) {
	if !slices.Contains(Grids(), grid) {
		return nil, fmt.Errorf("%w %q (have %s)", ErrUnknownGrid, grid, strings.Join(Grids(), ", "))
	}
	f, _ := cache.LoadOrStore(grid, sync.OnceValues(func() (*Series, error) {
		b, err := files.ReadFile("data/" + grid + "-2022.csv")
		if err != nil {
			return nil, err
		}
		return Parse(bytes.NewReader(b), grid)
	}))
	return f.(func() (*Series, error))()
}

// Parse reads a grid file strictly (see the package documentation) and
// applies the gap rule. grid names the series and its errors.
func Parse(r io.Reader, grid string) (*Series, error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxFileBytes+1))
	sc.Buffer(make([]byte, 256), 256)
	bad := func(line int, format string, args ...any) error {
		return fmt.Errorf("%w: %s line %d: %s", ErrFormat, grid, line, fmt.Sprintf(format, args...))
	}
	if !sc.Scan() {
		return nil, bad(1, "empty file (want header %q)", header)
	}
	if h := strings.TrimSuffix(sc.Text(), "\r"); h != header {
		return nil, bad(1, "header %q, want %q", h, header)
	}
	s := &Series{Grid: grid, Values: make([]float64, 0, Hours)}
	read := 0
	for sc.Scan() {
		line := read + 2
		text := strings.TrimSuffix(sc.Text(), "\r")
		if read == Hours {
			if text == "" {
				continue // a trailing blank line
			}
			return nil, bad(line, "more than %d hourly rows", Hours)
		}
		ts, val, ok := strings.Cut(text, ",")
		if !ok || strings.Contains(val, ",") {
			return nil, bad(line, "want 2 columns, got %q", text)
		}
		want := Year0.Add(time.Duration(read) * time.Hour)
		t, err := time.Parse(time.RFC3339, ts)
		if err != nil || !t.Equal(want) {
			return nil, bad(line, "timestamp %q, want %s (one row per hour, in order)", ts, want.Format(time.RFC3339))
		}
		v := math.NaN()
		if val != "" {
			v, err = strconv.ParseFloat(val, 64)
			if err != nil || math.IsNaN(v) || v < 0 || v > MaxIntensity {
				return nil, bad(line, "value %q, want a number in [0, %d] or empty", val, MaxIntensity)
			}
		}
		s.Values = append(s.Values, v)
		read++
	}
	if err := sc.Err(); err != nil {
		return nil, bad(read+2, "%v (lines are at most 256 bytes, files %d bytes)", err, maxFileBytes)
	}
	if read != Hours {
		return nil, bad(read+1, "%d hourly rows, want %d", read, Hours)
	}
	s.fillGaps()
	return s, nil
}

// fillGaps records every run of missing hours and interpolates the short
// inner ones.
func (s *Series) fillGaps() {
	v := s.Values
	for i := 0; i < len(v); {
		if !math.IsNaN(v[i]) {
			i++
			continue
		}
		j := i
		for j < len(v) && math.IsNaN(v[j]) {
			j++
		}
		n := j - i
		g := Gap{Start: Year0.Add(time.Duration(i) * time.Hour), Hours: n}
		if n <= MaxFillHours && i > 0 && j < len(v) {
			a, b := v[i-1], v[j]
			for k := 1; k <= n; k++ {
				v[i+k-1] = a + (b-a)*float64(k)/float64(n+1)
			}
			g.Filled = true
		}
		s.Gaps = append(s.Gaps, g)
		i = j
	}
}

// Window returns hours hourly values starting at start (UTC, on a whole
// hour). It refuses windows outside 2022 (ErrRange) and windows covering
// an hour left missing (ErrGap, naming the gap).
func (s *Series) Window(start time.Time, hours int) ([]float64, error) {
	if start.Sub(Year0)%time.Hour != 0 {
		return nil, fmt.Errorf("%w: %s window start %s is not on a whole hour", ErrRange, s.Grid, start.UTC().Format(time.RFC3339))
	}
	h0 := int(start.Sub(Year0) / time.Hour)
	if start.Before(Year0) || hours <= 0 || h0+hours > Hours {
		return nil, fmt.Errorf("%w: %s has hours 2022-01-01T00Z to 2022-12-31T23Z; window of %d h from %s", ErrRange, s.Grid, hours, start.UTC().Format(time.RFC3339))
	}
	for _, g := range s.Gaps {
		if g.Filled {
			continue
		}
		gs := int(g.Start.Sub(Year0) / time.Hour)
		if gs < h0+hours && gs+g.Hours > h0 {
			return nil, fmt.Errorf("%w: %s is missing %s (gaps over %d h are not filled); the window of %d h from %s covers it: choose another start",
				ErrGap, s.Grid, g, MaxFillHours, hours, start.UTC().Format(time.RFC3339))
		}
	}
	return slices.Clone(s.Values[h0 : h0+hours]), nil
}

// LocalWindow is Window for a clock that reads local at UTC+offsetHours:
// hour 0 of the result is local time local (a wall-clock time, its own
// zone ignored), that is UTC local − offsetHours.
func (s *Series) LocalWindow(local time.Time, offsetHours, hours int) ([]float64, error) {
	wall := time.Date(local.Year(), local.Month(), local.Day(), local.Hour(), local.Minute(), local.Second(), local.Nanosecond(), time.UTC)
	return s.Window(wall.Add(-time.Duration(offsetHours)*time.Hour), hours)
}

// Mean is the mean of the measured and filled hours (missing ones skipped).
func (s *Series) Mean() float64 {
	var sum float64
	var n int
	for _, v := range s.Values {
		if !math.IsNaN(v) {
			sum += v
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}
