// The node telemetry annotation. Every edge-agent (one per node) samples
// its node over a window and writes a compact, timestamped
// TelemetrySummary to its own Node object as the annotation
// AnnotationTelemetry ("edgesched.io/telemetry"), at a bounded rate (at
// most one update per window, by default every 10 s; agents should skip
// an update when nothing moved by more than their rounding and the
// previous one is still well within the plugin's staleness bound, but must
// refresh it before that bound). The scheduler plugin reads it: a fresh
// summary's CPU utilisation becomes the node's measured load; a summary
// that is missing, malformed (DecodeTelemetry fails) or older than the
// plugin's staleness bound (Fresh is false) is ignored and the plugin
// falls back to its request-based usage model for that node, and says so.
//
// The format (version 1, JSON, at most MaxTelemetryBytes bytes):
//
//	{"v":1,"ts":"2026-07-01T12:00:00Z","window":"10s","cpu":0.4213,"mem":0.6,
//	 "load1":1.52,"runqP99Us":850,"retransPerS":0.2}
//
// See TelemetrySummary for every field and its unit. DecodeTelemetry is
// strict: unknown or repeated fields, missing required fields, values out
// of range, another version, trailing data and oversized input are
// refused with one of the sentinel errors (all of which wrap
// ErrTelemetry). The collectors live in agent/telemetry/bpf and
// agent/telemetry/procfs, the annotation writer in package agent.

package kubefmt

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

// AnnotationTelemetry is the Node annotation holding the agent's
// TelemetrySummary.
const AnnotationTelemetry = "edgesched.io/telemetry"

// TelemetryVersion is the format version this build writes and reads.
const TelemetryVersion = 1

// Limits of the format.
const (
	// MaxTelemetryBytes caps an annotation value (a full summary encodes in
	// about 130 bytes).
	MaxTelemetryBytes = 512
	// MinTelemetryWindow and MaxTelemetryWindow bound the sampling window.
	MinTelemetryWindow = time.Second
	MaxTelemetryWindow = time.Hour
	// MaxTelemetryClockSkew is how far in the future (by the reader's clock) a
	// summary's timestamp may be and still count as fresh. A summary
	// further ahead comes from a clock that cannot be trusted: it is
	// treated as stale (otherwise it would stay "fresh" for ever).
	MaxTelemetryClockSkew = 30 * time.Second
	// MaxLoad1, MaxRunQueueP99Us and MaxRetransPerS bound the unbounded
	// measures (far beyond anything real: larger values are corrupt).
	MaxLoad1         = 1e6
	MaxRunQueueP99Us = 1e9 // 1000 s
	MaxRetransPerS   = 1e9
)

// Errors of DecodeTelemetry and EncodeTelemetry. Every error they return
// wraps ErrTelemetry and exactly one of the others.
var (
	ErrTelemetry         = errors.New("kubefmt: invalid telemetry summary")
	ErrTelemetryTooLarge = fmt.Errorf("%w: too large", ErrTelemetry)
	ErrTelemetrySyntax   = fmt.Errorf("%w: malformed JSON", ErrTelemetry)
	ErrTelemetryVersion  = fmt.Errorf("%w: unsupported version", ErrTelemetry)
	ErrTelemetryField    = fmt.Errorf("%w: bad field", ErrTelemetry)
)

// TelemetrySummary is one node's telemetry over one sampling window, as
// of Time.
// Shares are of the whole node (all CPUs, all memory), not of allocatable.
type TelemetrySummary struct {
	// Time is when the window ended (JSON "ts", RFC 3339, UTC, written
	// with second precision).
	Time time.Time
	// Window is the sampling window the values cover (JSON "window", a Go
	// duration, in [MinTelemetryWindow, MaxTelemetryWindow]).
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

// telemetryWire is the JSON form. Pointers tell absent from zero.
type telemetryWire struct {
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

// EncodeTelemetry validates s and renders it as the annotation value.
// Time is written in UTC with second precision and the measures are
// rounded to 4 decimals, so DecodeTelemetry(EncodeTelemetry(s)) equals s
// up to that rounding.
func EncodeTelemetry(s TelemetrySummary) (string, error) {
	if err := s.Validate(); err != nil {
		return "", err
	}
	ts := s.Time.UTC().Truncate(time.Second).Format(time.RFC3339)
	v, win := TelemetryVersion, s.Window.String()
	cpu, mem, load := round4(s.CPU), round4(s.Mem), round4(s.Load1)
	w := telemetryWire{V: &v, TS: &ts, Window: &win, CPU: &cpu, Mem: &mem, Load1: &load}
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
		return "", fmt.Errorf("%w: %v", ErrTelemetryField, err)
	}
	if len(b) > MaxTelemetryBytes {
		return "", fmt.Errorf("%w: %d bytes (limit %d)", ErrTelemetryTooLarge, len(b), MaxTelemetryBytes)
	}
	return string(b), nil
}

// Validate checks the ranges of s (EncodeTelemetry's and
// DecodeTelemetry's rules).
func (s *TelemetrySummary) Validate() error {
	if s.Time.IsZero() || s.Time.Year() < 2000 || s.Time.Year() > 9999 {
		return fmt.Errorf("%w: ts %v out of range", ErrTelemetryField, s.Time)
	}
	if s.Window < MinTelemetryWindow || s.Window > MaxTelemetryWindow {
		return fmt.Errorf("%w: window %v not in [%v, %v]", ErrTelemetryField, s.Window, MinTelemetryWindow, MaxTelemetryWindow)
	}
	check := func(name string, x, hi float64) error {
		if math.IsNaN(x) || x < 0 || x > hi { // also refuses ±Inf
			return fmt.Errorf("%w: %s %v not in [0, %v]", ErrTelemetryField, name, x, hi)
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

// DecodeTelemetry parses an annotation value strictly: a flat JSON object
// with each known field at most once, the required ones (v, ts, window,
// cpu, mem, load1) present, v == TelemetryVersion, values in range,
// nothing after it, at most MaxTelemetryBytes bytes.
func DecodeTelemetry(value string) (TelemetrySummary, error) {
	var s TelemetrySummary
	if len(value) > MaxTelemetryBytes {
		return s, fmt.Errorf("%w: %d bytes (limit %d)", ErrTelemetryTooLarge, len(value), MaxTelemetryBytes)
	}
	b := []byte(value)
	if err := checkFlat(b); err != nil {
		return s, err
	}
	var w telemetryWire
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return s, fmt.Errorf("%w: %v", ErrTelemetrySyntax, err)
	}
	if w.V == nil {
		return s, fmt.Errorf("%w: no version (v)", ErrTelemetryVersion)
	}
	if *w.V != TelemetryVersion {
		return s, fmt.Errorf("%w: v=%d (this build reads %d)", ErrTelemetryVersion, *w.V, TelemetryVersion)
	}
	for _, f := range []struct {
		name    string
		present bool
	}{{"ts", w.TS != nil}, {"window", w.Window != nil}, {"cpu", w.CPU != nil}, {"mem", w.Mem != nil}, {"load1", w.Load1 != nil}} {
		if !f.present {
			return s, fmt.Errorf("%w: %s is required", ErrTelemetryField, f.name)
		}
	}
	t, err := time.Parse(time.RFC3339, *w.TS)
	if err != nil {
		return s, fmt.Errorf("%w: ts: %v", ErrTelemetryField, err)
	}
	win, err := time.ParseDuration(*w.Window)
	if err != nil {
		return s, fmt.Errorf("%w: window: %v", ErrTelemetryField, err)
	}
	s = TelemetrySummary{Time: t, Window: win, CPU: *w.CPU, Mem: *w.Mem, Load1: *w.Load1, RunQueueP99Us: w.RunQueueP99, RetransPerS: w.RetransPerS}
	if err := s.Validate(); err != nil {
		return TelemetrySummary{}, err
	}
	return s, nil
}

var telemetryFields = map[string]bool{"v": true, "ts": true, "window": true, "cpu": true, "mem": true, "load1": true, "runqP99Us": true, "retransPerS": true}

// checkFlat refuses anything but one flat JSON object whose keys are
// known field names (exactly), unique, and whose values are scalars, with nothing after it.
func checkFlat(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrTelemetrySyntax, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("%w: not a JSON object", ErrTelemetrySyntax)
	}
	seen := make(map[string]bool, 8)
	for dec.More() {
		tok, err = dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrTelemetrySyntax, err)
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("%w: object key %v", ErrTelemetrySyntax, tok)
		}
		if !telemetryFields[key] { // exact names: encoding/json alone would match case-insensitively
			return fmt.Errorf("%w: unknown field %s", ErrTelemetrySyntax, strconv.Quote(key))
		}
		if seen[key] {
			return fmt.Errorf("%w: field %s repeated", ErrTelemetrySyntax, strconv.Quote(key))
		}
		seen[key] = true
		tok, err = dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrTelemetrySyntax, err)
		}
		if _, ok := tok.(json.Delim); ok {
			return fmt.Errorf("%w: field %s is not a scalar", ErrTelemetrySyntax, strconv.Quote(key))
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return fmt.Errorf("%w: %v", ErrTelemetrySyntax, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the object", ErrTelemetrySyntax)
	}
	return nil
}

// Age is how old s is at now (negative for a timestamp in the future).
func (s *TelemetrySummary) Age(now time.Time) time.Duration { return now.Sub(s.Time) }

// Fresh reports whether s may be used at now: no older than maxAge, and
// no more than MaxTelemetryClockSkew in the future.
func (s *TelemetrySummary) Fresh(now time.Time, maxAge time.Duration) bool {
	age := s.Age(now)
	return age <= maxAge && age >= -MaxTelemetryClockSkew
}
