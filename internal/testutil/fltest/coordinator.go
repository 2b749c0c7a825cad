package fltest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
)

// SmallModel is a policy with 8-unit hidden layers, its weights drawn
// from PCG(seed, 1), so rounds, training and quantizing are quick.
func SmallModel(t testing.TB, seed uint64) *nn.Model {
	t.Helper()
	net, err := nn.NewNet(policy.NumFeatures, 8, 8, 8, rand.New(rand.NewPCG(seed, 1)))
	if err != nil {
		t.Fatalf("small model: %v", err)
	}
	return &nn.Model{Schema: policy.NewSchema(), Net: net}
}

// CalibrationRows stands in for simulator states when a test quantizes
// (coordinator.Config.Calibrate): NormalRows(500, 4), the same on every
// call.
func CalibrationRows(ctx context.Context, m *nn.Model) ([]float32, error) {
	return NormalRows(500, 4)(ctx, m)
}

// NormalRows is a calibration source of n rows of standard normal
// features drawn from PCG(seed, seed): fewer rows make quantizing
// cheaper.
func NormalRows(n int, seed uint64) func(context.Context, *nn.Model) ([]float32, error) {
	return func(context.Context, *nn.Model) ([]float32, error) {
		rng := rand.New(rand.NewPCG(seed, seed))
		rows := make([]float32, n*policy.NumFeatures)
		for i := range rows {
			rows[i] = float32(rng.NormFloat64())
		}
		return rows, nil
	}
}

// Keyring is a keyring trusting the signers' public keys.
func Keyring(t testing.TB, signers ...*quant.Signer) *quant.Keyring {
	t.Helper()
	k := &quant.Keyring{}
	for _, s := range signers {
		if _, err := k.Add(s.Public()); err != nil {
			t.Fatalf("keyring: %v", err)
		}
	}
	return k
}

// CoordinatorConfig is coordinator.DefaultConfig for a quick test: its
// store in dir, the sites and signing key given, CalibrationRows, rounds
// that do not time out (an hour) and close on one update, one cheap local
// training iteration, and its stream polled every 20 ms. Tests set the
// mode, buffer, rounds and the like on the result.
func CoordinatorConfig(dir string, sites *federated.Registry, signer *quant.Signer) coordinator.Config {
	cfg := coordinator.DefaultConfig()
	cfg.DataDir, cfg.Sites, cfg.Signer, cfg.Calibrate = dir, sites, signer, CalibrationRows
	cfg.RoundDuration, cfg.MinUpdates, cfg.PollInterval = time.Hour, 1, 20*time.Millisecond
	cfg.Local = federated.LocalTraining{Iterations: 1, Episodes: 1, LR: 1e-3}
	return cfg
}

// RunCoordinator opens a coordinator from cfg, bootstraps it with start,
// connects to url as "coordinator" (Connect) and runs it. The returned
// stop cancels it, waits for Run to return (an error other than the
// cancellation fails the test) and closes its store; the test's cleanup
// calls stop, and calling it more than once does nothing more.
func RunCoordinator(t testing.TB, url string, cfg coordinator.Config, start *nn.Model) (*coordinator.Coordinator, func()) {
	t.Helper()
	c, err := coordinator.New(cfg)
	if err != nil {
		t.Fatalf("coordinator: %v", err)
	}
	if err := c.Bootstrap(context.Background(), start); err != nil {
		c.Close()
		t.Fatalf("bootstrap coordinator: %v", err)
	}
	nc := Connect(t, url, "coordinator")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, nc) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("coordinator: %v", err)
			}
			c.Close()
		})
	}
	t.Cleanup(stop)
	return c, stop
}
