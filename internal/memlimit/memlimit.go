package memlimit

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Env is the variable holding the container's memory limit in bytes.
const Env = "EDGESCHED_MEMORY_LIMIT"

// DefaultFraction is the share of the container's limit given to the Go
// runtime.
const DefaultFraction = 0.9

// ErrValue reports an EDGESCHED_MEMORY_LIMIT that is not a positive
// number of bytes.
var ErrValue = errors.New("memlimit: bad memory limit")

// Result says what Apply did.
type Result struct {
	// Limit is the runtime's soft memory limit in bytes after Apply
	// (math.MaxInt64: none).
	Limit int64
	// Source is "GOMEMLIMIT" (set by the user, left alone), Env (set from
	// the container's limit) or "" (neither variable set: nothing done).
	Source string
}

// Apply sets the runtime's soft memory limit to fraction (0 <
// fraction <= 1; 0 means DefaultFraction) of the bytes in the variable
// Env, read with getenv (nil: os.Getenv). A set GOMEMLIMIT wins and is
// left alone. A malformed or non-positive Env value is an error naming
// it, and the limit is left unchanged.
func Apply(getenv func(string) string, fraction float64) (Result, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if fraction == 0 {
		fraction = DefaultFraction
	}
	if !(fraction > 0 && fraction <= 1) {
		return Result{}, fmt.Errorf("%w: fraction %v, want (0, 1]", ErrValue, fraction)
	}
	if getenv("GOMEMLIMIT") != "" {
		return Result{Limit: debug.SetMemoryLimit(-1), Source: "GOMEMLIMIT"}, nil
	}
	raw := strings.TrimSpace(getenv(Env))
	if raw == "" {
		return Result{Limit: debug.SetMemoryLimit(-1)}, nil
	}
	v, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || v <= 0 {
		return Result{Limit: debug.SetMemoryLimit(-1)}, fmt.Errorf("%w: %s=%q, want a positive number of bytes", ErrValue, Env, raw)
	}
	limit := int64(float64(v) * fraction)
	debug.SetMemoryLimit(limit)
	return Result{Limit: limit, Source: Env}, nil
}
