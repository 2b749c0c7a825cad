package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edgesched/edgesched/agent/telemetry/bpf"
	"github.com/edgesched/edgesched/agent/telemetry/procfs"
)

const ns = "edgesched_agent"

// metrics are the agent's Prometheus metrics, in its own registry. The
// sampled values are exported by sampleCollector straight from the last
// records at scrape time; the rest are ordinary instruments.
type metrics struct {
	reg *prometheus.Registry

	samples            prometheus.Counter
	sampleErrors       *prometheus.CounterVec
	sampleDuration     prometheus.Histogram
	annotationWrites   *prometheus.CounterVec
	annotationSkips    *prometheus.CounterVec
	annotationDuration prometheus.Histogram
	annotationLast     prometheus.Gauge
	source             *prometheus.GaugeVec
}

// newMetrics creates the agent's metrics and registers them on
// Config.Registry (or a registry of its own). A registry the caller
// shares may already hold a collector of the same name (another agent in
// the process, an embedding program): an instrument of the same kind is
// then reused (both agents count into it) and anything else is an error
// naming the metric. The sampled values are never shared (their
// collector reads one agent), so a second agent on the same registry is
// refused with an error before it registers anything.
//
// A failure unregisters what this call registered, so the caller's
// registry is left as it was.
func newMetrics(a *Agent) (_ *metrics, err error) {
	m := &metrics{reg: a.cfg.Registry}
	if m.reg == nil {
		m.reg = prometheus.NewRegistry()
	}
	rec := &recordingRegisterer{reg: m.reg}
	defer func() {
		if err != nil {
			rec.undo()
		}
	}()
	return m, m.register(a, rec)
}

// recordingRegisterer registers on reg and remembers what it registered,
// so a failed newMetrics can take it back.
type recordingRegisterer struct {
	reg   prometheus.Registerer
	added []prometheus.Collector
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	err := r.reg.Register(c)
	if err == nil {
		r.added = append(r.added, c)
	}
	return err
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recordingRegisterer) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

func (r *recordingRegisterer) undo() {
	for _, c := range r.added {
		r.reg.Unregister(c)
	}
}

// register creates and registers every instrument on reg.
func (m *metrics) register(a *Agent, reg prometheus.Registerer) error {
	// First the sampled values, which are never shared (their collector
	// reads one agent): a second agent on this registry is refused here,
	// before it registers or reuses anything else.
	if err := reg.Register(&sampleCollector{a: a}); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return fmt.Errorf("%w: register the sampled metrics (%s_cpu_utilisation_ratio, ...): another agent's are on this registry", ErrMetrics, ns)
		}
		return fmt.Errorf("%w: register the sampled metrics (%s_cpu_utilisation_ratio, ...): %w", ErrMetrics, ns, err)
	}
	var err error
	if m.samples, err = register(reg, ns+"_samples_total", prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "samples_total",
		Help: "Successful samples of /proc (and the eBPF probes when loaded)."})); err != nil {
		return err
	}
	if m.sampleErrors, err = register(reg, ns+"_sample_errors_total", prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "sample_errors_total",
		Help: "Failed samples, by source (proc: the sample is dropped; ebpf: the probes are dropped and /proc continues)."}, []string{"source"})); err != nil {
		return err
	}
	if m.sampleDuration, err = register(reg, ns+"_sample_duration_seconds", prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "sample_duration_seconds",
		Help:    "Time to take one sample.",
		Buckets: prometheus.ExponentialBuckets(25e-6, 2, 14)})); err != nil { // 25 µs .. 0.2 s
		return err
	}
	if m.annotationWrites, err = register(reg, ns+"_annotation_writes_total", prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "annotation_writes_total",
		Help: "Node telemetry annotation writes, by result (ok, error)."}, []string{"result"})); err != nil {
		return err
	}
	if m.annotationSkips, err = register(reg, ns+"_annotation_skips_total", prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "annotation_skips_total",
		Help: "Annotation writes skipped, by reason (unchanged: no change beyond the resolution and the last write is recent; too-soon)."}, []string{"reason"})); err != nil {
		return err
	}
	if m.annotationDuration, err = register(reg, ns+"_annotation_write_duration_seconds", prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "annotation_write_duration_seconds",
		Help: "Latency of one annotation patch (successful or not).", Buckets: prometheus.ExponentialBuckets(1e-3, 2, 14)})); err != nil {
		return err
	}
	if m.annotationLast, err = register(reg, ns+"_annotation_last_write_timestamp_seconds", prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "annotation_last_write_timestamp_seconds",
		Help: "Timestamp (the summary's ts) of the last annotation written."})); err != nil {
		return err
	}
	if m.source, err = register(reg, ns+"_telemetry_source", prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "telemetry_source",
		Help: "1 for the telemetry source in use: ebpf (eBPF probes plus /proc) or proc (/proc only)."}, []string{"source"})); err != nil {
		return err
	}
	info, err := register(reg, ns+"_info", prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "info",
		Help: "Always 1; seed is the run's seed (--seed, or the one drawn at start): every random stream of the agent derives from it."}, []string{"seed"}))
	if err != nil {
		return err
	}
	info.WithLabelValues(strconv.FormatUint(a.cfg.Seed, 10)).Set(1)
	for _, r := range []string{"ok", "error"} {
		m.annotationWrites.WithLabelValues(r)
	}
	for _, r := range []string{decideUnchanged, decideTooSoon} {
		m.annotationSkips.WithLabelValues(r)
	}
	m.sampleErrors.WithLabelValues(SourceProc)
	m.sampleErrors.WithLabelValues(SourceEBPF)
	m.setSource(SourceProc)
	// The Go runtime's and the process's: an embedding program often has
	// them already.
	if _, err := register(reg, "go_* (Go runtime collector)", collectors.NewGoCollector()); err != nil {
		return err
	}
	if _, err := register(reg, "process_* (process collector)", collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return err
	}
	return nil
}

// ErrMetrics wraps the failures to register a metric.
var ErrMetrics = errors.New("agent: metric not registered")

// register registers c on reg as metric name. When reg already holds a
// collector with the same descriptors, that collector is returned instead
// if it is of c's kind (T); any other clash is an error naming the metric.
func register[T prometheus.Collector](reg prometheus.Registerer, name string, c T) (T, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing, nil
		}
		return c, fmt.Errorf("%w: %s: the registry holds another kind of collector (%T) under that name", ErrMetrics, name, are.ExistingCollector)
	}
	return c, fmt.Errorf("%w: %s: %w", ErrMetrics, name, err)
}

func (m *metrics) setSource(s string) {
	for _, x := range []string{SourceEBPF, SourceProc} {
		v := 0.0
		if x == s {
			v = 1
		}
		m.source.WithLabelValues(x).Set(v)
	}
}

// handler serves the registry. ContinueOnError: a collector that fails
// (the site's model state unreadable for a moment) loses its own series,
// not the scrape's; the error is logged.
func (m *metrics) handler(log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, ErrorLog: scrapeLog{log}, Registry: m.reg})
}

// scrapeLog is promhttp's error log on the agent's logger.
type scrapeLog struct{ log *slog.Logger }

func (l scrapeLog) Println(v ...any) { l.log.Warn("metrics scrape: " + fmt.Sprint(v...)) }

// Descriptions of the sampled values.
var (
	descCPU = prometheus.NewDesc(ns+"_cpu_utilisation_ratio",
		"Busy share of a CPU (cpu=\"all\": all of them) over the last sample interval (/proc/stat).", []string{"cpu"}, nil)
	descMemTotal     = prometheus.NewDesc(ns+"_memory_total_bytes", "MemTotal (/proc/meminfo).", nil, nil)
	descMemAvailable = prometheus.NewDesc(ns+"_memory_available_bytes", "MemAvailable (/proc/meminfo).", nil, nil)
	descLoad         = prometheus.NewDesc(ns+"_load_average", "Load average over 1, 5 and 15 minutes (/proc/loadavg).", []string{"window"}, nil)
	descProcs        = prometheus.NewDesc(ns+"_procs", "Runnable (running) and blocked-on-I/O (blocked) tasks (/proc/stat).", []string{"state"}, nil)
	descPSIAvg       = prometheus.NewDesc(ns+"_pressure_avg10_ratio",
		"Share of the last 10 s some or all non-idle tasks were stalled on the resource (PSI, /proc/pressure).", []string{"resource", "kind"}, nil)
	descPSITotal = prometheus.NewDesc(ns+"_pressure_stalled_seconds_total",
		"Cumulative stall time (PSI, /proc/pressure).", []string{"resource", "kind"}, nil)
	descNet        = prometheus.NewDesc(ns+"_network_bytes_total", "Bytes by device and direction (/proc/net/dev).", []string{"device", "direction"}, nil)
	descNetPackets = prometheus.NewDesc(ns+"_network_packets_total", "Packets by device and direction (/proc/net/dev).", []string{"device", "direction"}, nil)
	descNetErrors  = prometheus.NewDesc(ns+"_network_errors_total", "Errors by device and direction (/proc/net/dev).", []string{"device", "direction"}, nil)
	descNetDrops   = prometheus.NewDesc(ns+"_network_drops_total", "Dropped packets by device and direction (/proc/net/dev).", []string{"device", "direction"}, nil)
	descTCPSegs    = prometheus.NewDesc(ns+"_tcp_segments_total", "TCP segments received (in), sent (out) and retransmitted (retrans) (/proc/net/snmp).", []string{"kind"}, nil)
	descCgCPU      = prometheus.NewDesc(ns+"_cgroup_cpu_seconds_total", "CPU time of the measured cgroup's tasks.", []string{"cgroup"}, nil)
	descCgMem      = prometheus.NewDesc(ns+"_cgroup_memory_bytes", "Memory charged to the measured cgroup.", []string{"cgroup"}, nil)
	descCgCPULim   = prometheus.NewDesc(ns+"_cgroup_cpu_limit_cpus", "CPU limit of the measured cgroup (0: none).", []string{"cgroup"}, nil)
	descCgMemLim   = prometheus.NewDesc(ns+"_cgroup_memory_limit_bytes", "Memory limit of the measured cgroup (0: none).", []string{"cgroup"}, nil)
	descRunq       = prometheus.NewDesc(ns+"_runqueue_latency_seconds",
		"Run-queue latency (wakeup to running) of every task since the probes loaded (eBPF, log2 buckets).", nil, nil)
	descRetrans = prometheus.NewDesc(ns+"_ebpf_tcp_retransmits_total", "TCP retransmissions seen by the eBPF probe since it loaded.", nil, nil)
	descLast    = prometheus.NewDesc(ns+"_last_sample_timestamp_seconds", "Time of the last successful sample.", nil, nil)
	// The node summary over the window as last built (the annotation's
	// content), one metric per unit, in Prometheus' base units.
	descSummaryCPU = prometheus.NewDesc(ns+"_summary_cpu_utilisation_ratio",
		"The summary's CPU utilisation over the window, busy share of all CPUs (annotation cpu).", nil, nil)
	descSummaryMem = prometheus.NewDesc(ns+"_summary_memory_used_ratio",
		"The summary's memory in use, (MemTotal - MemAvailable) / MemTotal (annotation mem).", nil, nil)
	descSummaryLoad = prometheus.NewDesc(ns+"_summary_load_average_1m",
		"The summary's 1-minute load average, runnable plus uninterruptible tasks (annotation load1).", nil, nil)
	descSummaryRunq = prometheus.NewDesc(ns+"_summary_runqueue_latency_p99_seconds",
		"The summary's 99th percentile run-queue latency over the window (eBPF only; annotation runqP99Us, in microseconds there).", nil, nil)
	descSummaryRetrans = prometheus.NewDesc(ns+"_summary_tcp_retransmits_per_second",
		"The summary's TCP retransmitted segments per second over the window (annotation retransPerS).", nil, nil)
)

// sampleCollector exports the last sample (and the last summary).
type sampleCollector struct{ a *Agent }

func (c *sampleCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCPU, descMemTotal, descMemAvailable, descLoad, descProcs, descPSIAvg, descPSITotal,
		descNet, descNetPackets, descNetErrors, descNetDrops, descTCPSegs, descCgCPU, descCgMem, descCgCPULim, descCgMemLim,
		descRunq, descRetrans, descLast, descSummaryCPU, descSummaryMem, descSummaryLoad, descSummaryRunq, descSummaryRetrans} {
		ch <- d
	}
}

func (c *sampleCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.ring.len()
	if n == 0 {
		return
	}
	last := a.ring.at(n - 1)
	p := &last.Proc
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(descLast, float64(last.At.UnixNano())/1e9)
	if n >= 2 {
		prev := a.ring.at(n - 2)
		if u, ok := procfs.Utilisation(prev.Proc.Stat.Total, p.Stat.Total); ok {
			gauge(descCPU, u, "all")
		}
		for i, on := range p.Stat.Online {
			if on && i < len(prev.Proc.Stat.Online) && prev.Proc.Stat.Online[i] {
				if u, ok := procfs.Utilisation(prev.Proc.Stat.CPUs[i], p.Stat.CPUs[i]); ok {
					gauge(descCPU, u, strconv.Itoa(i))
				}
			}
		}
	}
	gauge(descMemTotal, float64(p.Mem.MemTotal))
	gauge(descMemAvailable, float64(p.Mem.MemAvailable))
	gauge(descLoad, p.Load.Load1, "1m")
	gauge(descLoad, p.Load.Load5, "5m")
	gauge(descLoad, p.Load.Load15, "15m")
	gauge(descProcs, float64(p.Stat.ProcsRunning), "running")
	gauge(descProcs, float64(p.Stat.ProcsBlocked), "blocked")
	for i := range procfs.NumPSI {
		if !p.HasPSI[i] {
			continue
		}
		r := procfs.PSIName(i)
		gauge(descPSIAvg, p.PSI[i].Some.Avg10/100, r, "some")
		counter(descPSITotal, p.PSI[i].Some.Total.Seconds(), r, "some")
		if p.PSI[i].HasFull {
			gauge(descPSIAvg, p.PSI[i].Full.Avg10/100, r, "full")
			counter(descPSITotal, p.PSI[i].Full.Total.Seconds(), r, "full")
		}
	}
	for _, d := range p.NetDev {
		counter(descNet, float64(d.RxBytes), d.Name, "receive")
		counter(descNet, float64(d.TxBytes), d.Name, "transmit")
		counter(descNetPackets, float64(d.RxPackets), d.Name, "receive")
		counter(descNetPackets, float64(d.TxPackets), d.Name, "transmit")
		counter(descNetErrors, float64(d.RxErrors), d.Name, "receive")
		counter(descNetErrors, float64(d.TxErrors), d.Name, "transmit")
		counter(descNetDrops, float64(d.RxDropped), d.Name, "receive")
		counter(descNetDrops, float64(d.TxDropped), d.Name, "transmit")
	}
	if p.HasTCP {
		counter(descTCPSegs, float64(p.TCP.InSegs), "in")
		counter(descTCPSegs, float64(p.TCP.OutSegs), "out")
		counter(descTCPSegs, float64(p.TCP.RetransSegs), "retrans")
	}
	if p.HasCgroup {
		cg := a.cfg.Proc.Cgroup
		counter(descCgCPU, p.Cgroup.CPU.Seconds(), cg)
		if p.Cgroup.HasMemory {
			gauge(descCgMem, float64(p.Cgroup.Memory), cg)
			gauge(descCgMemLim, float64(p.Cgroup.MemoryLimit), cg)
		}
		gauge(descCgCPULim, p.Cgroup.CPULimit, cg)
	}
	if last.HasKern {
		ch <- runqHistogram(last.Kernel.RunQueue)
		counter(descRetrans, float64(last.Kernel.Retransmits))
	}
	if s := a.lastSummary; s != nil {
		gauge(descSummaryCPU, s.CPU)
		gauge(descSummaryMem, s.Mem)
		gauge(descSummaryLoad, s.Load1)
		if s.RunQueueP99Us != nil {
			gauge(descSummaryRunq, *s.RunQueueP99Us*1e-6)
		}
		if s.RetransPerS != nil {
			gauge(descSummaryRetrans, *s.RetransPerS)
		}
	}
}

// runqHistogram renders the cumulative log2 µs histogram as a Prometheus
// histogram in seconds: bucket i's upper bound is 2^(i+1) µs; the last
// bucket (everything above 2^31 µs) is only in +Inf. The sum is estimated
// from bucket midpoints (the probes keep no sum).
func runqHistogram(h bpf.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, bpf.NumBuckets-1)
	var cum uint64
	var sum float64
	for i, c := range h.Buckets {
		cum += c
		lo, hi := 0.0, math.Ldexp(1, i+1)
		if i > 0 {
			lo = math.Ldexp(1, i)
		}
		sum += float64(c) * (lo + hi) / 2 * float64(time.Microsecond) / float64(time.Second)
		if i < bpf.NumBuckets-1 {
			buckets[hi*1e-6] = cum
		}
	}
	return prometheus.MustNewConstHistogram(descRunq, cum, sum, buckets)
}
