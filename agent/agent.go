package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/edgesched/edgesched/agent/telemetry/procfs"
	"github.com/edgesched/edgesched/kubefmt"
)

// Telemetry sources (the source label of edgesched_agent_telemetry_source).
const (
	SourceEBPF = "ebpf"
	SourceProc = "proc"
)

// Agent samples its node and publishes the telemetry summary. Create it
// with New, run it once with Run; Handler may be served from any
// goroutine.
type Agent struct {
	cfg  Config
	log  *slog.Logger
	col  *procfs.Collector
	seed uint64 // the annotator's backoff jitter, derived from cfg.Seed (the run's)
	m    *metrics

	// sampled is signalled (without blocking) after every sample.
	sampled chan struct{}

	// mu guards the fields below: written by the sampling goroutine, read
	// by the annotator, the metrics collector and /healthz.
	mu          sync.Mutex
	ring        *ring
	started     time.Time // when Run began sampling
	lastOK      time.Time // the last successful sample
	lastErr     error     // the last sampling error, nil after a success
	source      string
	lastSummary *kubefmt.TelemetrySummary // the last summary built (metrics)

	// Owned by the sampling goroutine.
	probes  Probes
	scratch procfs.Sample

	// Owned by the annotating goroutine.
	lim          limiter
	writeFailing bool

	runOnce sync.Once
}

// New checks cfg and prepares an agent: it opens the /proc collector
// (resolving the cgroup, if any) and registers the metrics. It starts
// nothing.
func New(cfg Config) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	col, err := procfs.New(cfg.Proc)
	if err != nil {
		return nil, fmt.Errorf("open /proc collector: %w", err)
	}
	runSeed := ResolveSeed(cfg.Seed)
	cfg.Seed = runSeed
	// Records cover the window plus one sample interval of slack; at most
	// MaxRingSamples (Validate)
	size := int(ringSamples(cfg.Window, cfg.SampleInterval))
	a := &Agent{
		cfg: cfg, log: log, col: col, seed: DeriveSeed(runSeed, SeedAnnotator),
		sampled: make(chan struct{}, 1),
		ring:    newRing(size),
		source:  SourceProc,
		lim:     limiter{interval: cfg.AnnotateInterval, refresh: cfg.StaleAfter / 2},
	}
	if a.m, err = newMetrics(a); err != nil {
		return nil, err
	}
	return a, nil
}

// Seed is the run's seed (Config.Seed, or the one drawn for a zero
// Seed): what the start log and edgesched_agent_info{seed} show.
func (a *Agent) Seed() uint64 { return a.cfg.Seed }

// Run samples and annotates until ctx ends, with the components and the
// metrics server beside. It returns nil after a graceful stop (ctx
// ended), or the first error of a part (a component, the metrics
// listener), having stopped the others. Run may be called once.
func (a *Agent) Run(ctx context.Context) error {
	err := errors.New("agent: Run called twice")
	a.runOnce.Do(func() { err = a.run(ctx) })
	return err
}

func (a *Agent) run(parent context.Context) error {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	a.log.Info("edge-agent starting", "node", a.cfg.NodeName, "sampleInterval", a.cfg.SampleInterval,
		"annotateInterval", a.cfg.AnnotateInterval, "window", a.cfg.Window, "cgroup", a.cfg.Proc.Cgroup,
		"annotate", a.cfg.Client != nil, "seed", a.cfg.Seed)

	var ln net.Listener
	if a.cfg.MetricsAddr != "" {
		var err error
		if ln, err = net.Listen("tcp", a.cfg.MetricsAddr); err != nil {
			return fmt.Errorf("metrics listener: %w", err)
		}
		a.log.Info("serving /metrics and /healthz", "addr", ln.Addr().String())
	}
	a.loadProbes()
	defer a.closeProbes()

	var wg sync.WaitGroup
	// spawn runs part under ctx; an error cancels the others with it.
	spawn := func(name string, part func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := part(ctx); err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("%s: %w", name, err))
			}
		}()
	}
	spawn("sampler", a.sampleLoop)
	if a.cfg.Client != nil {
		spawn("annotator", a.annotateLoop)
	} else {
		a.log.Info("no Kubernetes client: node annotations are not written")
	}
	if ln != nil {
		srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 5 * time.Second}
		spawn("metrics server", func(ctx context.Context) error {
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ln) }() // ends when Shutdown below closes ln
			select {
			case err := <-errc:
				return err
			case <-ctx.Done():
			}
			sctx, scancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
			defer scancel()
			if err := srv.Shutdown(sctx); err != nil {
				srv.Close()
			}
			<-errc
			return nil
		})
	}
	for i, c := range a.cfg.Components {
		spawn(fmt.Sprintf("component %d (%T)", i, c), c.Run)
	}
	<-ctx.Done()
	wg.Wait()
	if cause := context.Cause(ctx); parent.Err() == nil && cause != nil {
		a.log.Error("edge-agent stopping", "err", cause)
		return cause
	}
	a.log.Info("edge-agent stopped")
	return nil
}

// loadProbes loads the kernel probes, or says once why /proc alone is
// used.
func (a *Agent) loadProbes() {
	if a.cfg.LoadProbes == nil {
		a.log.Info("eBPF telemetry disabled; sampling /proc only")
		a.setSource(SourceProc)
		return
	}
	p, err := a.cfg.LoadProbes(a.log)
	if err != nil {
		a.log.Warn("eBPF telemetry unavailable; sampling /proc only", "reason", err)
		a.setSource(SourceProc)
		return
	}
	a.probes = p
	a.setSource(SourceEBPF)
	a.log.Info("eBPF telemetry loaded")
}

func (a *Agent) closeProbes() {
	if a.probes == nil {
		return
	}
	if err := a.probes.Close(); err != nil {
		a.log.Warn("closing eBPF probes", "err", err)
	}
	a.probes = nil
}

func (a *Agent) setSource(s string) {
	a.mu.Lock()
	a.source = s
	a.mu.Unlock()
	a.m.setSource(s)
}

// sampleLoop samples every SampleInterval until ctx ends.
func (a *Agent) sampleLoop(ctx context.Context) error {
	a.mu.Lock()
	a.started = a.cfg.Now()
	a.mu.Unlock()
	tick := time.NewTicker(a.cfg.SampleInterval)
	defer tick.Stop()
	for {
		a.sampleOnce()
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// sampleOnce takes one sample into the ring. A /proc failure drops the
// sample (counted, logged when it starts and when it ends); a probe
// failure drops the probes for good (one warning) and keeps /proc.
func (a *Agent) sampleOnce() {
	start := time.Now()
	at := a.cfg.Now()
	err := a.col.Sample(&a.scratch)
	var ks kernelSample
	hasKern := false
	if err == nil && a.probes != nil {
		snap, perr := a.probes.Snapshot()
		if perr != nil {
			a.m.sampleErrors.WithLabelValues(SourceEBPF).Inc()
			a.log.Warn("eBPF telemetry failed; sampling /proc only from now on", "reason", perr)
			a.closeProbes()
			a.setSource(SourceProc)
		} else {
			ks, hasKern = kernelSample{RunQueue: snap.RunQueue, Retransmits: snap.Retransmits}, true
			if a.cfg.OnProbeSnapshot != nil {
				a.cfg.OnProbeSnapshot(at, snap)
			}
		}
	}
	a.m.sampleDuration.Observe(time.Since(start).Seconds())
	a.mu.Lock()
	if err != nil {
		first := a.lastErr == nil
		a.lastErr = err
		a.mu.Unlock()
		a.m.sampleErrors.WithLabelValues(SourceProc).Inc()
		if first {
			a.log.Warn("sampling /proc failed", "err", err)
		}
		return
	}
	recovered := a.lastErr != nil
	a.lastErr = nil
	rec := a.ring.next()
	rec.At, rec.Kernel, rec.HasKern = at, ks, hasKern
	a.scratch.CopyTo(&rec.Proc)
	a.ring.push()
	a.lastOK = at
	if s, ok := a.summaryLocked(); ok {
		a.lastSummary = &s
	}
	a.mu.Unlock()
	a.m.samples.Inc()
	if recovered {
		a.log.Info("sampling /proc works again")
	}
	select {
	case a.sampled <- struct{}{}:
	default:
	}
}

// summary builds the summary of the current window.
func (a *Agent) summary() (kubefmt.TelemetrySummary, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.summaryLocked()
}

func (a *Agent) summaryLocked() (kubefmt.TelemetrySummary, bool) {
	return buildSummary(summaryInput{base: a.ring.base(a.cfg.Window), last: a.ring.last(), cgroup: a.cfg.Proc.Cgroup != ""})
}

// Healthy returns nil while sampling works: a successful sample no more
// than StallAfter ago (or Run started less than StallAfter ago); else an
// error wrapping ErrStalled with the last sampling error.
func (a *Agent) Healthy() error {
	now := a.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.started.IsZero():
		return fmt.Errorf("%w: not started", ErrStalled)
	case !a.lastOK.IsZero() && now.Sub(a.lastOK) <= a.cfg.StallAfter:
		return nil
	case a.lastOK.IsZero() && now.Sub(a.started) <= a.cfg.StallAfter:
		return nil
	}
	last := "never"
	if !a.lastOK.IsZero() {
		last = now.Sub(a.lastOK).Round(time.Millisecond).String() + " ago"
	}
	if a.lastErr != nil {
		return fmt.Errorf("%w: last sample %s (bound %v): %v", ErrStalled, last, a.cfg.StallAfter, a.lastErr)
	}
	return fmt.Errorf("%w: last sample %s (bound %v)", ErrStalled, last, a.cfg.StallAfter)
}

// Handler serves /metrics (Prometheus text format, the agent's own
// registry) and /healthz (200 "ok", or 503 with the reason).
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", a.m.handler(a.log))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := a.Healthy(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}
