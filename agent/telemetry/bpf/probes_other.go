//go:build !((386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm) && linux)

package bpf

import (
	"fmt"
	"log/slog"
	"runtime"
)

// Probes are the loaded and attached programs; on this platform they never
// load.
type Probes struct{}

// Load always fails here: the programs are built for little-endian Linux
// only. The error wraps ErrUnavailable.
func Load(cfg Config, log *slog.Logger) (*Probes, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: no eBPF programs for %s/%s (little-endian Linux only)", ErrUnavailable, runtime.GOOS, runtime.GOARCH)
}

// Snapshot returns ErrClosed: Probes cannot exist on this platform.
func (p *Probes) Snapshot() (Snapshot, error) { return Snapshot{}, ErrClosed }

// Close does nothing.
func (p *Probes) Close() error { return nil }
