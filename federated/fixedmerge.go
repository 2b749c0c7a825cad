package federated

import (
	"fmt"
	"math"
)

// Merge adds the coordinate sums of n contributions made elsewhere with
// the same Shift (a regional aggregator's partial sums, hi and lo as in
// FixedSum) to s. Integer addition is associative, so sums merged from
// any partition of the contributions equal the sums of all of them added
// here, bit for bit. Partial sums larger than n terms within the bound
// can be (each at most twice the limit) are refused with an error wrapping
// ErrContribution and nothing is added: a merge cannot overflow s when the
// total count stays within the N the shifts were sized for. The weight
// totals are the caller's (AddWeight per contribution).
func (s *FixedSum) Merge(hi []int64, lo []uint64, n int) error {
	if len(hi) != len(s.Hi) || len(lo) != len(s.Lo) {
		return fmt.Errorf("%w: %d coordinates, the sums have %d", ErrContribution, len(hi), len(s.Hi))
	}
	bound := math.Ldexp(float64(n)*2*s.limit, s.Shift)
	for i := range hi {
		if !(math.Abs(int128Float(hi[i], lo[i])) <= bound) {
			return fmt.Errorf("%w: coordinate %d of partial sums of %d exceeds their bound", ErrContribution, i, n)
		}
	}
	for i := range hi {
		c := Int128{s.Hi[i], s.Lo[i]}
		c.add(hi[i], lo[i])
		s.Hi[i], s.Lo[i] = c.Hi, c.Lo
	}
	return nil
}

// MergeWithin is Merge, and also refuses partial sums whose L2 norm
// exceeds norm, the most the n contributions' terms can add up to (the
// sum of each one's weight times its clipped norm): per-coordinate bounds
// alone would let a region that declares one sample send sums as large
// as n contributions of the largest weight. The check allows the fixed
// point's rounding (half a unit per term and coordinate, times the
// largest int8 value) and a relative 1e-9 for the float arithmetic.
func (s *FixedSum) MergeWithin(hi []int64, lo []uint64, n int, norm float64) error {
	if len(hi) != len(s.Hi) || len(lo) != len(s.Lo) {
		return fmt.Errorf("%w: %d coordinates, the sums have %d", ErrContribution, len(hi), len(s.Hi))
	}
	if !(norm >= 0) || math.IsInf(norm, 0) {
		return fmt.Errorf("%w: norm bound %v", ErrContribution, norm)
	}
	var ss float64
	for i := range hi {
		x := math.Ldexp(int128Float(hi[i], lo[i]), -s.Shift)
		ss += x * x
	}
	got := math.Sqrt(ss)
	slack := math.Ldexp(float64(n)*64*math.Sqrt(float64(len(hi))), -s.Shift)
	if !(got <= norm*(1+1e-9)+slack) {
		return fmt.Errorf("%w: partial sums of %d contributions have L2 norm %.6g, their weights and norms allow %.6g", ErrContribution, n, got, norm)
	}
	return s.Merge(hi, lo, n)
}
