package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Coordinator is the coordinator's metrics. Gatherer is the registry
// they were registered on when it gathers (nil otherwise).
type Coordinator struct {
	Gatherer      prometheus.Gatherer
	Updates       *prometheus.CounterVec
	UpdateBytes   prometheus.Counter
	Rounds        *prometheus.CounterVec
	Round         prometheus.Gauge
	ModelVersion  prometheus.Gauge
	Aggregation   prometheus.Histogram
	Reports       *prometheus.CounterVec
	RoundFailures *prometheus.CounterVec
	StoreErrors   prometheus.Counter
	Commits       prometheus.Counter
	Syncs         prometheus.Counter
	// HA: checkpoints shipped, the last one's size, the leftover
	// checkpoint objects swept after them and the sweeps' failures
	Checkpoints           prometheus.Counter
	CheckpointBytes       prometheus.Gauge
	CheckpointsSwept      prometheus.Counter
	CheckpointSweepErrors prometheus.Counter
	Regional              *prometheus.CounterVec
	// inflight reads ingest's bytes in flight (SetInflight; nil: 0)
	inflight atomic.Pointer[func() int64]
}

// SetInflight makes the inflight-bytes gauge read f (ingest's
// Pipeline.InflightBytes) from now on; nil makes it read 0. It may be
// called while the metrics are gathered.
func (m *Coordinator) SetInflight(f func() int64) {
	if f == nil {
		m.inflight.Store(nil)
		return
	}
	m.inflight.Store(&f)
}

// New registers the coordinator's metrics on reg (nil: a private
// registry, then Gatherer).
func New(reg prometheus.Registerer) (*Coordinator, error) {
	var gatherer prometheus.Gatherer
	if reg == nil {
		r := prometheus.NewRegistry()
		reg, gatherer = r, r
	} else if g, ok := reg.(prometheus.Gatherer); ok {
		gatherer = g
	}
	m := &Coordinator{
		Gatherer: gatherer,
		Updates: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "updates_total",
			Help: "Site update messages by verdict (accepted, duplicate, rejected) and rejection reason, each counted once when its verdict is stored (a message delivered again is not counted again)."}, []string{"status", "reason"}),
		UpdateBytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "update_bytes_total",
			Help: "Bytes of update messages judged."}),
		Rounds: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "rounds_total",
			Help: "Rounds ended, by final state."}, []string{"state"}),
		Round: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "round",
			Help: "The current round number."}),
		ModelVersion: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "model_version",
			Help: "The newest published model version."}),
		Aggregation: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "aggregation_seconds",
			Help: "Time to aggregate a round, quantize, sign and store the model.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		Reports: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "site_reports_total",
			Help: "Site heartbeat reports, by outcome (ok, refused)."}, []string{"outcome"}),
		RoundFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "round_failures_total",
			Help: "Rounds that failed, by reason (quorum, aggregate, dp, non_finite, quantize, sanity, calibrate, superseded)."}, []string{"reason"}),
		StoreErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "store_errors_total",
			Help: "Groups of update verdicts the store could not record (a full disk, say); their messages are delivered again."}),
	}
	m.Commits = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "store_commits_total",
		Help: "Write transactions committed to coordinator.db (bbolt syncs each twice: its pages, then its meta page)."})
	m.Syncs = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "store_fsyncs_total",
		Help: "fdatasync calls bbolt made on coordinator.db for committed transactions: two per commit (its pages, then its meta page) and one per growth of the file."})
	m.Checkpoints = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "checkpoints_total",
		Help: "Checkpoints of coordinator.db shipped to the object store by the active replica (--ha)."})
	m.CheckpointBytes = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "checkpoint_bytes",
		Help: "Size of the last checkpoint shipped (--ha)."})
	m.CheckpointsSwept = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "checkpoint_objects_swept_total",
		Help: "Leftover checkpoint objects (attempts no pointer names: an active crashed before its pointer update) removed from the object store after a checkpoint (--ha)."})
	m.CheckpointSweepErrors = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "checkpoint_sweep_errors_total",
		Help: "Listings, pointer reads and removals of the sweep of leftover checkpoint objects that failed; the checkpoint stands (--ha)."})
	m.Regional = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "regional_aggregates_total",
		Help: "Regional aggregates (hierarchical rounds) by region, verdict and refusal reason, each counted once."}, []string{"region", "status", "reason"})
	inflight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "ingest_inflight_bytes",
		Help: "Bytes of update messages ingest holds between their fetch and their verdict; at most --max-inflight-bytes, or the largest message when it is larger."},
		func() float64 {
			if f := m.inflight.Load(); f != nil {
				return float64((*f)())
			}
			return 0
		})
	for _, c := range []prometheus.Collector{inflight, m.Updates, m.UpdateBytes, m.Rounds, m.Round, m.ModelVersion, m.Aggregation, m.Reports, m.RoundFailures, m.StoreErrors, m.Commits, m.Syncs, m.Checkpoints, m.CheckpointBytes, m.CheckpointsSwept, m.CheckpointSweepErrors, m.Regional} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Replica is a high-availability replica's metrics (--ha), kept while it
// waits as a standby too.
type Replica struct {
	Active    prometheus.Gauge
	Takeovers prometheus.Counter
}

// NewReplica registers a replica's metrics on reg (nil: none registered).
func NewReplica(reg prometheus.Registerer) (*Replica, error) {
	m := &Replica{
		Active: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "active",
			Help: "1 while this replica is the active coordinator, 0 while it is a standby (--ha)."}),
		Takeovers: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "coordinator", Name: "takeovers_total",
			Help: "Times this replica became active where an active had been before it (a takeover, or a restart of the cluster's coordinator) (--ha)."}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.Active, m.Takeovers} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
