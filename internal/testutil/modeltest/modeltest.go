// Package modeltest builds float models for tests of the packages that
// quantize, sign or compare them. It imports policy and policy/nn only,
// so a package policy/nn does not import (quant, for one) may use it in
// its own tests.
package modeltest

import (
	"math/rand/v2"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
)

// Random is a seeded random model of hidden widths h1 and h2 (critic 16)
// with a non-trivial schema: means drawn around 0, deviations in
// [0.5, 1.5).
func Random(t testing.TB, h1, h2 int, seed uint64) *nn.Model {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 9))
	net, err := nn.NewNet(policy.NumFeatures, h1, h2, 16, rng)
	if err != nil {
		t.Fatal(err)
	}
	s := policy.NewSchema()
	for i := range s.Mean {
		s.Mean[i] = float32(0.2 * rng.NormFloat64())
		s.Std[i] = float32(0.5 + rng.Float64())
	}
	return &nn.Model{Schema: s, Net: net}
}
