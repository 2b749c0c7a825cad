package agent

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgesched/edgesched/agent/telemetry/bpf"
	"github.com/edgesched/edgesched/agent/telemetry/procfs"
	"github.com/edgesched/edgesched/internal/kube"
	"github.com/edgesched/edgesched/kubefmt"
)

// Defaults of Config.
const (
	DefaultSampleInterval   = time.Second
	DefaultAnnotateInterval = 10 * time.Second
	// DefaultStaleAfter is the scheduler plugin's default staleness bound.
	DefaultStaleAfter = kubefmt.DefaultTelemetryMaxAge
	DefaultRetryMin   = 500 * time.Millisecond
	// DefaultShutdownTimeout bounds the metrics server's graceful stop.
	DefaultShutdownTimeout = 5 * time.Second
	// MaxRingSamples caps the samples the agent keeps in memory: the
	// ring holds Window/SampleInterval + 3 of them (the window plus
	// slack), and Validate refuses settings that need more. 4,096 holds
	// the longest window (kubefmt.MaxTelemetryWindow, an hour) at the
	// default 1 s interval, in about 3.4 MiB (880 bytes a sample) plus the per-CPU and
	// per-device counters each sample copies; without the cap the
	// extreme settings (an hour at 10 ms) kept about 360,000 samples.
	MaxRingSamples = 4096
)

// ringSamples is how many samples the ring keeps for a window sampled
// every interval (both positive).
func ringSamples(window, interval time.Duration) int64 { return int64(window/interval) + 3 }

// Errors.
var (
	// ErrConfig is wrapped by every Validate error.
	ErrConfig = errors.New("agent: invalid config")
	// ErrStalled is what /healthz reports when sampling has stopped.
	ErrStalled = errors.New("agent: sampling stalled")
)

// Component is a long-running part of the agent process (the site
// leader, the trace recorder, ...): Run is called once, under the agent's
// context, and must return when that context ends. A Component that
// returns an error before then stops the whole agent with that error; one
// that returns nil early simply ends.
type Component interface {
	Run(ctx context.Context) error
}

// Probes are the kernel probes the agent reads (agent/telemetry/bpf's
// *Probes). Snapshot returns counters cumulative since load and must be
// safe to call from the sampling goroutine while Close is pending.
type Probes interface {
	Snapshot() (bpf.Snapshot, error)
	Close() error
}

var _ Probes = (*bpf.Probes)(nil)

// Config configures an Agent. Every zero field means the default its
// comment names; DefaultConfig returns them filled in.
type Config struct {
	// NodeName is the Node whose telemetry annotation the agent writes.
	// Required when Client is set.
	NodeName string
	// OnProbeSnapshot, when set, receives every eBPF snapshot the agent
	// takes (e.g. the site trace recorder's flow counts). It is called on
	// the sampling goroutine and must not block. Nil: nothing.
	OnProbeSnapshot func(at time.Time, s bpf.Snapshot)
	// Registry is where the agent registers its metrics and what /metrics
	// serves, so components can add theirs. Nil: a registry of its own.
	Registry *prometheus.Registry
	// Client writes the annotation (a PATCH of the Node): kube.NewForConfig's
	// clients, or a client-go clientset adapted by kube/kubeclientset.
	// Nil means the agent does not write annotations (metrics only, e.g.
	// to measure it without a cluster).
	Client kube.Interface
	// Logger receives the agent's logs. Nil discards them.
	Logger *slog.Logger
	// Proc says where the /proc collector reads, and which cgroup (if any)
	// stands for the node: with Proc.Cgroup set, the summary's CPU and
	// memory are that cgroup's, against its limits (or the host's CPUs and
	// memory when it has none).
	Proc procfs.Config
	// LoadProbes loads the kernel probes (e.g. bpf.Load). Nil means eBPF
	// is disabled: /proc only, logged once at Info. When it fails the
	// agent logs one warning with the reason and uses /proc only.
	LoadProbes func(log *slog.Logger) (Probes, error)
	// SampleInterval is the period of sampling /proc and the probes. Zero
	// means DefaultSampleInterval. At least 10 ms, at most
	// AnnotateInterval, and long enough that Window holds at most
	// MaxRingSamples samples (Window/SampleInterval + 3).
	SampleInterval time.Duration
	// AnnotateInterval is the least time between two annotation writes
	// (and the period at which a write is considered). Zero means
	// DefaultAnnotateInterval.
	AnnotateInterval time.Duration
	// Window is the span the summary's measures cover, ending at the last
	// sample. Zero means AnnotateInterval. In [kubefmt.MinTelemetryWindow,
	// kubefmt.MaxTelemetryWindow].
	Window time.Duration
	// StaleAfter is the scheduler plugin's staleness bound: an unchanged
	// summary is rewritten once the last write is StaleAfter/2 old, so it
	// never goes stale. Zero means DefaultStaleAfter. With a Client,
	// AnnotateInterval must be below StaleAfter/2; without one nothing is
	// written and the bound is not checked.
	StaleAfter time.Duration
	// StallAfter is how long without a successful sample makes /healthz
	// fail. Zero means 5 × SampleInterval, at least 5 s.
	StallAfter time.Duration
	// RetryMin and RetryMax bound the jittered exponential backoff between
	// failed annotation writes. Zero means DefaultRetryMin and
	// AnnotateInterval.
	RetryMin, RetryMax time.Duration
	// Seed is the run's seed: logged once at start ("seed"), exported as
	// edgesched_agent_info{seed}, and the root every random stream of the
	// agent is derived from (DeriveSeed; the annotator's backoff jitter
	// is DeriveSeed(Seed, SeedAnnotator)), so a run is reproducible from
	// the logged value. Zero means a seed drawn from crypto/rand
	// (ResolveSeed).
	Seed uint64
	// MetricsAddr is the address of the HTTP server for /metrics and
	// /healthz (e.g. ":9560"). Empty means no server (Handler still
	// serves them).
	MetricsAddr string
	// ShutdownTimeout bounds the HTTP server's graceful stop. Zero means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Components run beside the telemetry loops, under the agent's
	// context (see Component).
	Components []Component
	// Now is the clock. Nil means time.Now. Tests inject one.
	Now func() time.Time
}

// DefaultConfig returns a Config with every default filled in (no node,
// no client, no probes, no metrics server).
func DefaultConfig() Config {
	var c Config
	c.setDefaults()
	return c
}

func (c *Config) setDefaults() {
	if c.Proc.ProcRoot == "" {
		c.Proc.ProcRoot = procfs.DefaultConfig().ProcRoot
	}
	if c.Proc.SysRoot == "" {
		c.Proc.SysRoot = procfs.DefaultConfig().SysRoot
	}
	if c.SampleInterval == 0 {
		c.SampleInterval = DefaultSampleInterval
	}
	if c.AnnotateInterval == 0 {
		c.AnnotateInterval = DefaultAnnotateInterval
	}
	if c.Window == 0 {
		c.Window = c.AnnotateInterval
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = DefaultStaleAfter
	}
	if c.StallAfter == 0 {
		c.StallAfter = max(5*c.SampleInterval, 5*time.Second)
	}
	if c.RetryMin == 0 {
		c.RetryMin = DefaultRetryMin
	}
	if c.RetryMax == 0 {
		c.RetryMax = max(c.AnnotateInterval, c.RetryMin)
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports every problem of c (after defaults), each wrapping
// ErrConfig.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
	}
	if c.Client != nil && c.NodeName == "" {
		bad("a node name is required to write its annotation")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"sample interval", c.SampleInterval}, {"annotate interval", c.AnnotateInterval}, {"window", c.Window},
		{"stale-after", c.StaleAfter}, {"stall-after", c.StallAfter}, {"retry min", c.RetryMin}, {"retry max", c.RetryMax},
		{"shutdown timeout", c.ShutdownTimeout}} {
		if d.v < 0 {
			bad("%s %v is negative", d.name, d.v)
		}
	}
	if c.SampleInterval > 0 && c.SampleInterval < 10*time.Millisecond {
		bad("sample interval %v is below 10ms", c.SampleInterval)
	}
	if c.SampleInterval > c.AnnotateInterval {
		bad("sample interval %v is longer than the annotate interval %v", c.SampleInterval, c.AnnotateInterval)
	}
	if c.Window > 0 && (c.Window < kubefmt.MinTelemetryWindow || c.Window > kubefmt.MaxTelemetryWindow) {
		bad("window %v not in [%v, %v]", c.Window, kubefmt.MinTelemetryWindow, kubefmt.MaxTelemetryWindow)
	}
	if c.Window > 0 && c.Window < c.SampleInterval {
		bad("window %v is shorter than the sample interval %v", c.Window, c.SampleInterval)
	}
	if c.Window > 0 && c.SampleInterval > 0 && ringSamples(c.Window, c.SampleInterval) > MaxRingSamples {
		// the shortest interval that fits, in whole milliseconds
		least := time.Duration(math.Ceil(float64(c.Window)/float64((MaxRingSamples-3)*time.Millisecond))) * time.Millisecond
		bad("sample interval %v with window %v keeps %d samples in memory, above the cap of %d (MaxRingSamples): sample every %v or more, or shorten the window",
			c.SampleInterval, c.Window, ringSamples(c.Window, c.SampleInterval), MaxRingSamples, least)
	}
	if c.Client != nil && c.StaleAfter > 0 && c.AnnotateInterval >= c.StaleAfter/2 {
		bad("annotate interval %v must be below half the stale-after bound %v", c.AnnotateInterval, c.StaleAfter)
	}
	if c.StallAfter > 0 && c.StallAfter <= c.SampleInterval {
		bad("stall-after %v must exceed the sample interval %v", c.StallAfter, c.SampleInterval)
	}
	if c.RetryMax < c.RetryMin {
		bad("retry max %v is below retry min %v", c.RetryMax, c.RetryMin)
	}
	if err := c.Proc.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrConfig, err))
	}
	for i, comp := range c.Components {
		if comp == nil {
			bad("component %d is nil", i)
		}
	}
	return errors.Join(errs...)
}

// SeedAnnotator names the annotator's backoff jitter among the seeds
// derived from Config.Seed.
const SeedAnnotator = "annotator"

// ResolveSeed returns seed, or, when it is zero, a non-zero seed drawn
// from crypto/rand: the one seed of a run, which the caller logs.
func ResolveSeed(seed uint64) uint64 {
	var b [8]byte
	for seed == 0 {
		_, _ = rand.Read(b[:]) // never fails (crypto/rand panics on failure since Go 1.24)
		seed = binary.LittleEndian.Uint64(b[:])
	}
	return seed
}

// DeriveSeed returns the seed of one named component of a run from the
// run's seed: the same (seed, component) always gives the same value,
// and different components (or runs) get unrelated ones. It mixes the
// FNV-1a hash of the name into the seed and scrambles the result with
// SplitMix64's finaliser, so seeds that differ in one bit, and names
// that differ in one letter, give streams that do not resemble each
// other.
func DeriveSeed(seed uint64, component string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(component))
	z := seed ^ h.Sum64()
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
