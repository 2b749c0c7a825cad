package fl

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant"
)

// startNATS runs an embedded JetStream server on a random port with its
// store in a temporary directory.
func startNATS(t *testing.T) *server.Server {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

func connect(t *testing.T, url, name string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// key is a reproducible test key.
func key(t *testing.T, seed int) *quant.Signer {
	t.Helper()
	s, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 0xfe}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// smallModel is a small network so rounds are quick.
func smallModel(t *testing.T, seed uint64) *policy.Model {
	t.Helper()
	net, err := policy.NewNet(policy.NumFeatures, 8, 8, 8, rand.New(rand.NewPCG(seed, 1)))
	if err != nil {
		t.Fatal(err)
	}
	return &policy.Model{Schema: policy.NewSchema(), Net: net}
}

// calibrationRows stands in for simulator states in protocol tests.
func calibrationRows(_ context.Context, _ *policy.Model) ([]float32, error) {
	rng := rand.New(rand.NewPCG(4, 4))
	rows := make([]float32, 500*policy.NumFeatures)
	for i := range rows {
		rows[i] = float32(rng.NormFloat64())
	}
	return rows, nil
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
	f.target = smallModel(t, 99).Net.Flat()
	return f
}

func (f *fleet) coordinatorConfig(dir string) coordinator.Config {
	cfg := coordinator.DefaultConfig()
	cfg.DataDir, cfg.Sites, cfg.Signer, cfg.Calibrate = dir, f.registry, f.coordKey, calibrationRows
	cfg.RoundDuration, cfg.MinUpdates = time.Hour, 1
	cfg.Local = federated.LocalTraining{Iterations: 1, Episodes: 1, LR: 1e-3}
	cfg.PollInterval = 20 * time.Millisecond
	return cfg
}

// runCoordinator starts a coordinator and returns it with a stop function.
func (f *fleet) runCoordinator(cfg coordinator.Config, start *policy.Model) (*coordinator.Coordinator, func()) {
	t := f.t
	c, err := coordinator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Bootstrap(context.Background(), start); err != nil {
		t.Fatal(err)
	}
	nc := connect(t, f.url, "coordinator")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, nc) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && err != context.Canceled {
				t.Errorf("coordinator: %v", err)
			}
			c.Close()
		})
	}
	t.Cleanup(stop)
	return c, stop
}

// agent is a running site client: halt stops it (its store stays open
// for inspection), stop also closes the store.
type agent struct {
	c          *flclient.Client
	halt, stop func()
	nc         *nats.Conn
}

func (f *fleet) startAgent(site, dir string, tr flclient.Trainer, mod func(*flclient.Config)) *agent {
	t := f.t
	cfg := flclient.DefaultConfig()
	cfg.Site, cfg.Signer, cfg.DataDir, cfg.Trainer = site, f.keys[site], dir, tr
	cfg.ModelKeys = &quant.Keyring{}
	if _, err := cfg.ModelKeys.Add(f.coordKey.Public()); err != nil {
		t.Fatal(err)
	}
	cfg.BackoffMin, cfg.BackoffMax, cfg.PublishTimeout = 10*time.Millisecond, 200*time.Millisecond, 2*time.Second
	if mod != nil {
		mod(&cfg)
	}
	c, err := flclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nc := connect(t, f.url, site)
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

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s: %s", what, last)
}

func distance(a, b []float32) float64 {
	var d float64
	for i := range a {
		d += float64(a[i]-b[i]) * float64(a[i]-b[i])
	}
	return math.Sqrt(d)
}
