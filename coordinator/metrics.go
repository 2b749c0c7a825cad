package coordinator

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type metrics struct {
	gatherer      prometheus.Gatherer
	updates       *prometheus.CounterVec
	updateBytes   prometheus.Counter
	rounds        *prometheus.CounterVec
	round         prometheus.Gauge
	modelVersion  prometheus.Gauge
	aggregation   prometheus.Histogram
	reports       *prometheus.CounterVec
	roundFailures *prometheus.CounterVec
	storeErrors   prometheus.Counter
	commits       prometheus.Counter
	syncs         prometheus.Counter
	// HA: checkpoints shipped, the last one's size
	checkpoints     prometheus.Counter
	checkpointBytes prometheus.Gauge
	regional        *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	var gatherer prometheus.Gatherer
	if reg == nil {
		r := prometheus.NewRegistry()
		reg, gatherer = r, r
	} else if g, ok := reg.(prometheus.Gatherer); ok {
		gatherer = g
	}
	m := &metrics{
		gatherer: gatherer,
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "updates_total",
			Help: "Site update messages by verdict (accepted, duplicate, rejected) and rejection reason, each counted once when its verdict is stored (a message delivered again is not counted again)."}, []string{"status", "reason"}),
		updateBytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "update_bytes_total",
			Help: "Bytes of update messages judged."}),
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "rounds_total",
			Help: "Rounds ended, by final state."}, []string{"state"}),
		round: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "round",
			Help: "The current round number."}),
		modelVersion: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "model_version",
			Help: "The newest published model version."}),
		aggregation: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "aggregation_seconds",
			Help: "Time to aggregate a round, quantize, sign and store the model.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "site_reports_total",
			Help: "Site heartbeat reports, by outcome (ok, refused)."}, []string{"outcome"}),
		roundFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "round_failures_total",
			Help: "Rounds that failed, by reason (quorum, aggregate, dp, non_finite, quantize, sanity, calibrate)."}, []string{"reason"}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "store_errors_total",
			Help: "Groups of update verdicts the store could not record (a full disk, say); their messages are delivered again."}),
	}
	m.commits = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "store_commits_total",
		Help: "Write transactions committed to coordinator.db (bbolt syncs each twice: its pages, then its meta page)."})
	m.syncs = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "store_fsyncs_total",
		Help: "fdatasync calls bbolt made on coordinator.db for committed transactions: two per commit (its pages, then its meta page) and one per growth of the file."})
	m.checkpoints = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "checkpoints_total",
		Help: "Checkpoints of coordinator.db shipped to the object store by the active replica (--ha)."})
	m.checkpointBytes = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "checkpoint_bytes",
		Help: "Size of the last checkpoint shipped (--ha)."})
	m.regional = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "regional_aggregates_total",
		Help: "Regional aggregates (hierarchical rounds) by region, verdict and refusal reason, each counted once."}, []string{"region", "status", "reason"})
	for _, c := range []prometheus.Collector{m.updates, m.updateBytes, m.rounds, m.round, m.modelVersion, m.aggregation, m.reports, m.roundFailures, m.storeErrors, m.commits, m.syncs, m.checkpoints, m.checkpointBytes, m.regional} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// MetricsHandler serves the coordinator's Prometheus metrics (when its
// registry is its own or a Gatherer).
func (c *Coordinator) MetricsHandler() http.Handler {
	if c.metrics.gatherer == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(c.metrics.gatherer, promhttp.HandlerOpts{})
}
