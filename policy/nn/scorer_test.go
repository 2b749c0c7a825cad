package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/edgesched/edgesched/policy"
)

// TestFloatScorerMatchesNet: FloatScorer (the pod features' share of the
// first layer summed once per call, inputs without weights skipped) gives
// the bits of normalising every row and running Net.Scores (gonum's Sgemm
// over all inputs), the path every shipped model's figures were measured
// on. Rows carry zeros, negative zeros and values equal to the feature's
// mean (a normalised zero); some rows' pod features differ from the first
// row's (summed whole), one only by the sign of a zero. Under
// GOEXPERIMENT=simd on an AVX2 machine the 32-wide ReLU cases run the
// vector kernel (make test runs this test both ways).
func TestFloatScorerMatchesNet(t *testing.T) {
	f := policy.NumFeatures
	exclude := make([]bool, f)
	for _, i := range []int{2, 5, 20, policy.FirstTelemetryFeature, f - 1} {
		exclude[i] = true
	}
	cases := []struct {
		name    string
		exclude []bool
		act     [2]Activation
		h1, h2  int
	}{
		{"relu, every input read", nil, [2]Activation{ReLU, ReLU}, 32, 32},
		{"relu, inputs left out", exclude, [2]Activation{ReLU, ReLU}, 32, 32},
		{"tanh, inputs left out, odd widths", exclude, [2]Activation{Tanh, ReLU}, 13, 7},
		{"wide", exclude, [2]Activation{ReLU, ReLU}, 80, 70},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ci)+40, 3))
			ex := tc.exclude
			if ex == nil {
				ex = make([]bool, f)
			}
			net, err := NewNetExcluding(f, tc.h1, tc.h2, 4, rng, ex)
			if err != nil {
				t.Fatal(err)
			}
			net.Act = tc.act
			s := policy.NewSchema()
			for i := range s.Mean {
				if i%4 != 0 { // every fourth mean is zero: a raw -0 stays -0
					s.Mean[i] = float32(rng.NormFloat64())
				}
				s.Std[i] = float32(0.5 + rng.Float64())
			}
			m := &Model{Schema: s, Net: net}
			sc, err := NewFloatScorer(m)
			if err != nil {
				t.Fatal(err)
			}
			ref := net.Clone()
			t.Logf("kernel %s", sc.Kernel())
			val := func(i int) float32 {
				switch rng.IntN(8) {
				case 0:
					return 0
				case 1:
					return float32(math.Copysign(0, -1))
				case 2:
					return s.Mean[i]
				case 3: // products that round to (signed) zero
					return s.Mean[i] + float32(rng.NormFloat64()*1e-36)
				case 4:
					return float32(rng.NormFloat64() * 1e15)
				default:
					return float32(rng.NormFloat64())
				}
			}
			for _, k := range []int{1, 2, 7, 40, 200} {
				raw := make([]float32, k*f)
				for i := range raw {
					raw[i] = val(i % f)
				}
				for r := 1; r < k; r++ {
					copy(raw[r*f:r*f+policy.NumPodFeatures], raw[:policy.NumPodFeatures])
				}
				if k > 2 {
					raw[2*f+3] += 1 // another pod
				}
				if k > 7 {
					// the first row's feature 0 with its zero's sign flipped
					raw[0], raw[6*f] = 0, float32(math.Copysign(0, -1))
				}
				got := make([]float32, k)
				if err := sc.Scores(raw, k, got); err != nil {
					t.Fatal(err)
				}
				x := append([]float32(nil), raw...)
				for r := range k {
					s.Normalize(x[r*f : (r+1)*f])
				}
				want, err := ref.Scores(x, k)
				if err != nil {
					t.Fatal(err)
				}
				for r := range k {
					if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
						t.Fatalf("k=%d row %d: %v (%#x), Net.Scores %v (%#x)", k, r, got[r], math.Float32bits(got[r]), want[r], math.Float32bits(want[r]))
					}
				}
			}
			if err := sc.Scores(make([]float32, f+1), 1, make([]float32, 1)); err == nil {
				t.Error("a row of the wrong length was scored")
			}
		})
	}
}
