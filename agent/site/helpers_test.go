package site

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant"
)

// key is a reproducible test key.
func key(t testing.TB, seed byte) *quant.Signer {
	t.Helper()
	s, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{seed, 0x5e}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func keyring(t testing.TB, s *quant.Signer) *quant.Keyring {
	t.Helper()
	k := &quant.Keyring{}
	if _, err := k.Add(s.Public()); err != nil {
		t.Fatal(err)
	}
	return k
}

// smallModel is a small network so training and quantizing are quick.
func smallModel(t testing.TB, seed uint64) *policy.Model {
	t.Helper()
	net, err := policy.NewNet(policy.NumFeatures, 8, 8, 8, rand.New(rand.NewPCG(seed, 1)))
	if err != nil {
		t.Fatal(err)
	}
	return &policy.Model{Schema: policy.NewSchema(), Net: net}
}

// calibrationRows stands in for simulator states when quantizing.
func calibrationRows(_ context.Context, _ *policy.Model) ([]float32, error) {
	rng := rand.New(rand.NewPCG(4, 4))
	rows := make([]float32, 500*policy.NumFeatures)
	for i := range rows {
		rows[i] = float32(rng.NormFloat64())
	}
	return rows, nil
}

// int8Bytes is a signed int8 artifact of a small model at version v.
func int8Bytes(t testing.TB, s *quant.Signer, seed, v uint64) []byte {
	t.Helper()
	rows, _ := calibrationRows(context.Background(), nil)
	a, err := quant.Quantize(smallModel(t, seed), rows, quant.DefaultCalibration(), quant.Info{Version: v, Created: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := a.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// poll checks cond every 20 ms until it holds or within passes.
func poll(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
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
