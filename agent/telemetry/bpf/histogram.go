package bpf

import (
	"math"
	"time"
)

// Histogram is a log2 histogram of latencies in microseconds: Buckets[i]
// counts observations in [2^i, 2^(i+1)) µs, Buckets[0] those in [0, 2) µs,
// and the last bucket also everything above its range.
type Histogram struct {
	Buckets [NumBuckets]uint64
}

// Count is the number of observations.
func (h Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Buckets {
		n += c
	}
	return n
}

// Sub returns the observations of h that are not in prev, an earlier
// snapshot of the same cumulative histogram. A bucket that went down
// (the counters were reset, or prev is not earlier) is 0.
func (h Histogram) Sub(prev Histogram) Histogram {
	var d Histogram
	for i, c := range h.Buckets {
		if c > prev.Buckets[i] {
			d.Buckets[i] = c - prev.Buckets[i]
		}
	}
	return d
}

// bucketBounds is the range of bucket i in microseconds.
func bucketBounds(i int) (lo, hi float64) {
	if i == 0 {
		return 0, 2
	}
	return math.Ldexp(1, i), math.Ldexp(1, i+1)
}

// Quantile estimates the latency below which a fraction q (clamped to
// [0, 1]) of the observations fall: it finds the bucket holding the
// q·Count()-th observation and interpolates linearly inside that bucket's
// range, as if its observations were spread evenly. It returns 0 for an
// empty histogram or a NaN q. The estimate is within the bucket, so off by
// at most a factor of 2.
func (h Histogram) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 || math.IsNaN(q) {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := q * float64(n)
	var below float64 // observations in the buckets before i
	for i, c := range h.Buckets {
		if c == 0 {
			continue
		}
		if below+float64(c) >= rank {
			lo, hi := bucketBounds(i)
			us := lo + (rank-below)/float64(c)*(hi-lo)
			return time.Duration(math.Round(us * 1e3))
		}
		below += float64(c)
	}
	// Unreachable: rank <= n and the loop sums to n.
	_, hi := bucketBounds(NumBuckets - 1)
	return time.Duration(hi * 1e3)
}
