package memlimit

import (
	"errors"
	"math"
	"runtime/debug"
	"testing"
)

func TestApply(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	for _, tc := range []struct {
		name      string
		env       map[string]string
		fraction  float64
		wantLimit int64 // -1: unchanged
		source    string
		err       error
	}{
		// 256 MiB = 268435456 bytes; 90% = 241591910.4 -> 241591910
		{"container limit, default fraction", map[string]string{Env: "268435456"}, 0, 241591910, Env, nil},
		// 1 GiB at 75% = 805306368
		{"container limit, given fraction", map[string]string{Env: "1073741824"}, 0.75, 805306368, Env, nil},
		{"whitespace around the number", map[string]string{Env: " 1000\n"}, 1, 1000, Env, nil},
		{"GOMEMLIMIT wins", map[string]string{Env: "268435456", "GOMEMLIMIT": "100MiB"}, 0, -1, "GOMEMLIMIT", nil},
		{"nothing set", nil, 0, -1, "", nil},
		{"a quantity with a unit", map[string]string{Env: "256Mi"}, 0, -1, "", ErrValue},
		{"zero", map[string]string{Env: "0"}, 0, -1, "", ErrValue},
		{"negative", map[string]string{Env: "-5"}, 0, -1, "", ErrValue},
		{"fraction above 1", map[string]string{Env: "1000"}, 1.5, -1, "", ErrValue},
		{"NaN fraction", map[string]string{Env: "1000"}, math.NaN(), -1, "", ErrValue},
		// 9223372036854775807 * 1 does not fit float64 exactly: clamped
		{"the largest limit", map[string]string{Env: "9223372036854775807"}, 1, math.MaxInt64, Env, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const sentinel = 1 << 40
			debug.SetMemoryLimit(sentinel)
			res, err := Apply(Config{Getenv: func(k string) string { return tc.env[k] }, Fraction: tc.fraction})
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			want := tc.wantLimit
			if want == -1 {
				want = sentinel
			}
			if got := debug.SetMemoryLimit(-1); got != want {
				t.Errorf("runtime limit %d, want %d", got, want)
			}
			if err == nil && (res.Limit != want || res.Source != tc.source) {
				t.Errorf("result %+v, want limit %d from %q", res, want, tc.source)
			}
		})
	}
}
