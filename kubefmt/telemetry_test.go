package kubefmt

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func f64(x float64) *float64 { return &x }

var t0 = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

func full() TelemetrySummary {
	return TelemetrySummary{Time: t0, Window: 10 * time.Second, CPU: 0.4213, Mem: 0.6, Load1: 1.52,
		RunQueueP99Us: f64(850), RetransPerS: f64(0.2)}
}

func TestEncodeTelemetryGolden(t *testing.T) {
	got, err := EncodeTelemetry(full())
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"v":1,"ts":"2026-07-01T12:00:00Z","window":"10s","cpu":0.4213,"mem":0.6,"load1":1.52,"runqP99Us":850,"retransPerS":0.2}`
	if got != want {
		t.Fatalf("Encode =\n%s\nwant\n%s", got, want)
	}
	s := full()
	s.RunQueueP99Us, s.RetransPerS = nil, nil // the /proc fallback
	s.Time = t0.Add(1500 * time.Millisecond).In(time.FixedZone("CEST", 7200))
	s.CPU = 0.123456789
	got, err = EncodeTelemetry(s)
	if err != nil {
		t.Fatal(err)
	}
	const want2 = `{"v":1,"ts":"2026-07-01T12:00:01Z","window":"10s","cpu":0.1235,"mem":0.6,"load1":1.52}`
	if got != want2 {
		t.Fatalf("Encode =\n%s\nwant\n%s", got, want2)
	}
}

func TestTelemetryRoundTrip(t *testing.T) {
	enc, err := EncodeTelemetry(full())
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeTelemetry(enc)
	if err != nil {
		t.Fatal(err)
	}
	w := full()
	if !s.Time.Equal(w.Time) || s.Window != w.Window || s.CPU != w.CPU || s.Mem != w.Mem || s.Load1 != w.Load1 ||
		*s.RunQueueP99Us != *w.RunQueueP99Us || *s.RetransPerS != *w.RetransPerS {
		t.Fatalf("DecodeTelemetry(EncodeTelemetry(s)) = %+v, want %+v", s, w)
	}
}

func TestDecodeTelemetryTable(t *testing.T) {
	const ok = `{"v":1,"ts":"2026-07-01T12:00:00Z","window":"10s","cpu":0.5,"mem":0.25,"load1":2}`
	for _, c := range []struct {
		name, in string
		want     error // nil: accepted
	}{
		{"minimal", ok, nil},
		{"full", `{"v":1,"ts":"2026-07-01T12:00:00Z","window":"10s","cpu":0.5,"mem":0.25,"load1":2,"runqP99Us":12.5,"retransPerS":0}`, nil},
		{"field order and spaces", ` { "load1":0, "mem":1, "cpu":0, "window":"1h", "ts":"2026-07-01T14:00:00.5+02:00", "v":1 } `, nil},
		{"null optional", `{"v":1,"ts":"2026-07-01T12:00:00Z","window":"10s","cpu":0.5,"mem":0.25,"load1":2,"runqP99Us":null}`, nil},
		{"empty", ``, ErrTelemetrySyntax},
		{"not an object", `[1]`, ErrTelemetrySyntax},
		{"string", `"x"`, ErrTelemetrySyntax},
		{"truncated", `{"v":1,"ts":"2026-07-01T12:00:00Z"`, ErrTelemetrySyntax},
		{"trailing", ok + `{}`, ErrTelemetrySyntax},
		{"trailing garbage", ok + `x`, ErrTelemetrySyntax},
		{"unknown field", strings.Replace(ok, `"load1":2`, `"load1":2,"gpu":0.5`, 1), ErrTelemetrySyntax},
		{"other case", strings.Replace(ok, `"cpu"`, `"CPU"`, 1), ErrTelemetrySyntax},
		{"repeated field", strings.Replace(ok, `"load1":2`, `"load1":2,"cpu":0.9`, 1), ErrTelemetrySyntax},
		{"nested", strings.Replace(ok, `"load1":2`, `"load1":{"x":1}`, 1), ErrTelemetrySyntax},
		{"array value", strings.Replace(ok, `"load1":2`, `"load1":[2]`, 1), ErrTelemetrySyntax},
		{"cpu as string", strings.Replace(ok, `"cpu":0.5`, `"cpu":"0.5"`, 1), ErrTelemetrySyntax},
		{"huge number", strings.Replace(ok, `"load1":2`, `"load1":1e400`, 1), ErrTelemetrySyntax},
		{"NaN", strings.Replace(ok, `"cpu":0.5`, `"cpu":NaN`, 1), ErrTelemetrySyntax},
		{"no version", strings.Replace(ok, `"v":1,`, ``, 1), ErrTelemetryVersion},
		{"version 2", strings.Replace(ok, `"v":1`, `"v":2`, 1), ErrTelemetryVersion},
		{"version 0", strings.Replace(ok, `"v":1`, `"v":0`, 1), ErrTelemetryVersion},
		{"no ts", strings.Replace(ok, `"ts":"2026-07-01T12:00:00Z",`, ``, 1), ErrTelemetryField},
		{"no cpu", strings.Replace(ok, `"cpu":0.5,`, ``, 1), ErrTelemetryField},
		{"null cpu", strings.Replace(ok, `"cpu":0.5`, `"cpu":null`, 1), ErrTelemetryField},
		{"no mem", strings.Replace(ok, `"mem":0.25,`, ``, 1), ErrTelemetryField},
		{"no window", strings.Replace(ok, `"window":"10s",`, ``, 1), ErrTelemetryField},
		{"no load1", strings.Replace(ok, `,"load1":2`, ``, 1), ErrTelemetryField},
		{"cpu > 1", strings.Replace(ok, `"cpu":0.5`, `"cpu":1.01`, 1), ErrTelemetryField},
		{"cpu < 0", strings.Replace(ok, `"cpu":0.5`, `"cpu":-0.1`, 1), ErrTelemetryField},
		{"cpu in percent", strings.Replace(ok, `"cpu":0.5`, `"cpu":50`, 1), ErrTelemetryField},
		{"mem > 1", strings.Replace(ok, `"mem":0.25`, `"mem":2`, 1), ErrTelemetryField},
		{"load1 < 0", strings.Replace(ok, `"load1":2`, `"load1":-1`, 1), ErrTelemetryField},
		{"load1 huge", strings.Replace(ok, `"load1":2`, `"load1":1e7`, 1), ErrTelemetryField},
		{"runq < 0", strings.Replace(ok, `"load1":2`, `"load1":2,"runqP99Us":-1`, 1), ErrTelemetryField},
		{"retrans huge", strings.Replace(ok, `"load1":2`, `"load1":2,"retransPerS":1e10`, 1), ErrTelemetryField},
		{"ts not RFC 3339", strings.Replace(ok, `2026-07-01T12:00:00Z`, `2026-07-01 12:00:00`, 1), ErrTelemetryField},
		{"ts unix", strings.Replace(ok, `"2026-07-01T12:00:00Z"`, `"1782907200"`, 1), ErrTelemetryField},
		{"ts year 1", strings.Replace(ok, `2026-07-01`, `0001-01-01`, 1), ErrTelemetryField},
		{"window bad", strings.Replace(ok, `"10s"`, `"10"`, 1), ErrTelemetryField},
		{"window short", strings.Replace(ok, `"10s"`, `"10ms"`, 1), ErrTelemetryField},
		{"window long", strings.Replace(ok, `"10s"`, `"2h"`, 1), ErrTelemetryField},
		{"window negative", strings.Replace(ok, `"10s"`, `"-10s"`, 1), ErrTelemetryField},
		{"too large", ok[:len(ok)-1] + strings.Repeat(" ", MaxTelemetryBytes) + "}", ErrTelemetryTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := DecodeTelemetry(c.in)
			if c.want == nil {
				if err != nil {
					t.Fatalf("DecodeTelemetry(%s): %v", c.in, err)
				}
				if s.Time.IsZero() || s.Window == 0 {
					t.Fatalf("DecodeTelemetry(%s) = %+v", c.in, s)
				}
				return
			}
			if !errors.Is(err, c.want) || !errors.Is(err, ErrTelemetry) {
				t.Fatalf("DecodeTelemetry(%s) = %v, want %v (wrapping ErrTelemetry)", c.in, err, c.want)
			}
			if s != (TelemetrySummary{}) {
				t.Fatalf("DecodeTelemetry(%s) returned a summary with its error: %+v", c.in, s)
			}
		})
	}
}

func TestEncodeTelemetryRefuses(t *testing.T) {
	for name, mut := range map[string]func(*TelemetrySummary){
		"zero time":   func(s *TelemetrySummary) { s.Time = time.Time{} },
		"NaN cpu":     func(s *TelemetrySummary) { s.CPU = math.NaN() },
		"Inf load":    func(s *TelemetrySummary) { s.Load1 = math.Inf(1) },
		"-Inf mem":    func(s *TelemetrySummary) { s.Mem = math.Inf(-1) },
		"cpu > 1":     func(s *TelemetrySummary) { s.CPU = 1.5 },
		"NaN runq":    func(s *TelemetrySummary) { s.RunQueueP99Us = f64(math.NaN()) },
		"neg retrans": func(s *TelemetrySummary) { s.RetransPerS = f64(-1) },
		"no window":   func(s *TelemetrySummary) { s.Window = 0 },
	} {
		s := full()
		mut(&s)
		if got, err := EncodeTelemetry(s); !errors.Is(err, ErrTelemetryField) {
			t.Errorf("%s: Encode = %q, %v; want ErrTelemetryField", name, got, err)
		}
	}
}

func TestTelemetryFresh(t *testing.T) {
	s := full()
	const maxAge = 2 * time.Minute
	for _, c := range []struct {
		now  time.Time
		want bool
	}{
		{t0, true},
		{t0.Add(maxAge), true},
		{t0.Add(maxAge + time.Nanosecond), false},
		{t0.Add(time.Hour), false},
		{t0.Add(-MaxTelemetryClockSkew), true}, // reader's clock a little behind
		{t0.Add(-MaxTelemetryClockSkew - time.Second), false},
		{t0.Add(-24 * time.Hour), false}, // agent clock far ahead: not trusted
	} {
		if got := s.Fresh(c.now, maxAge); got != c.want {
			t.Errorf("Fresh(ts%+v, %v) = %v, want %v", c.now.Sub(t0), maxAge, got, c.want)
		}
	}
	if got := s.Age(t0.Add(time.Minute)); got != time.Minute {
		t.Errorf("Age = %v", got)
	}
}

// FuzzDecodeSummary: Decode never panics and never accepts anything
// Encode would refuse; what it accepts re-encodes to a fixed point.
func FuzzDecodeSummary(f *testing.F) {
	seed := []TelemetrySummary{full(), {Time: t0, Window: time.Second}, {Time: t0.Add(time.Hour), Window: time.Hour, CPU: 1, Mem: 1, Load1: MaxLoad1,
		RunQueueP99Us: f64(MaxRunQueueP99Us), RetransPerS: f64(MaxRetransPerS)}}
	for _, s := range seed {
		e, err := EncodeTelemetry(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(e)
	}
	f.Add(`{"v":1,"ts":"2026-07-01T14:00:00.5+02:00","window":"1m30s","cpu":0.99999,"mem":0,"load1":0.00004}`)
	f.Add(`{"v":2}`)
	f.Add(`{"v":1,"v":1}`)
	f.Add(`{}`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, in string) {
		s, err := DecodeTelemetry(in)
		if err != nil {
			if !errors.Is(err, ErrTelemetry) {
				t.Fatalf("DecodeTelemetry(%q): error %v does not wrap ErrTelemetry", in, err)
			}
			return
		}
		if len(in) > MaxTelemetryBytes {
			t.Fatalf("Decode accepted %d bytes", len(in))
		}
		if !(s.CPU >= 0 && s.CPU <= 1 && s.Mem >= 0 && s.Mem <= 1) {
			t.Fatalf("DecodeTelemetry(%q) = %+v out of range", in, s)
		}
		e1, err := EncodeTelemetry(s)
		if err != nil {
			t.Fatalf("EncodeTelemetry(DecodeTelemetry(%q)): %v", in, err)
		}
		s2, err := DecodeTelemetry(e1)
		if err != nil {
			t.Fatalf("DecodeTelemetry(EncodeTelemetry(DecodeTelemetry(%q))) = %q: %v", in, e1, err)
		}
		e2, err := EncodeTelemetry(s2)
		if err != nil || e2 != e1 {
			t.Fatalf("not a fixed point: %q -> %q -> %q (%v)", in, e1, e2, err)
		}
		if s.Fresh(s.Time, 0) != true {
			t.Fatalf("a summary is not fresh at its own time")
		}
	})
}
