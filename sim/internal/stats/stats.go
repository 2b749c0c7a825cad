// Package stats holds the simulator's summary statistics: means, nearest-
// rank quantiles and a constant-memory histogram for the latency proxy.
// Values are not safe for concurrent use.
package stats

import (
	"math"
	"slices"
)

// Mean is the arithmetic mean of v (0 when empty).
func Mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// Quantile returns the q-quantile of v by the nearest-rank method.
func Quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	k := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(k, len(s)-1))]
}

// LogHist is a histogram with logarithmic bins (1% wide) for quantiles of
// positive values over many samples in constant memory.
type LogHist struct {
	counts []int64
	N      int64
	sum    float64
}

const (
	histMin   = 0.01
	histRatio = 1.01
	histBins  = 1900 // 0.01 * 1.01^1900 ≈ 1.6e6
	// histMax clamps values (and so the mean) to the last bin's range; the
	// latency proxy stays far below it for bounded inputs.
	histMax = 1.5e6
)

// NewLogHist returns an empty histogram.
func NewLogHist() LogHist { return LogHist{counts: make([]int64, histBins)} }

// Add counts v (NaN and negatives as 0, values above histMax as histMax).
func (h *LogHist) Add(v float64) {
	if math.IsNaN(v) || v < 0 {
		v = 0
	}
	v = min(v, histMax)
	h.N++
	h.sum += v
	b := 0
	if v > histMin {
		b = int(math.Log(v/histMin) / math.Log(histRatio))
	}
	h.counts[max(0, min(b, histBins-1))]++
}

// Mean is the mean of the values added.
func (h *LogHist) Mean() float64 { return h.sum / float64(h.N) }

// Quantile returns the geometric middle of the bin holding the q-quantile.
func (h *LogHist) Quantile(q float64) float64 {
	rank := int64(math.Ceil(q * float64(h.N)))
	var c int64
	for b, k := range h.counts {
		c += k
		if c >= rank && k > 0 {
			return histMin * math.Pow(histRatio, float64(b)+0.5)
		}
	}
	return histMin * math.Pow(histRatio, histBins)
}
