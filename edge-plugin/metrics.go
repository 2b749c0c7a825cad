package edgeplugin

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/edgesched/edgesched/internal/cli"
)

// Metrics use k8s.io/component-base/metrics registered in its legacy
// registry: that is the registry kube-scheduler already serves on its
// secure /metrics endpoint (with its authn/authz), so the plugin's series
// appear next to scheduler_* without a second listener, and they follow
// the Kubernetes stability framework (all ALPHA here).
const metricsSubsystem = "edgesched_plugin"

var (
	metricModelVersion = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "model_version",
		Help:           "Version of the int8 model in use (0 when none is loaded), labelled by its model ID prefix.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"model_id"})
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
	metricRefusals = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "model_refusals_total",
		Help:           "Model files refused (the previous model stays), by reason (read, signature, artifact, rollback, int8).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	metricSwaps = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "model_swaps_total",
		Help:           "Models installed (the first load included).",
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

// RegisterMetrics registers the plugin's metrics in the legacy registry
// (idempotent). Metrics of component-base are no-ops until registered.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(metricModelVersion, metricInference, metricFallbacks, metricScoreCache, metricPanics, metricRefusals, metricSwaps, metricSkippedPods, metricTelemetryFallbacks,
			metricDependencyEdges, metricDependencyUpdates, metricTopologyZones, metricTopologyUpdates)
		// the registry has the Go runtime's and the process's already
		// (component-base registers them); the build is every daemon's
		legacyregistry.RawMustRegister(cli.BuildInfoCollector("edge-scheduler"))
	})
}
