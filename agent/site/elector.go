package site

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/backoff"
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
	// Client talks to the site's apiserver (leases get/create/update).
	Client kubernetes.Interface
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's leader
	// election timings (defaults 15s, 10s, 2s): a standby takes over at
	// most about LeaseDuration + 2.2 x RetryPeriod after the leader's last
	// renewal; a leader that cannot renew for RenewDeadline steps down.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// KeepLeaseOnStop leaves the Lease to expire when Run's context ends.
	// The zero value releases it (client-go's ReleaseOnCancel), after the
	// leader-only components have stopped, so a standby takes over at
	// once on a graceful shutdown. Tests set it to simulate a crash.
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
	// Seed seeds the restart jitter.
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
	case c.Client == nil:
		return fmt.Errorf("%w: Client required", ErrConfig)
	case c.RetryPeriod <= 0 || c.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(c.RetryPeriod)) || c.LeaseDuration <= c.RenewDeadline:
		return fmt.Errorf("%w: want LeaseDuration > RenewDeadline > %.1f x RetryPeriod > 0 (got %v, %v, %v)", ErrConfig,
			leaderelection.JitterFactor, c.LeaseDuration, c.RenewDeadline, c.RetryPeriod)
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
// named LeaseName(site)) and the leader-only components while this agent
// holds it. Create with New; Run once; IsLeader and Leader are safe for
// concurrent use.
type Elector struct {
	cfg    Config
	log    *slog.Logger
	leader atomic.Value // string: the holder last observed
	is     atomic.Bool

	isLeader    prometheus.Gauge
	transitions *prometheus.CounterVec
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
	e := &Elector{cfg: cfg, log: log.With("site", cfg.Site, "identity", cfg.Identity),
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

// Leader is the identity of the leader this agent last observed ("" before
// any).
func (e *Elector) Leader() string { return e.leader.Load().(string) }

// Run takes part in the election until ctx ends: standing by, leading
// (running the leader-only components) when it wins the Lease, and back
// to standing by when it loses it. When ctx ends while leading, the
// components are stopped first and only then is the Lease released
// (unless KeepLeaseOnStop). It returns ctx's error.
func (e *Elector) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		if err := e.term(ctx); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// term runs one client-go elector until it stops (ctx ended, or the lease
// was lost), waiting for the leader-only components to stop.
func (e *Elector) term(ctx context.Context) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: LeaseName(e.cfg.Site), Namespace: e.cfg.Namespace},
		Client:     e.cfg.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.cfg.Identity},
		Labels:     map[string]string{"edgesched.io/site": e.cfg.Site},
	}
	// The elector's context is not ctx: while leading, ctx's end must
	// first stop the components, then end the elector (which releases).
	ectx, cancelElector := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelElector()
	var mu sync.Mutex
	leading := false
	stopWatch := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !leading {
			cancelElector()
		}
	})
	defer stopWatch()
	// client-go calls OnStartedLeading in a goroutine of its own; the term
	// runs here instead, so Run can wait for the components to stop.
	started := make(chan context.Context, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            LeaseName(e.cfg.Site),
		LeaseDuration:   e.cfg.LeaseDuration,
		RenewDeadline:   e.cfg.RenewDeadline,
		RetryPeriod:     e.cfg.RetryPeriod,
		ReleaseOnCancel: !e.cfg.KeepLeaseOnStop,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) { started <- lctx }, // at most once per elector: never blocks
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				e.leader.Store(id)
				e.log.Info("site leader", "leader", id)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		le.Run(ectx)
	}()
	select {
	case lctx := <-started:
		mu.Lock()
		leading = true
		mu.Unlock()
		e.lead(ctx, lctx) // returns when the term ended (lease lost) or ctx ended
		if ctx.Err() != nil {
			cancelElector() // the components stopped: now the Lease may go
		}
		<-runDone
		if ctx.Err() == nil {
			e.log.Warn("lost the site lease: standing by")
		}
	case <-runDone: // ctx ended while standing by
	}
	return nil
}

// lead runs the leader-only components until lctx (the term) or ctx (the
// agent) ends, then stops them and waits for them.
func (e *Elector) lead(ctx, lctx context.Context) {
	tctx, cancel := context.WithCancel(lctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	e.is.Store(true)
	e.isLeader.Set(1)
	e.transitions.WithLabelValues("leader").Inc()
	e.log.Info("leading the site", "components", len(e.cfg.Leader))
	var wg sync.WaitGroup
	for i, c := range e.cfg.Leader {
		wg.Go(func() { e.keepRunning(tctx, i, c) })
	}
	wg.Wait()
	e.is.Store(false)
	e.isLeader.Set(0)
	e.transitions.WithLabelValues("standby").Inc()
	e.log.Info("stopped leading: leader-only components stopped")
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
