package quant

import (
	"math/rand/v2"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
)

// randomModel is a seeded random model with a non-trivial schema.
func randomModel(t testing.TB, h1, h2 int, seed uint64) *nn.Model {
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

// quantized calibrates m on n random candidate rows (benchRows(n, seed))
// with the default calibration and builds its integer scorer.
func quantized(t testing.TB, m *nn.Model, n int, seed uint64) (*Artifact, *Int8Net) {
	t.Helper()
	a, err := Quantize(m.Float(), benchRows(n, seed), DefaultCalibration(), Info{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewInt8Net(a)
	if err != nil {
		t.Fatal(err)
	}
	return a, q
}
