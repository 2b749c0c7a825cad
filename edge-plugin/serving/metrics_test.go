package serving

import (
	"testing"

	"github.com/edgesched/edgesched/edge-plugin/sources"
)

// TestMetricsSubsystem: the core's metrics are in the subsystem the
// sources' are (edgesched_plugin_*, what the dashboards query).
func TestMetricsSubsystem(t *testing.T) {
	if metricsSubsystem != sources.MetricsSubsystem {
		t.Fatalf("serving's metrics subsystem %q, sources' %q", metricsSubsystem, sources.MetricsSubsystem)
	}
}
