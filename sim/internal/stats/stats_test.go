package stats

import (
	"math"
	"testing"
)

func TestLogHistClampsNonFinite(t *testing.T) {
	h := NewLogHist()
	for _, v := range []float64{math.Inf(1), math.NaN(), -5, 1e300, 3} {
		h.Add(v)
	}
	if h.N != 5 || math.IsInf(h.Mean(), 0) || math.IsNaN(h.Mean()) {
		t.Fatalf("histogram n %d mean %v", h.N, h.Mean())
	}
	if q := h.Quantile(0.5); q > histMax*histRatio || q < 0 {
		t.Errorf("median %v outside the histogram", q)
	}
}

func TestMeanQuantile(t *testing.T) {
	v := []float64{5, 1, 4, 2, 3}
	// nearest rank: the 0.95-quantile of 5 values is the 5th smallest
	if Mean(v) != 3 || Quantile(v, 0.95) != 5 || Quantile(v, 0.5) != 3 || Mean(nil) != 0 || Quantile(nil, 0.5) != 0 {
		t.Errorf("mean %v, q95 %v, median %v", Mean(v), Quantile(v, 0.95), Quantile(v, 0.5))
	}
}
