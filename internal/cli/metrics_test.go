package cli_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/testutil/metricstest"
)

// TestRegisterProcessMetrics: a registry gets the Go, process and build
// collectors once (registering again is no error) and build_info names
// the stamped commit.
func TestRegisterProcessMetrics(t *testing.T) {
	cli.Commit = "0123456789abcdef0123456789abcdef01234567"
	defer func() { cli.Commit = "" }()
	reg := prometheus.NewRegistry()
	for range 2 {
		if err := cli.RegisterProcessMetrics(reg, "edge-test"); err != nil {
			t.Fatal(err)
		}
	}
	metricstest.CheckProcessMetrics(t, reg, "edge-test")
}
