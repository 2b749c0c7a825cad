package region

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/esu"
)

func key(t *testing.T, seed byte) *quant.Signer {
	t.Helper()
	s, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{seed, 0x6e}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testSites registers sites with keys 1, 2, ... (key) in order.
func testSites(t *testing.T, sites ...string) (*federated.Registry, map[string]*quant.Signer) {
	t.Helper()
	keys := map[string]*quant.Signer{}
	reg := &federated.Registry{}
	for i, s := range sites {
		keys[s] = key(t, byte(i+1))
		if err := reg.Add(s, keys[s].Public()); err != nil {
			t.Fatal(err)
		}
	}
	return reg, keys
}

// summingRound is round 2 of base model base (version 1), collecting
// FedAvg sums of at most 10 sites of 1,000 samples, clipped to norm 10.
func summingRound(t *testing.T) (round *coordinator.Round, base string) {
	t.Helper()
	base = strings.Repeat("ab", 32)
	shift, wshift, ok := federated.FixedShifts(10, 1000, 10)
	if !ok {
		t.Fatal("bounds")
	}
	return &coordinator.Round{Round: 2, Mode: federated.Sync, State: coordinator.StateCollecting, BaseModel: base, BaseVersion: 1,
		MaxNorm: 100, MaxSamples: 1000, ClipNorm: 10, Sum: &store.SumSpec{Rule: federated.RuleFedAvg, N: 10, MaxWeight: 1000, MaxAbs: 10, Shift: shift, WShift: wshift}}, base
}

// newAggregator is region "eu" of reg's sites, signing with key 9, its
// store in a new directory; the test closes it.
func newAggregator(t *testing.T, reg *federated.Registry) *Aggregator {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Region, cfg.DataDir, cfg.Sites, cfg.Signer = "eu", t.TempDir(), reg, key(t, 9)
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// runAggregator runs g on nc (the region's server and the root's) until
// the test ends, when it checks Run ended by the cancellation; ended
// fails the test if Run has ended before.
func runAggregator(t *testing.T, g *Aggregator, nc *nats.Conn) (ended func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx, nc, nc) }()
	var result error
	finished := false
	wait := func() error {
		if !finished {
			result, finished = <-done, true
		}
		return result
	}
	t.Cleanup(func() {
		cancel()
		if err := wait(); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("run: %v", err)
		}
	})
	return func() {
		t.Helper()
		select {
		case err := <-done:
			result, finished = err, true
			t.Fatalf("run ended: %v", err)
		default:
		}
	}
}

// updateMsg is site's signed update seq for round rnd of baseModel: dims
// small values, samples claimed.
func updateMsg(t *testing.T, site string, seq, rnd uint64, baseModel string, samples int64, dims int, signer *quant.Signer) []byte {
	t.Helper()
	v := make([]float32, dims)
	for j := range v {
		v[j] = 0.01 * float32(j%7)
	}
	payload, err := esu.Encode(&esu.Update{Base: baseModel, Values: v}, esu.DefaultOptions(seq))
	if err != nil {
		t.Fatal(err)
	}
	b, err := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: site, Seq: seq, Round: rnd, BaseModel: baseModel, BaseVersion: 1,
		Samples: samples, Created: time.Unix(0, 0).UTC()}, payload, signer)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
