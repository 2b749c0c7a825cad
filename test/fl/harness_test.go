package fl

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
)

// key is a reproducible test key.
func key(t *testing.T, seed int) *quant.Signer {
	t.Helper()
	s, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 0xfe}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fleet is a coordinator and its sites' keys.
type fleet struct {
	t        *testing.T
	url      string
	coordKey *quant.Signer
	sites    []string
	keys     map[string]*quant.Signer
	registry *federated.Registry
	target   []float32
}

func newFleet(t *testing.T, url string, n int) *fleet {
	f := &fleet{t: t, url: url, coordKey: key(t, 1000), keys: map[string]*quant.Signer{}, registry: &federated.Registry{}}
	for i := range n {
		s := fmt.Sprintf("site-%02d", i)
		f.sites = append(f.sites, s)
		f.keys[s] = key(t, i+1)
		if err := f.registry.Add(s, f.keys[s].Public()); err != nil {
			t.Fatal(err)
		}
	}
	f.target = fltest.SmallModel(t, 99).Net.Flat()
	return f
}

// coordinatorConfig is fltest.CoordinatorConfig for the fleet's sites and
// coordinator key, its store in dir.
func (f *fleet) coordinatorConfig(dir string) coordinator.Config {
	return fltest.CoordinatorConfig(dir, f.registry, f.coordKey)
}

// runCoordinator starts a coordinator on the fleet's server
// (fltest.RunCoordinator) and returns it with its stop function.
func (f *fleet) runCoordinator(cfg coordinator.Config, start *nn.Model) (*coordinator.Coordinator, func()) {
	f.t.Helper()
	return fltest.RunCoordinator(f.t, f.url, cfg, start)
}

// agent is a running site client: halt stops it (its store stays open
// for inspection), stop also closes the store.
type agent struct {
	c          *flclient.Client
	halt, stop func()
	nc         *nats.Conn
}

// agentConfig is a site client's configuration: the fleet's keys, its
// store in dir, trainer tr and quick retries.
func (f *fleet) agentConfig(site, dir string, tr flclient.Trainer) flclient.Config {
	cfg := flclient.DefaultConfig()
	cfg.Site, cfg.Signer, cfg.DataDir, cfg.Trainer = site, f.keys[site], dir, tr
	cfg.ModelKeys = fltest.Keyring(f.t, f.coordKey)
	cfg.BackoffMin, cfg.BackoffMax, cfg.PublishTimeout = 10*time.Millisecond, 200*time.Millisecond, 2*time.Second
	return cfg
}

func (f *fleet) startAgent(site, dir string, tr flclient.Trainer, mod func(*flclient.Config)) *agent {
	cfg := f.agentConfig(site, dir, tr)
	if mod != nil {
		mod(&cfg)
	}
	c, err := flclient.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.runAgent(site, c)
}

// runAgent runs c on its own connection as site until the agent's halt
// or stop, which the test's cleanup calls.
func (f *fleet) runAgent(site string, c *flclient.Client) *agent {
	t := f.t
	nc := fltest.Connect(t, f.url, site)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx, nc) }()
	var haltOnce, closeOnce sync.Once
	halt := func() { haltOnce.Do(func() { cancel(); <-done }) }
	stop := func() { halt(); closeOnce.Do(func() { c.Close() }) }
	t.Cleanup(stop)
	return &agent{c: c, halt: halt, stop: stop, nc: nc}
}

func (f *fleet) synthetic(noise float64) *flclient.SyntheticTrainer {
	return &flclient.SyntheticTrainer{Target: f.target, Rate: 0.5, Noise: noise, Samples: 100}
}

func distance(a, b []float32) float64 {
	var d float64
	for i := range a {
		d += float64(a[i]-b[i]) * float64(a[i]-b[i])
	}
	return math.Sqrt(d)
}

// scrape reads one sample of the coordinator's metrics.
func scrape(t testing.TB, c *coordinator.Coordinator, name, labels string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	c.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+labels+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, name+labels)), 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	return 0
}

// fullRounds waits until the coordinator has published n rounds and checks
// each took every one of want updates and the newest model is version
// n+1.
func fullRounds(t *testing.T, c *coordinator.Coordinator, n, want int, within time.Duration) {
	t.Helper()
	fltest.Eventually(t, within, fmt.Sprintf("%d published rounds", n), func() (bool, string) {
		rs, err := c.Rounds(0)
		if err != nil || len(rs) < n || rs[0].State != coordinator.StatePublished {
			return false, fmt.Sprintf("%d rounds, %v", len(rs), err)
		}
		return true, ""
	})
	rs, _ := c.Rounds(0)
	for _, r := range rs {
		if r.Accepted != want || r.State != coordinator.StatePublished {
			t.Errorf("round %d: %s with %d updates, want published with %d", r.Round, r.State, r.Accepted, want)
		}
	}
	if m, err := c.ModelRecord(0); err != nil || m.Version != uint64(n+1) {
		t.Fatalf("newest model %+v %v, want version %d", m, err, n+1)
	}
}

// allInstalled waits until every agent runs model version with an empty
// outbox.
func allInstalled(t *testing.T, agents []*agent, version uint64, within time.Duration) {
	t.Helper()
	fltest.Eventually(t, within, fmt.Sprintf("every site on version %d", version), func() (bool, string) {
		for i, a := range agents {
			st, err := a.c.Status()
			if err != nil || st.Installed == nil || st.Installed.Version != version || st.Outbox != 0 {
				return false, fmt.Sprintf("site %d: %+v %v", i, st, err)
			}
		}
		return true, ""
	})
}
