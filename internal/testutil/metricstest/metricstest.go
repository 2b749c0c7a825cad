package metricstest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgesched/edgesched/internal/cli"
)

// CheckProcessMetrics fails t unless g gathers go_goroutines,
// process_start_time_seconds and edgesched_build_info{binary} = 1 with
// the build's commit: what RegisterProcessMetrics promises, for the tests
// of every daemon's /metrics.
func CheckProcessMetrics(t testing.TB, g prometheus.Gatherer, binary string) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		seen[mf.GetName()] = true
		if mf.GetName() != cli.BuildInfoName {
			continue
		}
		m := mf.GetMetric()
		if len(m) != 1 || m[0].GetGauge().GetValue() != 1 {
			t.Fatalf("%s: %v", cli.BuildInfoName, m)
		}
		labels := map[string]string{}
		for _, l := range m[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["binary"] != binary || labels["revision"] != cli.Info().Commit || labels["version"] == "" {
			t.Fatalf("%s labels %v, want binary %s revision %s", cli.BuildInfoName, labels, binary, cli.Info().Commit)
		}
	}
	for _, name := range []string{"go_goroutines", "process_start_time_seconds", cli.BuildInfoName} {
		if !seen[name] {
			t.Errorf("%s: no %s", binary, name)
		}
	}
}

// CheckProcessMetricsText is CheckProcessMetrics for a scraped /metrics
// body (the Prometheus text format).
func CheckProcessMetricsText(t testing.TB, body, binary string) {
	t.Helper()
	for _, want := range []string{"\ngo_goroutines ", "\nprocess_start_time_seconds ",
		"\n" + cli.BuildInfoName + `{binary="` + binary + `",build_date="`, `revision="` + cli.Info().Commit + `"`} {
		if !strings.Contains("\n"+body, want) {
			t.Errorf("%s /metrics lacks %q", binary, strings.TrimSpace(want))
		}
	}
}
