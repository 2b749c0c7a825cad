package telemetry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// AnnotationKey is the Node annotation holding the agent's Summary.
const AnnotationKey = "edgesched.io/telemetry"

// Version is the format version this build writes and reads.
const Version = 1

// Limits of the format.
const (
	// MaxEncodedSize caps an annotation value (a full summary encodes in
	// about 130 bytes).
	MaxEncodedSize = 512
	// MinWindow and MaxWindow bound the sampling window.
	MinWindow = time.Second
	MaxWindow = time.Hour
	// MaxClockSkew is how far in the future (by the reader's clock) a
	// summary's timestamp may be and still count as fresh. A summary
	// further ahead comes from a clock that cannot be trusted: it is
	// treated as stale (otherwise it would stay "fresh" for ever).
	MaxClockSkew = 30 * time.Second
	// MaxLoad1, MaxRunQueueP99Us and MaxRetransPerS bound the unbounded
	// measures (far beyond anything real: larger values are corrupt).
	MaxLoad1         = 1e6
	MaxRunQueueP99Us = 1e9 // 1000 s
	MaxRetransPerS   = 1e9
)

// Errors of Decode and Encode. Every error they return wraps ErrInvalid
// and exactly one of the others.
var (
	ErrInvalid  = errors.New("telemetry: invalid summary")
	ErrTooLarge = fmt.Errorf("%w: too large", ErrInvalid)
	ErrSyntax   = fmt.Errorf("%w: malformed JSON", ErrInvalid)
	ErrVersion  = fmt.Errorf("%w: unsupported version", ErrInvalid)
	ErrField    = fmt.Errorf("%w: bad field", ErrInvalid)
)

// Summary is one node's telemetry over one sampling window, as of Time.
// Shares are of the whole node (all CPUs, all memory), not of allocatable.
type Summary struct {
	// Time is when the window ended (JSON "ts", RFC 3339, UTC, written
	// with second precision).
	Time time.Time
	// Window is the sampling window the values cover (JSON "window", a Go
	// duration, in [MinWindow, MaxWindow]).
	Window time.Duration
	// CPU is the node's CPU utilisation over the window: busy time of all
	// CPUs / (window × CPUs), in [0, 1] (JSON "cpu", /proc/stat).
	CPU float64
	// Mem is the node's memory in use, (MemTotal − MemAvailable) /
	// MemTotal at the end of the window, in [0, 1] (JSON "mem").
	Mem float64
	// Load1 is the kernel's 1-minute load average (runnable plus
	// uninterruptible tasks), >= 0 (JSON "load1", /proc/loadavg).
	Load1 float64
	// RunQueueP99Us is the 99th percentile run-queue latency over the
	// window (wakeup to running), in microseconds, from the eBPF
	// sched_wakeup/sched_switch tracepoints; nil when not measured (the
	// /proc fallback cannot) (JSON "runqP99Us", optional).
	RunQueueP99Us *float64
	// RetransPerS is the node's TCP retransmitted segments per second over
	// the window (eBPF tcp_retransmit_skb, or /proc/net/snmp RetransSegs);
	// nil when not measured (JSON "retransPerS", optional).
	RetransPerS *float64
}

// wire is the JSON form. Pointers tell absent from zero.
type wire struct {
	V           *int     `json:"v"`
	TS          *string  `json:"ts"`
	Window      *string  `json:"window"`
	CPU         *float64 `json:"cpu"`
	Mem         *float64 `json:"mem"`
	Load1       *float64 `json:"load1"`
	RunQueueP99 *float64 `json:"runqP99Us,omitempty"`
	RetransPerS *float64 `json:"retransPerS,omitempty"`
}

// round4 keeps 4 decimals: what the format carries (compactness; the
// policy's features are float32 anyway). Idempotent.
func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// Encode validates s and renders it as the annotation value. Time is
// written in UTC with second precision and the measures are rounded to 4
// decimals, so Decode(Encode(s)) equals s up to that rounding.
func Encode(s Summary) (string, error) {
	if err := s.Validate(); err != nil {
		return "", err
	}
	ts := s.Time.UTC().Truncate(time.Second).Format(time.RFC3339)
	v, win := Version, s.Window.String()
	cpu, mem, load := round4(s.CPU), round4(s.Mem), round4(s.Load1)
	w := wire{V: &v, TS: &ts, Window: &win, CPU: &cpu, Mem: &mem, Load1: &load}
	if s.RunQueueP99Us != nil {
		x := round4(*s.RunQueueP99Us)
		w.RunQueueP99 = &x
	}
	if s.RetransPerS != nil {
		x := round4(*s.RetransPerS)
		w.RetransPerS = &x
	}
	b, err := json.Marshal(&w)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrField, err)
	}
	if len(b) > MaxEncodedSize {
		return "", fmt.Errorf("%w: %d bytes (limit %d)", ErrTooLarge, len(b), MaxEncodedSize)
	}
	return string(b), nil
}

// Validate checks the ranges of s (Encode's and Decode's rules).
func (s *Summary) Validate() error {
	if s.Time.IsZero() || s.Time.Year() < 2000 || s.Time.Year() > 9999 {
		return fmt.Errorf("%w: ts %v out of range", ErrField, s.Time)
	}
	if s.Window < MinWindow || s.Window > MaxWindow {
		return fmt.Errorf("%w: window %v not in [%v, %v]", ErrField, s.Window, MinWindow, MaxWindow)
	}
	check := func(name string, x, hi float64) error {
		if math.IsNaN(x) || x < 0 || x > hi { // also refuses ±Inf
			return fmt.Errorf("%w: %s %v not in [0, %v]", ErrField, name, x, hi)
		}
		return nil
	}
	if err := check("cpu", s.CPU, 1); err != nil {
		return err
	}
	if err := check("mem", s.Mem, 1); err != nil {
		return err
	}
	if err := check("load1", s.Load1, MaxLoad1); err != nil {
		return err
	}
	if s.RunQueueP99Us != nil {
		if err := check("runqP99Us", *s.RunQueueP99Us, MaxRunQueueP99Us); err != nil {
			return err
		}
	}
	if s.RetransPerS != nil {
		if err := check("retransPerS", *s.RetransPerS, MaxRetransPerS); err != nil {
			return err
		}
	}
	return nil
}

// Decode parses an annotation value strictly: a flat JSON object with
// each known field at most once, the required ones (v, ts, window, cpu,
// mem, load1) present, v == Version, values in range, nothing after it,
// at most MaxEncodedSize bytes.
func Decode(value string) (Summary, error) {
	var s Summary
	if len(value) > MaxEncodedSize {
		return s, fmt.Errorf("%w: %d bytes (limit %d)", ErrTooLarge, len(value), MaxEncodedSize)
	}
	b := []byte(value)
	if err := checkFlat(b); err != nil {
		return s, err
	}
	var w wire
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return s, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	if w.V == nil {
		return s, fmt.Errorf("%w: no version (v)", ErrVersion)
	}
	if *w.V != Version {
		return s, fmt.Errorf("%w: v=%d (this build reads %d)", ErrVersion, *w.V, Version)
	}
	for _, f := range []struct {
		name    string
		present bool
	}{{"ts", w.TS != nil}, {"window", w.Window != nil}, {"cpu", w.CPU != nil}, {"mem", w.Mem != nil}, {"load1", w.Load1 != nil}} {
		if !f.present {
			return s, fmt.Errorf("%w: %s is required", ErrField, f.name)
		}
	}
	t, err := time.Parse(time.RFC3339, *w.TS)
	if err != nil {
		return s, fmt.Errorf("%w: ts: %v", ErrField, err)
	}
	win, err := time.ParseDuration(*w.Window)
	if err != nil {
		return s, fmt.Errorf("%w: window: %v", ErrField, err)
	}
	s = Summary{Time: t, Window: win, CPU: *w.CPU, Mem: *w.Mem, Load1: *w.Load1, RunQueueP99Us: w.RunQueueP99, RetransPerS: w.RetransPerS}
	if err := s.Validate(); err != nil {
		return Summary{}, err
	}
	return s, nil
}

var knownFields = map[string]bool{"v": true, "ts": true, "window": true, "cpu": true, "mem": true, "load1": true, "runqP99Us": true, "retransPerS": true}

// checkFlat refuses anything but one flat JSON object whose keys are
// known field names (exactly), unique, and whose values are scalars, with nothing after it.
func checkFlat(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("%w: not a JSON object", ErrSyntax)
	}
	seen := make(map[string]bool, 8)
	for dec.More() {
		tok, err = dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrSyntax, err)
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("%w: object key %v", ErrSyntax, tok)
		}
		if !knownFields[key] { // exact names: encoding/json alone would match case-insensitively
			return fmt.Errorf("%w: unknown field %s", ErrSyntax, strconv.Quote(key))
		}
		if seen[key] {
			return fmt.Errorf("%w: field %s repeated", ErrSyntax, strconv.Quote(key))
		}
		seen[key] = true
		tok, err = dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrSyntax, err)
		}
		if _, ok := tok.(json.Delim); ok {
			return fmt.Errorf("%w: field %s is not a scalar", ErrSyntax, strconv.Quote(key))
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the object", ErrSyntax)
	}
	return nil
}

// Age is how old s is at now (negative for a timestamp in the future).
func (s *Summary) Age(now time.Time) time.Duration { return now.Sub(s.Time) }

// Fresh reports whether s may be used at now: no older than maxAge, and
// no more than MaxClockSkew in the future.
func (s *Summary) Fresh(now time.Time, maxAge time.Duration) bool {
	age := s.Age(now)
	return age <= maxAge && age >= -MaxClockSkew
}
