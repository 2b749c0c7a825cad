package cli

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// BuildInfoName is the metric every daemon's /metrics has: always 1,
// labelled with the build (Info), as Prometheus' own build_info metrics.
const BuildInfoName = "edgesched_build_info"

// BuildInfoCollector returns the edgesched_build_info gauge of binary.
func BuildInfoCollector(binary string) prometheus.Collector {
	b := Info()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: BuildInfoName,
		Help: "Always 1; the labels name the binary's build (its --version line).",
		ConstLabels: prometheus.Labels{"binary": binary, "version": b.Version, "revision": b.Commit, "build_date": b.Date,
			"goversion": b.GoVersion, "platform": b.Platform}})
	g.Set(1)
	return g
}

// RegisterProcessMetrics registers on reg what every daemon's /metrics
// has besides its own series: the Go runtime (go_*), the process
// (process_*, where the platform has it) and edgesched_build_info. A
// collector already registered (an embedding program's) is kept.
func RegisterProcessMetrics(reg prometheus.Registerer, binary string) error {
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		BuildInfoCollector(binary),
	} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return fmt.Errorf("register process metrics: %w", err)
			}
		}
	}
	return nil
}
