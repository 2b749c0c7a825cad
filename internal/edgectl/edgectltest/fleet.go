package edgectltest

import (
	"context"
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
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
)

// AdminFleet is an embedded NATS server with a real coordinator (manual
// publishing, so promote has a candidate) and one real site client.
type AdminFleet struct {
	URL   string
	Coord *coordinator.Coordinator
	Site  *flclient.Client
	// StartSite starts the site's client; StartAdminFleet calls it
	// unless asked to hold the site back (idempotent).
	StartSite func()
}

// StartAdminFleet starts an AdminFleet with its site running; the test's
// cleanup stops it.
func StartAdminFleet(t *testing.T) *AdminFleet {
	t.Helper()
	f := NewAdminFleet(t)
	f.StartSite()
	return f
}

// NewAdminFleet starts the server and the coordinator and waits for the
// admin API; the site is built but does not run until f.StartSite, so a
// test can look at an open round before the site can end it.
func NewAdminFleet(t *testing.T) *AdminFleet {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, JetStreamMaxStore: 1 << 40, StoreDir: t.TempDir(), NoSigs: true}) // a fixed storage limit, as natstest.MaxStore
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(srv.Shutdown)
	newKey := func(seed byte) *quant.Signer {
		s, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{seed, 0xad}))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	coordKey, siteKey := newKey(1), newKey(2)
	reg := &federated.Registry{}
	if err := reg.Add("store-1", siteKey.Public()); err != nil {
		t.Fatal(err)
	}
	net, err := nn.NewNet(policy.NumFeatures, 8, 8, 8, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	start := &nn.Model{Schema: policy.NewSchema(), Net: net}
	cfg := coordinator.DefaultConfig()
	cfg.DataDir, cfg.Sites, cfg.Signer = t.TempDir(), reg, coordKey
	cfg.Calibrate = func(context.Context, *nn.Model) ([]float32, error) {
		rng := rand.New(rand.NewPCG(2, 2))
		rows := make([]float32, 200*policy.NumFeatures)
		for i := range rows {
			rows[i] = float32(rng.NormFloat64())
		}
		return rows, nil
	}
	cfg.RoundDuration, cfg.MinUpdates, cfg.AutoPublish = time.Hour, 1, false
	cfg.Local = federated.LocalTraining{Iterations: 1, Episodes: 1, LR: 1e-3}
	cfg.PollInterval = 20 * time.Millisecond
	c, err := coordinator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Bootstrap(context.Background(), start); err != nil {
		t.Fatal(err)
	}
	f := &AdminFleet{URL: srv.ClientURL(), Coord: c}
	ctx, cancel := context.WithCancel(context.Background())
	connect := func(name string) *nats.Conn {
		nc, err := nats.Connect(f.URL, nats.Name(name))
		if err != nil {
			t.Fatal(err)
		}
		return nc
	}
	cnc, snc := connect("coordinator"), connect("store-1")
	done := make(chan struct{}, 2)
	go func() { _ = c.Run(ctx, cnc); done <- struct{}{} }()
	scfg := flclient.DefaultConfig()
	scfg.Site, scfg.Signer, scfg.DataDir = "store-1", siteKey, t.TempDir()
	scfg.ModelKeys = &quant.Keyring{}
	if _, err := scfg.ModelKeys.Add(coordKey.Public()); err != nil {
		t.Fatal(err)
	}
	target := append([]float32(nil), net.Flat()...)
	for i := range target {
		target[i] += 0.1
	}
	scfg.Trainer = &flclient.SyntheticTrainer{Target: target, Rate: 0.5, Samples: 10}
	scfg.ReportInterval = 50 * time.Millisecond
	if f.Site, err = flclient.New(scfg); err != nil {
		t.Fatal(err)
	}
	var siteOnce sync.Once
	siteStarted := false
	f.StartSite = func() {
		siteOnce.Do(func() {
			siteStarted = true
			go func() { _ = f.Site.Run(ctx, snc); done <- struct{}{} }()
		})
	}
	t.Cleanup(func() {
		cancel()
		<-done
		if siteStarted {
			<-done
		}
		cnc.Close()
		snc.Close()
		c.Close()
		f.Site.Close()
	})
	WaitFor(t, "the admin API", func() bool {
		_, _, err := Run(t, "round", "list", "--server", f.URL, "--timeout", "1s")
		return err == nil
	})
	return f
}

// WaitFor polls cond until it holds, failing the test after 30 seconds
// with what it waited for.
func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
