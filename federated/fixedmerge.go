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
