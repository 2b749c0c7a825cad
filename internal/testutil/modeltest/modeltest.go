// Package modeltest builds float models, and candidate rows to score, for
// tests of the packages that quantize, sign, run or compare them. It
// imports policy and policy/nn only, so a package policy/nn does not
// import (quant, for one) may use it in its own tests.
package modeltest

import (
	"math/rand/v2"
	"slices"
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

// Rows are n candidate rows of one pod: random node features, the same
// pod features on every row (as in a real decision).
func Rows(n int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 3))
	F, P := policy.NumFeatures, policy.NumPodFeatures
	x := make([]float32, n*F)
	for i := range n {
		for j := range F {
			if j < P {
				x[i*F+j] = float32(j) * 0.1
			} else {
				x[i*F+j] = float32(rng.NormFloat64())
			}
		}
	}
	return x
}

// Bounded is a random 32 -> 32 model whose input bounds are each
// feature's mean less an eighth of its std to the mean plus two stds
// (asymmetric: calibrated on rows held within them, the int8 scale is
// set by the upper side, so the lower bound lies well inside the int8
// range and the kernels' per-feature clamp is what holds it), and k
// rows, most of whose values lie beyond them, with the same rows held
// within them.
func Bounded(t testing.TB, k int) (m *nn.Model, rows, held []float32) {
	t.Helper()
	m = Random(t, 32, 32, 41)
	F := policy.NumFeatures
	m.Schema.Lo, m.Schema.Hi = make([]float32, F), make([]float32, F)
	for j := range F {
		m.Schema.Lo[j], m.Schema.Hi[j] = m.Schema.Mean[j]-m.Schema.Std[j]/8, m.Schema.Mean[j]+2*m.Schema.Std[j]
	}
	rows = Rows(k, 42)
	for i := range rows {
		rows[i] *= 3
	}
	held = slices.Clone(rows)
	for i := range k {
		m.Schema.Clamp(held[i*F : (i+1)*F])
	}
	return m, rows, held
}

// Scores scores rows (whole rows of policy.NumFeatures) with sc, failing
// t on an error.
func Scores(t testing.TB, sc policy.Scorer, rows []float32) []float32 {
	t.Helper()
	k := len(rows) / policy.NumFeatures
	out := make([]float32, k)
	if err := sc.Scores(rows, k, out); err != nil {
		t.Fatal(err)
	}
	return out
}
