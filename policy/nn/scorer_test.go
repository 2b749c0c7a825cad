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
// on. Biases are random and some single weights are signed zeros; rows
// carry zeros, negative zeros, values equal to the feature's mean (a
// normalised zero), values whose products underflow to signed zeros and
// large ones; some rows' pod features differ from the first row's
// (summed whole), one only by the sign of a zero; and infinities and NaN
// go to read and to skipped inputs. Under
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
			// biases (NewNet makes them zero) and single weights of +0
			// and -0 among the read inputs'
			for _, b := range [][]float32{f32(net.B1), f32(net.B2), f32(net.B3)} {
				for i := range b {
					b[i] = float32(rng.NormFloat64() * 0.1)
				}
			}
			w1 := f32(net.W1)
			for range 20 {
				if j := rng.IntN(len(w1)); w1[j] != 0 {
					w1[j] = float32(math.Copysign(0, float64(rng.IntN(2)-1)))
				}
			}
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
			if want := vectorKernel && tc.h1 == 32 && tc.h2 == 32 && tc.act == [2]Activation{ReLU, ReLU}; want != (sc.Kernel() == "avx2") {
				t.Fatalf("kernel %s in a build and CPU where the AVX2 kernel runs: %v", sc.Kernel(), vectorKernel)
			}
			val := func(i int) float32 {
				switch rng.IntN(8) {
				case 0:
					return 0
				case 1:
					return float32(math.Copysign(0, -1))
				case 2:
					return s.Mean[i]
				case 3: // (where the mean is zero) products that round to signed zeros
					return s.Mean[i] + float32(math.Copysign(1e-44, rng.NormFloat64()))
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
			// a non-finite value anywhere, a skipped input included (its
			// zero weight times an infinity is NaN on the plain path)
			for _, bad := range []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())} {
				for _, at := range []int{0, 2, 20, policy.FirstTelemetryFeature, f - 1} {
					raw := make([]float32, 3*f)
					for i := range raw {
						raw[i] = val(i % f)
					}
					copy(raw[f:f+policy.NumPodFeatures], raw[:policy.NumPodFeatures])
					copy(raw[2*f:2*f+policy.NumPodFeatures], raw[:policy.NumPodFeatures])
					raw[f+at] = bad
					got := make([]float32, 3)
					if err := sc.Scores(raw, 3, got); err != nil {
						t.Fatal(err)
					}
					x := append([]float32(nil), raw...)
					for r := range 3 {
						s.Normalize(x[r*f : (r+1)*f])
					}
					want, err := ref.Scores(x, 3)
					if err != nil {
						t.Fatal(err)
					}
					for r := range 3 {
						if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
							t.Fatalf("%v at input %d, row %d: %v (%#x), Net.Scores %v (%#x)", bad, at, r, got[r], math.Float32bits(got[r]), want[r], math.Float32bits(want[r]))
						}
					}
				}
			}
			if err := sc.Scores(make([]float32, f+1), 1, make([]float32, 1)); err == nil {
				t.Error("a row of the wrong length was scored")
			}
		})
	}
}
