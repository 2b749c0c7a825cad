package sources

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// MetricsSubsystem is the subsystem of the scheduler's metrics
// (edgesched_plugin_*), shared by every edge-scheduler package.
const MetricsSubsystem = "edgesched_plugin"

// Owner is the name the sources log under and write in their Events: the
// plugin's (edgeplugin.Name).
const Owner = "EdgePolicy"

var (
	metricModelVersion = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      MetricsSubsystem,
		Name:           "model_version",
		Help:           "Version of the int8 model in use (0 when none is loaded), labelled by its model ID prefix.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"model_id"})
	metricRefusals = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      MetricsSubsystem,
		Name:           "model_refusals_total",
		Help:           "Model files refused (the previous model stays), by reason (read, signature, artifact, int8, sanity, rollback, stale, state; read and state are retried, each attempt counted).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	metricSwaps = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      MetricsSubsystem,
		Name:           "model_swaps_total",
		Help:           "Models installed (the first load included).",
		StabilityLevel: metrics.ALPHA,
	})
)

var registerOnce sync.Once

// RegisterMetrics registers the model's, the dependency graph's and the
// topology's metrics in the legacy registry (once; the policy's wait for
// RegisterPolicyMetrics).
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(metricModelVersion, metricRefusals, metricSwaps,
			metricDependencyEdges, metricDependencyPartners, metricDependencyUpdates, metricTopologyZones, metricTopologyUpdates)
	})
}
