package e2e

import (
	"math"
	"testing"
)

// TestPairRatio checks the paired ratio against values worked by hand.
func TestPairRatio(t *testing.T) {
	tests := []struct {
		name       string
		a, b       []float64
		ratio, se  float64
		rounds, hi int
	}{
		// Ratios 2 and 4: geometric mean sqrt(8) = 2.828; the logs' sd is
		// ln 2/sqrt 2 = 0.490, so se = 2.828 × 0.490/sqrt 2 = 0.980.
		{"two rounds", []float64{2, 8}, []float64{1, 2}, math.Sqrt(8), math.Sqrt(8) * math.Ln2 / 2, 2, 2},
		// Equal rates: ratio 1 exactly, no spread, higher in none.
		{"level", []float64{150, 160, 170}, []float64{150, 160, 170}, 1, 0, 3, 0},
		// One round has no spread to estimate: se 0.
		{"one round", []float64{90}, []float64{100}, 0.9, 0, 1, 0},
		// A round with a zero rate is left out; the extra rate of a is unpaired.
		{"zero and unpaired", []float64{0, 100, 50, 7}, []float64{100, 50, 100}, 1, math.Ln2, 2, 1},
		{"none", nil, nil, 0, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pairRatio(tc.a, tc.b)
			if p.Rounds != tc.rounds || p.Higher != tc.hi {
				t.Fatalf("rounds %d higher %d, want %d and %d", p.Rounds, p.Higher, tc.rounds, tc.hi)
			}
			if math.Abs(p.Ratio-tc.ratio) > 1e-9 || math.Abs(p.SE-tc.se) > 1e-9 {
				t.Errorf("ratio %v se %v, want %v and %v", p.Ratio, p.SE, tc.ratio, tc.se)
			}
		})
	}
}
