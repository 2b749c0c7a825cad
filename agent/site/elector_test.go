package site

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/edgesched/edgesched/internal/kube/kubeclientset"
)

// probe is a leader component that counts its runs and, when it stops,
// records who held the Lease at that moment.
type probe struct {
	client       kubernetes.Interface
	runs         atomic.Int32
	failFirst    bool
	mu           sync.Mutex
	holderAtStop []string
}

func (p *probe) Run(ctx context.Context) error {
	n := p.runs.Add(1)
	if p.failFirst && n == 1 {
		return errors.New("first run fails")
	}
	<-ctx.Done()
	l, err := p.client.CoordinationV1().Leases(testNS).Get(context.Background(), LeaseName("store-1"), metav1.GetOptions{})
	holder := "?"
	if err == nil && l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	p.mu.Lock()
	p.holderAtStop = append(p.holderAtStop, holder)
	p.mu.Unlock()
	return ctx.Err()
}

func fastConfig(client kubernetes.Interface, id string, comps ...Component) Config {
	cfg := DefaultConfig()
	cfg.Site, cfg.Namespace, cfg.Identity, cfg.Client, cfg.Leader = "store-1", testNS, id, kubeclientset.Wrap(client), comps
	// lease 1.5 s > renew 1 s > 1.2 x retry 0.2 s
	cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = 1500*time.Millisecond, time.Second, 200*time.Millisecond
	cfg.BackoffMin, cfg.BackoffMax = 10*time.Millisecond, 50*time.Millisecond
	cfg.Instance = "1" // the Lease names it id_1
	return cfg
}

func holder(t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	l, err := client.CoordinationV1().Leases(testNS).Get(context.Background(), LeaseName("store-1"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestElectorLeadsAndReleases (one agent, client-go's fake clientset):
// it wins the Lease, runs the components (restarting the one that fails),
// and on a graceful stop stops them while it still holds the Lease, then
// releases it; the metrics follow.
func TestElectorLeadsAndReleases(t *testing.T) {
	client := fake.NewClientset()
	p, flaky := &probe{client: client}, &probe{client: client, failFirst: true}
	reg := prometheus.NewRegistry()
	cfg := fastConfig(client, "node-a", p, flaky)
	cfg.Registerer = reg
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runBackground(t, e.Run)
	poll(t, 10*time.Second, "leadership", func() (bool, string) {
		return e.IsLeader() && p.runs.Load() == 1 && flaky.runs.Load() == 2, e.Leader()
	})
	if got := testutil.ToFloat64(e.isLeader); got != 1 || holder(t, client) != "node-a_1" || e.Leader() != "node-a" {
		t.Fatalf("is_leader %v, holder %q, observed %q", got, holder(t, client), e.Leader())
	}
	stop()
	if p.holderAtStop[0] != "node-a_1" || flaky.holderAtStop[0] != "node-a_1" {
		t.Fatalf("components stopped after the Lease went: holders %v %v", p.holderAtStop, flaky.holderAtStop)
	}
	if h := holder(t, client); h != "" {
		t.Fatalf("Lease still held by %q after a graceful stop", h)
	}
	if got := testutil.ToFloat64(e.isLeader); got != 0 {
		t.Fatalf("is_leader %v after stop", got)
	}
	// one term: to=leader 1, to=standby 1
	if l, s := testutil.ToFloat64(e.transitions.WithLabelValues("leader")), testutil.ToFloat64(e.transitions.WithLabelValues("standby")); l != 1 || s != 1 {
		t.Fatalf("transitions leader %v, standby %v; want 1 and 1", l, s)
	}
}

// TestElectorKeepsLeaseOnStop: with KeepLeaseOnStop (a simulated crash)
// the components stop but the Lease stays with the agent until it
// expires. (Stepping down when another agent holds the Lease is
// TestLeaderStepsDownWhenAnotherHolds's, on casClientset, and the e2e
// test's.)
func TestElectorKeepsLeaseOnStop(t *testing.T) {
	client := fake.NewClientset()
	p := &probe{client: client}
	cfg := fastConfig(client, "node-a", p)
	cfg.KeepLeaseOnStop = true
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runBackground(t, e.Run)
	poll(t, 10*time.Second, "leadership", func() (bool, string) { return e.IsLeader(), e.Leader() })
	stop()
	if h := holder(t, client); h != "node-a_1" || p.runs.Load() != 1 || e.IsLeader() {
		t.Fatalf("holder %q, runs %d, leading %v; want the Lease kept, 1 run, not leading", h, p.runs.Load(), e.IsLeader())
	}
}

func TestConfigValidate(t *testing.T) {
	client := fake.NewClientset()
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"site", func(c *Config) { c.Site = "Store_1" }, "Site"},
		{"namespace", func(c *Config) { c.Namespace = "" }, "Namespace"},
		{"identity", func(c *Config) { c.Identity = "" }, "Identity"},
		{"client", func(c *Config) { c.Client = nil }, "Client"},
		{"renew >= lease", func(c *Config) { c.RenewDeadline = c.LeaseDuration }, "LeaseDuration"},
		{"retry too long", func(c *Config) { c.RetryPeriod = c.RenewDeadline }, "RetryPeriod"},
		{"backoff", func(c *Config) { c.BackoffMin = 0 }, "backoff"},
		{"nil component", func(c *Config) { c.Leader = []Component{nil} }, "Leader[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fastConfig(client, "node-a")
			tc.mod(&cfg)
			_, err := New(cfg)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrConfig naming %s", err, tc.want)
			}
		})
	}
	cfg := fastConfig(client, "node-a")
	cfg.Registerer = prometheus.NewRegistry()
	if _, err := New(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg); err == nil { // the same metrics twice on one registry
		t.Fatal("registered the metrics twice")
	}
}

// TestScaledTimings: 15 s gives client-go's 10 s and 2 s; the e2e test's
// 4 s gives 2.67 s and 0.53 s, which Validate accepts (2.67 > 1.2 x 0.53).
func TestScaledTimings(t *testing.T) {
	for _, lease := range []time.Duration{15 * time.Second, 4 * time.Second, time.Second} {
		renew, retry := ScaledTimings(lease)
		cfg := fastConfig(fake.NewClientset(), "node-a")
		cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = lease, renew, retry
		if err := cfg.Validate(); err != nil {
			t.Errorf("lease %v: %v", lease, err)
		}
	}
	if renew, retry := ScaledTimings(15 * time.Second); renew != 10*time.Second || retry != 2*time.Second {
		t.Fatalf("15 s: %v, %v", renew, retry)
	}
}
