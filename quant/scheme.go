package quant

import (
	"fmt"
	"math"

	"github.com/edgesched/edgesched/policy"
)

// QuantScheme's integer arithmetic: what an int8 artifact's scales mean
// to the network that runs it (quant/int8net), and what Quantize
// calibrates against (adaptive rounding fits the inputs QuantizeInput
// gives) and refuses without (Requantization).

// Largest magnitudes of the int8 inputs and u8 activations.
const (
	MaxInput      = 127
	MaxActivation = 255
)

// RoundMagic is 1.5 * 2^23: adding it to a float32 of magnitude below
// 2^22 leaves no fraction bits, so the addition rounds to an integer
// (half to even, IEEE's default), and subtracting it back is exact.
// QuantizeInput rounds with it, and so do the vector kernels.
const RoundMagic = 12582912

// QuantizeInput is one input: roundHalfEven(clamp((x - mean) * inv, lo,
// hi)), lo and hi within ±127 (Requantization), without a call to
// math.RoundToEven (TestQuantizeInput holds them equal). A NaN (features
// are finite by construction; this is defence) counts as 0, held within
// lo and hi, in every kernel.
func QuantizeInput(x, mean, inv, lo, hi float32) int8 {
	v := float32((x - mean) * inv)
	if v != v {
		v = 0
	}
	v = min(max(v, lo), hi)
	return int8(float32(v+RoundMagic) - RoundMagic)
}

// Requantization is an int8 artifact's scales as integer arithmetic: the
// input quantization of every feature, and the multipliers that map each
// hidden layer's int32 accumulators to u8 activations (acc * m >> s,
// with m sized so the product never overflows int32). It is a plain
// value, derived anew by each call.
type Requantization struct {
	// Mean, Inv, Lo and Hi quantize feature j:
	// QuantizeInput(x, Mean[j], Inv[j], Lo[j], Hi[j]).
	Mean, Inv, Lo, Hi []float32
	// M1 and S1 (layer 1), M2 and S2 (layer 2) per output channel c:
	// the activation is min((max(acc, 0) * M[c] + 2^(S[c]-1)) >> S[c],
	// 255), the rounding term 0 when S[c] is 0; S[c] is at most 30.
	M1, M2 []int32
	S1, S2 []uint8
}

// Requantization derives the integer arithmetic of an int8 artifact
// (QuantScheme). It refuses, wrapping ErrArtifact, an artifact that is
// not int8 or whose input scales leave an input with no finite
// quantization, and, wrapping ErrQuant, one whose hidden layers have no
// int32 multiplier or whose output layer's accumulator could overflow
// int32: Quantize refuses to make such an artifact.
func (a *Artifact) Requantization() (*Requantization, error) {
	if a.Header.DType != Int8 {
		return nil, fmt.Errorf("%w: a %s artifact is not int8", ErrArtifact, a.Header.DType)
	}
	l := a.Header.Layers
	t := func(name string) []float32 { return a.Tensor(name).F32 }
	r := &Requantization{}
	inScale := t("in_scale")
	s := a.Schema()
	r.Mean, r.Inv, r.Lo, r.Hi = inputScale(s, inScale)
	for j := range r.Inv {
		if f := float64(r.Inv[j]); math.IsInf(f, 0) || math.IsNaN(f) || r.Lo[j] != r.Lo[j] || r.Hi[j] != r.Hi[j] {
			return nil, fmt.Errorf("%w: input %d: std %v x scale %v leaves no finite input quantization", ErrArtifact, j, s.Std[j], inScale[j])
		}
	}
	var err error
	if r.M1, r.S1, err = multipliers(a.Tensor("w1").I8, a.Tensor("b1").I32, l.F, MaxInput, t("w1_scale"), t("a1_scale")); err != nil {
		return nil, fmt.Errorf("layer 1: %w", err)
	}
	if r.M2, r.S2, err = multipliers(a.Tensor("w2").I8, a.Tensor("b2").I32, l.H1, MaxActivation, t("w2_scale"), t("a2_scale")); err != nil {
		return nil, fmt.Errorf("layer 2: %w", err)
	}
	// the output: b3 + a2·w3 accumulates in int32; an accumulator that
	// could overflow would wrap to a wrong score (its float32 range is
	// the sanity check's: quant/sanity)
	maxAcc := int64(math.Abs(float64(a.Tensor("b3").I32[0])))
	for _, v := range a.Tensor("w3").I8 {
		maxAcc += MaxActivation * int64(abs8(v))
	}
	if maxAcc > math.MaxInt32 {
		return nil, fmt.Errorf("%w: output layer: accumulator up to %d does not fit int32 arithmetic", ErrQuant, maxAcc)
	}
	return r, nil
}

// multipliers returns, per output channel c, m_c and s_c with
// m_c / 2^s_c ~ wScale[c] / outScale[c] (s_c <= 30), m_c as large as
// possible while |acc| * m_c <= 2^30 for every accumulator the layer can
// produce (|acc| <= inputMax * sum |w| + |b|), so acc * m_c plus the
// rounding term never overflows int32.
func multipliers(w []int8, b []int32, fanIn int, inputMax int64, wScale, outScale []float32) ([]int32, []uint8, error) {
	outs := len(b)
	m := make([]int32, outs)
	sh := make([]uint8, outs)
	for c := range outs {
		var maxAcc int64
		for _, v := range w[c*fanIn : (c+1)*fanIn] {
			maxAcc += inputMax * int64(abs8(v))
		}
		maxAcc += int64(math.Abs(float64(b[c])))
		maxAcc = max(maxAcc, 1)
		limit := (int64(1) << 30) / maxAcc
		M := float64(wScale[c]) / float64(outScale[c])
		if !(M > 0) || math.IsInf(M, 0) {
			return nil, nil, fmt.Errorf("%w: channel %d multiplier %v", ErrQuant, c, M)
		}
		if M >= MaxActivation && limit >= MaxActivation {
			// Any positive accumulator already saturates: m = 255, s = 0
			// gives the same activations.
			m[c], sh[c] = MaxActivation, 0
			continue
		}
		s := 0
		for s < 30 && math.Round(M*math.Ldexp(1, s+1)) <= float64(limit) {
			s++
		}
		mc := int64(math.Round(M * math.Ldexp(1, s)))
		if mc < 1 || mc > limit {
			return nil, nil, fmt.Errorf("%w: channel %d: multiplier %v does not fit int32 arithmetic (accumulator up to %d)", ErrQuant, c, M, maxAcc)
		}
		m[c], sh[c] = int32(mc), uint8(s)
	}
	return m, sh, nil
}

func abs8(v int8) int32 {
	if v < 0 {
		return -int32(v)
	}
	return int32(v)
}

// inputScale returns the input quantization of schema s at input scales
// inScale: per feature the mean, the multiplier inv = 1/(std*scale), and
// the least and greatest value of (x - mean) * inv, ±127 or the scaled
// input bounds (s.Lo, s.Hi) where they lie within. The scaling is
// monotone, so holding its result within the scaled bounds is holding x
// within the bounds (policy.Schema.Bound) before it: the int8 network
// reads what the float one does.
func inputScale(s policy.Schema, inScale []float32) (mean, inv, lo, hi []float32) {
	F := len(s.Mean)
	mean, inv = append([]float32(nil), s.Mean...), make([]float32, F)
	lo, hi = make([]float32, F), make([]float32, F)
	for j := range F {
		inv[j] = float32(1 / (float64(s.Std[j]) * float64(inScale[j])))
		lo[j], hi[j] = -MaxInput, MaxInput
		if s.Lo != nil {
			lo[j] = max(lo[j], min(float32((s.Lo[j]-mean[j])*inv[j]), MaxInput))
			hi[j] = min(hi[j], max(float32((s.Hi[j]-mean[j])*inv[j]), -MaxInput))
		}
	}
	return mean, inv, lo, hi
}
