package memlimit

import (
	"errors"
	"fmt"
	"math"
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
// number of bytes, or a bad Config.
var ErrValue = errors.New("memlimit: bad memory limit")

// Config says where the limit comes from. Start from DefaultConfig.
type Config struct {
	// Getenv reads the environment (nil: os.Getenv).
	Getenv func(string) string
	// Fraction of the container's limit given to the runtime, in (0, 1]
	// (0: DefaultFraction).
	Fraction float64
}

// DefaultConfig reads the process environment and gives the runtime
// DefaultFraction of the limit.
func DefaultConfig() Config { return Config{Getenv: os.Getenv, Fraction: DefaultFraction} }

// Validate checks Fraction.
func (c Config) Validate() error {
	if c.Fraction != 0 && !(c.Fraction > 0 && c.Fraction <= 1) {
		return fmt.Errorf("%w: fraction %v, want (0, 1]", ErrValue, c.Fraction)
	}
	return nil
}

// Result says what Apply did.
type Result struct {
	// Limit is the runtime's soft memory limit in bytes after Apply
	// (math.MaxInt64: none).
	Limit int64
	// Source is "GOMEMLIMIT" (set by the user, left alone), Env (set from
	// the container's limit) or "" (neither variable set: nothing done).
	Source string
}

// Apply sets the runtime's soft memory limit to cfg.Fraction of the
// bytes in the variable Env. A set GOMEMLIMIT wins and is left alone. A
// malformed or non-positive Env value is an error naming it, and the
// limit is left unchanged. In Kubernetes the chart fills Env from the
// downward API (resourceFieldRef limits.memory); a container without a
// memory limit gets the node's allocatable memory there.
func Apply(cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{Limit: debug.SetMemoryLimit(-1)}, err
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Fraction == 0 {
		cfg.Fraction = DefaultFraction
	}
	if cfg.Getenv("GOMEMLIMIT") != "" {
		return Result{Limit: debug.SetMemoryLimit(-1), Source: "GOMEMLIMIT"}, nil
	}
	raw := strings.TrimSpace(cfg.Getenv(Env))
	if raw == "" {
		return Result{Limit: debug.SetMemoryLimit(-1)}, nil
	}
	v, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || v <= 0 {
		return Result{Limit: debug.SetMemoryLimit(-1)}, fmt.Errorf("%w: %s=%q, want a positive number of bytes", ErrValue, Env, raw)
	}
	// float64(MaxInt64) rounds up to 2^63: clamp before converting back
	limit := int64(math.MaxInt64)
	if f := float64(v) * cfg.Fraction; f < math.MaxInt64 {
		limit = int64(f)
	}
	debug.SetMemoryLimit(limit)
	return Result{Limit: limit, Source: Env}, nil
}
