package procfs

import (
	"bytes"
	"time"
)

// PressureLine is one line of a PSI file: the share of wall time (in
// percent) some (or all, for "full") non-idle tasks were stalled on the
// resource, averaged over 10, 60 and 300 s, and the cumulative stall time.
type PressureLine struct {
	Avg10, Avg60, Avg300 float64
	Total                time.Duration
}

// Pressure is one /proc/pressure/{cpu,memory,io} file (Linux >= 4.20
// with CONFIG_PSI and psi not disabled at boot).
type Pressure struct {
	Some PressureLine
	// Full is absent (HasFull false) from the cpu file before Linux 5.13.
	Full    PressureLine
	HasFull bool
}

// ParsePressure parses a PSI file: a "some" line then, optionally, a
// "full" line, each "avg10=X avg60=Y avg300=Z total=N" (N in µs).
func ParsePressure(name string, b []byte) (Pressure, error) {
	var p Pressure
	var f [][]byte
	seenSome := false
	err := lines(b, func(n int, line []byte) error {
		f = fields(f, line)
		if len(f) != 5 {
			return perr(name, n, "%d fields, want 5", len(f))
		}
		var dst *PressureLine
		switch {
		case bytes.Equal(f[0], []byte("some")) && n == 1:
			dst, seenSome = &p.Some, true
		case bytes.Equal(f[0], []byte("full")) && n == 2:
			dst, p.HasFull = &p.Full, true
		default:
			return perr(name, n, "line starts %q, want some (line 1) or full (line 2)", f[0])
		}
		avgs := [...]*float64{&dst.Avg10, &dst.Avg60, &dst.Avg300}
		for i, key := range [...]string{"avg10=", "avg60=", "avg300="} {
			v, ok := bytes.CutPrefix(f[i+1], []byte(key))
			if !ok {
				return perr(name, n, "field %d: %q, want %sX", i+2, f[i+1], key)
			}
			x, ok := parseFloat(v)
			if !ok || x > 100 {
				return perr(name, n, "%s%s: not a percentage", key, v)
			}
			*avgs[i] = x
		}
		v, ok := bytes.CutPrefix(f[4], []byte("total="))
		if !ok {
			return perr(name, n, "field 5: %q, want total=N", f[4])
		}
		x, ok := parseUint(v)
		if !ok || x > uint64(1<<63-1)/uint64(time.Microsecond) {
			return perr(name, n, "total=%s: bad number", v)
		}
		dst.Total = time.Duration(x) * time.Microsecond
		return nil
	})
	if err != nil {
		return Pressure{}, err
	}
	if !seenSome {
		return Pressure{}, perr(name, 0, "no some line")
	}
	return p, nil
}
