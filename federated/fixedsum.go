package federated

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/edgesched/edgesched/internal/parallel"
	"github.com/edgesched/edgesched/quant/esu"
)

// FixedSum is FedAvg's and FedBuff's running sums (sum of w_i * d_i, the
// weight total) kept in exact fixed point: every coordinate is a signed
// 128-bit integer in units of 2^-Shift, every term is rounded on its own
// (a term whose bits all lie at or above 2^-Shift, which is every term of
// realistic size, is not rounded at all) and integer addition is
// associative, so the sums do not depend on the order in which the
// contributions arrive or on how they are grouped. A coordinator can
// therefore add each update as it is judged, store the sums instead of the
// updates, and still recompute after a crash the bit-identical model an
// uninterrupted run makes — which a float64 running sum cannot promise.
//
// The sums cannot overflow because the contributions are bounded: at most
// N of them, each with weight at most MaxWeight and every value at most
// MaxAbs in magnitude (the round's sample cap and clip norm, or norm
// bound); FixedShifts picks Shift and WShift from those bounds and
// Prepare refuses a contribution that exceeds them. With the coordinator's
// defaults (1,000 sites, 1e8 samples, clip norm 10) Shift is 84: the
// rounding of a term, when there is any, is below 2^-84.
type FixedSum struct {
	Shift  int // value sums in units of 2^-Shift
	WShift int // weight totals in units of 2^-WShift
	// Hi and Lo are the coordinates' sums: Hi[i]*2^64 + Lo[i].
	Hi []int64
	Lo []uint64
	// Weight is the sum of effective weights (FedBuff's after the
	// staleness discount), Samples the sum of weights before it.
	Weight, Samples Int128
	Count           uint64
	StaleSum        uint64
	StaleMax        uint64

	limit float64 // largest |weight * value| a term may have
}

// Int128 is a signed 128-bit integer, Hi*2^64 + Lo.
type Int128 struct {
	Hi int64
	Lo uint64
}

// minFixedShift is the least resolution FixedShifts accepts: bounds so
// loose that the sums would keep fewer fraction bits are served by
// storing the updates instead.
const minFixedShift = 48

// FixedShifts returns the value and weight shifts for at most n
// contributions of weight at most maxWeight with values at most maxAbs in
// magnitude (one bit of margin each), and false when the bounds are
// missing or too loose for an exact sum with at least 48 fraction bits.
func FixedShifts(n int, maxWeight, maxAbs float64) (shift, wshift int, ok bool) {
	if n < 1 || !(maxWeight > 0) || !(maxAbs > 0) || math.IsInf(maxWeight, 0) || math.IsInf(maxAbs, 0) {
		return 0, 0, false
	}
	// |sum| <= n * 2*maxWeight*maxAbs must stay below 2^126
	shift = 125 - int(math.Ceil(math.Log2(float64(n)*2*maxWeight*maxAbs)))
	wshift = 125 - int(math.Ceil(math.Log2(float64(n)*2*maxWeight)))
	if shift < minFixedShift || wshift < minFixedShift || shift > 1000 || wshift > 1000 {
		return 0, 0, false
	}
	return shift, wshift, true
}

// NewFixedSum returns empty sums of dim coordinates whose terms are at
// most limit (maxWeight*maxAbs of FixedShifts) in magnitude.
func NewFixedSum(dim, shift, wshift int, limit float64) *FixedSum {
	return &FixedSum{Shift: shift, WShift: wshift, Hi: make([]int64, dim), Lo: make([]uint64, dim), limit: limit}
}

// SetLimit sets the bound on terms (for sums read back from a store).
func (s *FixedSum) SetLimit(limit float64) { s.limit = limit }

// FixedTerm is one contribution prepared for FixedSum.Add.
type FixedTerm struct {
	v    *esu.View
	mult float64
	// per int8 chunk: the multiplier mult*scale as m * 2^e (e >= 0)
	m []int64
	e []uint8
}

// Prepare checks one contribution against the sums' bound and prepares
// it: the update's values times mult (its weight, times its clipping
// factor), norm being their L2 norm (esu.Check's) before mult.
// A contribution whose terms could exceed the bound (twice the limit, for
// rounding) is refused with an error wrapping ErrContribution.
func (s *FixedSum) Prepare(v *esu.View, mult, norm float64) (FixedTerm, error) {
	if v.Len() != len(s.Hi) {
		return FixedTerm{}, fmt.Errorf("%w: %d values, the sums have %d", ErrContribution, v.Len(), len(s.Hi))
	}
	if !(mult > 0) || math.IsInf(mult, 0) || !(mult*norm <= 2*s.limit) {
		return FixedTerm{}, fmt.Errorf("%w: weight %v times norm %v exceeds the bound %v", ErrContribution, mult, norm, s.limit)
	}
	t := FixedTerm{v: v, mult: mult}
	if v.Encoding() != esu.Int8 {
		return t, nil
	}
	n := v.Chunks()
	t.m, t.e = make([]int64, n), make([]uint8, n)
	for j := range n {
		scale, _ := v.Int8Chunk(j)
		c := mult * float64(scale)
		if !(c*127 <= 2*s.limit) {
			return FixedTerm{}, fmt.Errorf("%w: chunk %d's scale %v exceeds the bound %v", ErrContribution, j, scale, s.limit)
		}
		t.m[j], t.e[j] = fixedParts(c, s.Shift)
	}
	return t, nil
}

// fixedParts writes x*2^shift (x >= 0 or not, finite) as m*2^e with e >=
// 0 and |m| < 2^53, rounding (half away from zero) when x*2^shift has
// bits below 2^0.
func fixedParts(x float64, shift int) (int64, uint8) {
	if x == 0 {
		return 0, 0
	}
	frac, exp := math.Frexp(x) // x = frac * 2^exp, 0.5 <= |frac| < 1
	m := int64(frac * (1 << 53))
	e := exp - 53 + shift
	if e >= 0 {
		return m, uint8(e)
	}
	if e < -62 {
		return 0, 0
	}
	neg := m < 0
	if neg {
		m = -m
	}
	m = (m + 1<<(-e-1)) >> -e
	if neg {
		m = -m
	}
	return m, 0
}

// shifted is m*2^e as a signed 128-bit integer (e < 128, |m*2^e| < 2^127).
func shifted(m int64, e uint8) (int64, uint64) {
	switch {
	case e == 0:
		return m >> 63, uint64(m)
	case e < 64:
		return m >> (64 - e), uint64(m) << e
	default:
		return m << (e - 64), 0
	}
}

// addFloat adds x*2^shift, rounded, to a.
func (a *Int128) addFloat(x float64, shift int) {
	hi, lo := shifted(fixedParts(x, shift))
	a.add(hi, lo)
}

func (a *Int128) add(hi int64, lo uint64) {
	l, c := bits.Add64(a.Lo, lo, 0)
	a.Lo, a.Hi = l, a.Hi+hi+int64(c)
}

// Float64 is a times 2^-shift, rounded to float64.
func (a Int128) Float64(shift int) float64 {
	return math.Ldexp(int128Float(a.Hi, a.Lo), -shift)
}

func int128Float(hi int64, lo uint64) float64 {
	if hi == int64(lo)>>63 {
		return float64(int64(lo))
	}
	return float64(hi)*0x1p64 + float64(lo)
}

// fixedStripe is how many coordinates one worker adds at a time.
const fixedStripe = 4096

// Add adds prepared terms to the coordinate sums on at most workers
// goroutines (0: GOMAXPROCS), each worker a stripe of coordinates of every
// term. The weight totals are AddWeight's.
func (s *FixedSum) Add(terms []FixedTerm, workers int) {
	if len(terms) == 0 {
		return
	}
	dim := len(s.Hi)
	parallel.For((dim+fixedStripe-1)/fixedStripe, workers, func(k int) {
		lo, hi := k*fixedStripe, min((k+1)*fixedStripe, dim)
		for i := range terms {
			s.addStripe(&terms[i], lo, hi)
		}
	})
}

func (s *FixedSum) addStripe(t *FixedTerm, lo, hi int) {
	v := t.v
	if v.Encoding() != esu.Int8 {
		for i := lo; i < hi; i++ {
			x := t.mult * float64(v.Float32(i))
			h, l := shifted(fixedParts(x, s.Shift))
			c := &Int128{s.Hi[i], s.Lo[i]}
			c.add(h, l)
			s.Hi[i], s.Lo[i] = c.Hi, c.Lo
		}
		return
	}
	cs := v.ChunkSize()
	for j := lo / cs; j*cs < hi; j++ {
		_, q := v.Int8Chunk(j)
		a, b := max(lo, j*cs), min(hi, j*cs+len(q))
		addChunk(s.Hi[a:b], s.Lo[a:b], q[a-j*cs:b-j*cs], t.m[j], t.e[j])
	}
}

// addChunk adds m*int8(q[i])*2^e to coordinate i (|m| < 2^53, so the
// product fits 61 bits; the bound keeps the shifted product below 2^126).
func addChunk(hs []int64, ls []uint64, q []byte, m int64, e uint8) {
	if m == 0 {
		return
	}
	hs, ls = hs[:len(q)], ls[:len(q)]
	switch {
	case e == 0:
		for i, b := range q {
			p := m * int64(int8(b))
			l, c := bits.Add64(ls[i], uint64(p), 0)
			ls[i], hs[i] = l, hs[i]+p>>63+int64(c)
		}
	case e < 64:
		for i, b := range q {
			p := m * int64(int8(b))
			l, c := bits.Add64(ls[i], uint64(p)<<e, 0)
			ls[i], hs[i] = l, hs[i]+p>>(64-e)+int64(c)
		}
	default:
		for i, b := range q {
			hs[i] += (m * int64(int8(b))) << (e - 64)
		}
	}
}

// AddWeight counts one contribution: its effective weight (after any
// staleness discount), its weight before the discount and its staleness.
func (s *FixedSum) AddWeight(weight, samples float64, staleness int) {
	s.Weight.addFloat(weight, s.WShift)
	s.Samples.addFloat(samples, s.WShift)
	s.Count++
	s.StaleSum += uint64(staleness)
	s.StaleMax = max(s.StaleMax, uint64(staleness))
}

// Result is the weighted mean (sum / weight total) and the statistics of
// the rule named name (fedavg or fedbuff), as meanAggregator reports them.
func (s *FixedSum) Result(name string) (Result, error) {
	if s.Count == 0 {
		return Result{}, fmt.Errorf("%w: %s: no contributions", ErrAggregate, name)
	}
	w := s.Weight.Float64(s.WShift)
	if !(w > 0) {
		return Result{}, fmt.Errorf("%w: %s: weight total %v", ErrAggregate, name, w)
	}
	out := make([]float32, len(s.Hi))
	for i := range out {
		out[i] = float32(math.Ldexp(int128Float(s.Hi[i], s.Lo[i]), -s.Shift) / w)
	}
	stats := map[string]float64{"count": float64(s.Count), "weight_total": w}
	if name == RuleFedBuff {
		raw := s.Samples.Float64(s.WShift)
		stats["sample_weight_total"] = raw
		stats["discount_mean"] = w / raw
		stats["staleness_mean"] = float64(s.StaleSum) / float64(s.Count)
		stats["staleness_max"] = float64(s.StaleMax)
	}
	return Result{Delta: out, Stats: stats}, nil
}
