package site

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/backoff"
	"github.com/edgesched/edgesched/internal/kube"
)

// Component is a long-running part of the agent (the same method set as
// agent.Component): it runs until ctx ends.
type Component interface {
	Run(ctx context.Context) error
}

// Defaults of Config.
const (
	DefaultNamespace     = "edgesched-system"
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
	// JitterFactor: a standby tries to take the Lease every RetryPeriod
	// x [1, 1+JitterFactor) (client-go's leader election uses the same
	// factor), and Validate wants RenewDeadline > JitterFactor x
	// RetryPeriod.
	JitterFactor = 1.2
)

// LeaseName is the Lease a site's agents elect their leader with.
func LeaseName(site string) string { return "edgesched-site-" + site }

// ErrConfig wraps configuration refusals.
var ErrConfig = errors.New("site: bad config")

// Config configures an Elector. Start from DefaultConfig.
type Config struct {
	// Site is the site ID (a DNS label, as in the federated protocol).
	Site string
	// Namespace holds the Lease and the site ledger (default
	// edgesched-system).
	Namespace string
	// Identity is this agent's name in the election: its node name.
	Identity string
	// Instance tells apart agent processes with one Identity (two agents
	// given the same node name, or an old and a new pod of a rolling
	// update): the Lease's holder is Identity + "_" + Instance, so only
	// one of them can hold it (client-go names holders hostname_UUID the
	// same way). Zero value: 8 random hex digits drawn by New. A restarted
	// agent is a new instance: it waits out its predecessor's term (at
	// most LeaseDuration) unless that one released the Lease.
	Instance string
	// Client talks to the site's apiserver (leases get/create/update):
	// kube.NewForConfig's clients, or a clientset adapted by
	// kube/kubeclientset. Required.
	Client kube.Interface
	// LeaseDuration, RenewDeadline and RetryPeriod are the election's
	// timings, with client-go's leader-election meaning and defaults (15s,
	// 10s, 2s): a standby takes over at most about LeaseDuration + 2 x
	// (1+JitterFactor) x RetryPeriod after the leader's last renewal; the
	// leader renews every RetryPeriod, and one that cannot renew for
	// RenewDeadline steps down (at once when it reads another holder).
	// The Lease records LeaseDuration in whole seconds, rounded up (at
	// least 1s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// KeepLeaseOnStop leaves the Lease to expire when Run's context ends.
	// The zero value releases it, after the leader-only components have
	// stopped, so a standby takes over at once on a graceful shutdown.
	// Tests set it to simulate a crash.
	KeepLeaseOnStop bool
	// Leader are the components that run only while this agent leads
	// (the FL client, the model installer). They start when the Lease is
	// won and are stopped (context cancelled, then waited for) when it is
	// lost or Run's context ends; one that returns early is restarted
	// after a backoff from BackoffMin to BackoffMax (defaults 1s, 30s).
	Leader                 []Component
	BackoffMin, BackoffMax time.Duration
	// Registerer receives the metrics (nil: not registered).
	Registerer prometheus.Registerer
	// Seed seeds the jitter of the standby's retries and of the
	// components' restarts.
	Seed   uint64
	Logger *slog.Logger
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Namespace: DefaultNamespace, LeaseDuration: DefaultLeaseDuration, RenewDeadline: DefaultRenewDeadline, RetryPeriod: DefaultRetryPeriod,
		BackoffMin: time.Second, BackoffMax: 30 * time.Second}
}

// Validate names the first bad field.
func (c *Config) Validate() error {
	switch {
	case !federated.ValidSite(c.Site):
		return fmt.Errorf("%w: Site %q is not a DNS label", ErrConfig, c.Site)
	case len(validation.IsDNS1123Label(c.Namespace)) > 0:
		return fmt.Errorf("%w: Namespace %q is not a DNS label", ErrConfig, c.Namespace)
	case c.Identity == "":
		return fmt.Errorf("%w: Identity (the node name) required", ErrConfig)
	case strings.Contains(c.Identity, "_") || strings.Contains(c.Instance, "_"):
		return fmt.Errorf("%w: Identity %q and Instance %q must not contain \"_\" (it separates them in the Lease)", ErrConfig, c.Identity, c.Instance)
	case c.Client == nil:
		return fmt.Errorf("%w: Client required", ErrConfig)
	case c.RetryPeriod <= 0 || c.RenewDeadline <= time.Duration(JitterFactor*float64(c.RetryPeriod)) || c.LeaseDuration <= c.RenewDeadline:
		return fmt.Errorf("%w: want LeaseDuration > RenewDeadline > %.1f x RetryPeriod > 0 (got %v, %v, %v)", ErrConfig,
			JitterFactor, c.LeaseDuration, c.RenewDeadline, c.RetryPeriod)
	case c.LeaseDuration < time.Second:
		return fmt.Errorf("%w: LeaseDuration %v: the Lease counts whole seconds (at least 1s)", ErrConfig, c.LeaseDuration)
	case c.BackoffMin <= 0 || c.BackoffMax < c.BackoffMin:
		return fmt.Errorf("%w: backoff must be positive (BackoffMax >= BackoffMin)", ErrConfig)
	}
	for i, comp := range c.Leader {
		if comp == nil {
			return fmt.Errorf("%w: Leader[%d] is nil", ErrConfig, i)
		}
	}
	return nil
}

// Elector runs the site's leader election (a coordination.k8s.io Lease
// named LeaseName(site), lease.go) and the leader-only components while
// this agent holds it. Create with New; Run once; IsLeader and Leader are
// safe for concurrent use.
type Elector struct {
	cfg    Config
	holder string // Identity_Instance: this agent in the Lease
	log    *slog.Logger
	leader atomic.Value // string: the holder last observed
	is     atomic.Bool

	isLeader    prometheus.Gauge
	transitions *prometheus.CounterVec

	// owned by Run's goroutine (lease.go)
	lease leaseState
}

// New checks cfg and registers the metrics
// (edgesched_site_is_leader{site}, edgesched_site_leader_transitions_total{site,to}).
func New(cfg Config) (*Elector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Instance == "" {
		cfg.Instance = fmt.Sprintf("%08x", rand.Uint32())
	}
	holder := cfg.Identity + "_" + cfg.Instance
	e := &Elector{cfg: cfg, holder: holder, log: log.With("site", cfg.Site, "holder", holder),
		isLeader: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "edgesched", Subsystem: "site", Name: "is_leader",
			Help: "1 while this agent leads its site (holds the site Lease), else 0.", ConstLabels: prometheus.Labels{"site": cfg.Site}}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "site", Name: "leader_transitions_total",
			Help: "Times this agent became leader (to=leader) or stopped leading (to=standby).", ConstLabels: prometheus.Labels{"site": cfg.Site}}, []string{"to"}),
	}
	e.leader.Store("")
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{e.isLeader, e.transitions} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register site metrics: %w", err)
			}
		}
	}
	return e, nil
}

// IsLeader reports whether this agent leads now.
func (e *Elector) IsLeader() bool { return e.is.Load() }

// Leader is the identity (node name) of the leader this agent last
// observed ("" before any; a released Lease does not clear it).
func (e *Elector) Leader() string { return HolderNode(e.leader.Load().(string)) }

// Holder is this agent in the Lease: Identity_Instance.
func (e *Elector) Holder() string { return e.holder }

// HolderNode is the node name of a Lease holder (Identity_Instance; a
// holder without "_", written by an agent before instances, is its node
// name).
func HolderNode(holder string) string {
	if i := strings.LastIndexByte(holder, '_'); i >= 0 {
		return holder[:i]
	}
	return holder
}

// Run takes part in the election until ctx ends: standing by, leading
// (running the leader-only components) when it wins the Lease, and back
// to standing by when it loses it. When ctx ends while leading, the
// components are stopped first, the Lease still being renewed meanwhile,
// and only then is it released (unless KeepLeaseOnStop). It returns
// ctx's error.
func (e *Elector) Run(ctx context.Context) error {
	e.lease = newLeaseState(e.cfg)
	for ctx.Err() == nil && e.acquire(ctx) {
		e.lead(ctx)
		if ctx.Err() == nil {
			e.log.Warn("lost the site lease: standing by")
		}
	}
	return ctx.Err()
}

// lead runs the leader-only components while renewing the Lease, until
// the Lease is lost or ctx ends; then it stops the components and waits
// for them, and after a graceful stop releases the Lease. The renewals
// and the release do not use ctx: the Lease is kept while the components
// stop.
func (e *Elector) lead(ctx context.Context) {
	cctx, stopComponents := context.WithCancel(ctx)
	defer stopComponents()
	e.is.Store(true)
	e.isLeader.Set(1)
	e.transitions.WithLabelValues("leader").Inc()
	e.log.Info("leading the site", "components", len(e.cfg.Leader))
	var wg sync.WaitGroup
	for i, c := range e.cfg.Leader {
		wg.Go(func() { e.keepRunning(cctx, i, c) })
	}
	stopped := make(chan struct{})
	go func() { // owned by lead: it waits for stopped before returning
		wg.Wait()
		close(stopped)
	}()

	api := context.WithoutCancel(ctx)
	kept := e.renewWhile(api, stopped)
	stopComponents()
	<-stopped
	e.is.Store(false)
	e.isLeader.Set(0)
	e.transitions.WithLabelValues("standby").Inc()
	e.log.Info("stopped leading: leader-only components stopped")
	if kept && !e.cfg.KeepLeaseOnStop {
		e.release(api)
	}
}

// keepRunning runs c until ctx ends, restarting it with backoff when it
// returns early.
func (e *Elector) keepRunning(ctx context.Context, i int, c Component) {
	b := backoff.New(e.cfg.BackoffMin, e.cfg.BackoffMax, e.cfg.Seed^uint64(i+1))
	for {
		start := time.Now()
		err := c.Run(ctx)
		if ctx.Err() != nil {
			return
		}
		e.log.Error("leader component stopped; restarting", "component", fmt.Sprintf("%T", c), "after", time.Since(start).Round(time.Millisecond), "err", err)
		if time.Since(start) > e.cfg.BackoffMax {
			b.Reset()
		}
		if !b.Sleep(ctx) {
			return
		}
	}
}

// ScaledTimings returns client-go's proportions of renew deadline and
// retry period for a lease duration (10 s and 2 s for 15 s), for a
// --lease-duration flag.
func ScaledTimings(lease time.Duration) (renew, retry time.Duration) {
	return lease * 2 / 3, lease * 2 / 15
}
