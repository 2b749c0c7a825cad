package serving

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/edgesched/edgesched/edge-plugin/sources"
)

// metricsSubsystem is sources.MetricsSubsystem, spelt out: the dashboard
// test reads metric names from the source (package constants only), and
// TestMetricsSubsystem keeps the two equal.
const metricsSubsystem = "edgesched_plugin"

var (
	metricInference = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "inference_duration_seconds",
		Help:           "Time to convert the snapshot, extract features and run the int8 policy for one pod's feasible nodes.",
		Buckets:        metrics.ExponentialBuckets(20e-6, 2.5, 12),
		StabilityLevel: metrics.ALPHA,
	})
	metricFallbacks = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "fallbacks_total",
		Help:           "Scheduling cycles scored neutrally (all 0) instead of by the model, by reason (no_model, panic, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	metricScoreCache = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "score_cache_total",
		Help:           "Candidate nodes scored from the per-node score cache (hit) or by feature extraction and inference (miss).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	metricPanics = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "panics_total",
		Help:           "Panics recovered inside feature extraction or model code.",
		StabilityLevel: metrics.ALPHA,
	})
	metricSkippedPods = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "snapshot_pods_skipped_total",
		Help:           "Running pods left out of the policy's view of a node because they do not fit the simulator's model of it (overcommit, bad GPU request).",
		StabilityLevel: metrics.ALPHA,
	})
	metricTelemetryFallbacks = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "telemetry_fallbacks_total",
		Help:           "Nodes modelled in a scheduling cycle whose load came from the usage model instead of the agent's telemetry annotation, by reason (missing, stale, malformed); one count per node per cycle.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
)

var registerOnce sync.Once

// RegisterMetrics registers the serving core's metrics, and the sources'
// (sources.RegisterMetrics), in the legacy registry kube-scheduler serves
// (once).
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(metricInference, metricFallbacks, metricScoreCache, metricPanics, metricSkippedPods, metricTelemetryFallbacks)
		sources.RegisterMetrics()
	})
}

// CountPanic counts a panic recovered in scheduling code outside the core
// (the plugin's and the extender's) in panics_total.
func CountPanic() { metricPanics.Inc() }
