package quant

import (
	"errors"
	"fmt"
	"math"

	"github.com/edgesched/edgesched/policy"
)

// Int8Net is the all-integer scorer (QuantScheme): int8 inputs, int8
// weights, int32 accumulation and biases, unsigned 8-bit activations, and
// integer requantization between layers (acc * m >> s, with m sized at
// load time so the product never overflows int32). Only the input
// quantization (features are floats) and the final score scale are float.
//
// An Int8Net is read-only after NewInt8Net; Scorer gives each run its own
// scratch, so one Int8Net may serve many runs at once.
type Int8Net struct {
	F, H1, H2 int
	// input quantization: q = round(clamp((x - mean) * inv, lo, hi)),
	// lo and hi the artifact's input bounds on that scale, within ±127
	// (inputScale)
	mean, inv, lo, hi []float32

	w1       []int8 // H1 x F, output-major
	b1       []int32
	m1       []int32
	s1       []uint8
	w2       []int8 // H2 x H1
	b2       []int32
	m2       []int32
	s2       []uint8
	w3       []int8 // H2
	b3       int32
	outScale float32
	// packed node-feature part of layer 1, and layer 2 (see swar)
	sw1, sw2 *swar
	// the vector kernel (nil when Kernel is KernelPortable)
	vec *vecNet
	// Decision is the artifact's decision rule.
	Decision policy.Decision
	// AffinityEncoder is the ID of the GraphSAGE weights whose partners
	// the model's dep_affinity reads (Artifact.AffinityEncoder).
	AffinityEncoder string
}

// ErrQuant wraps refusals of quantization.
var ErrQuant = errors.New("quant: cannot quantize")

// ErrKernel: the named int8 kernel does not exist in this build or on
// this CPU.
var ErrKernel = errors.New("quant: kernel not available")

// The int8 kernels (Kernels, ScorerWith): all compute the same scores.
const (
	// KernelPortable is SIMD within a register in plain Go (every build).
	KernelPortable = "portable"
	// KernelAVX2 and KernelAVX512 are the vector kernels
	// (GOEXPERIMENT=simd on amd64): 8 or 16 candidate nodes a vector.
	KernelAVX2   = "avx2"
	KernelAVX512 = "avx512"
)

// Largest magnitudes of the int8 inputs and u8 activations.
const (
	inMax  = 127
	actMax = 255
)

// NewInt8Net builds the integer scorer of an int8 artifact and derives
// its requantization multipliers.
func NewInt8Net(a *Artifact) (*Int8Net, error) {
	if a.Header.DType != Int8 {
		return nil, fmt.Errorf("%w: a %s artifact is not int8", ErrArtifact, a.Header.DType)
	}
	l := a.Header.Layers
	t := func(name string) []float32 { return a.Tensor(name).F32 }
	n := &Int8Net{F: l.F, H1: l.H1, H2: l.H2, Decision: a.Header.Decision, AffinityEncoder: a.AffinityEncoder(),
		w1: a.Tensor("w1").I8, b1: a.Tensor("b1").I32, w2: a.Tensor("w2").I8, b2: a.Tensor("b2").I32,
		w3: a.Tensor("w3").I8, b3: a.Tensor("b3").I32[0]}
	inScale := t("in_scale")
	s := a.Schema()
	n.mean, n.inv, n.lo, n.hi = inputScale(s, inScale)
	for j := range n.inv {
		if f := float64(n.inv[j]); math.IsInf(f, 0) || math.IsNaN(f) || n.lo[j] != n.lo[j] || n.hi[j] != n.hi[j] {
			return nil, fmt.Errorf("%w: input %d: std %v x scale %v leaves no finite input quantization", ErrArtifact, j, s.Std[j], inScale[j])
		}
	}
	var err error
	if n.m1, n.s1, err = multipliers(n.w1, n.b1, l.F, inMax, t("w1_scale"), t("a1_scale")); err != nil {
		return nil, fmt.Errorf("layer 1: %w", err)
	}
	if n.m2, n.s2, err = multipliers(n.w2, n.b2, l.H1, actMax, t("w2_scale"), t("a2_scale")); err != nil {
		return nil, fmt.Errorf("layer 2: %w", err)
	}
	n.outScale = t("w3_scale")[0]
	P := policy.NumPodFeatures
	nodeW := make([]int8, 0, l.H1*(l.F-P))
	for c := range l.H1 {
		nodeW = append(nodeW, n.w1[c*l.F+P:(c+1)*l.F]...)
	}
	n.sw1 = newSWAR(nodeW, l.F-P, l.H1, inMax)
	n.sw2 = newSWAR(n.w2, l.H1, l.H2, 0)
	n.vec = newVecNet(n)
	return n, nil
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
		if M >= actMax && limit >= actMax {
			// Any positive accumulator already saturates: m = 255, s = 0
			// gives the same activations.
			m[c], sh[c] = actMax, 0
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

// requant maps a layer's accumulator to its ReLU'd u8 activation.
// Branch-free (ReLU is a coin toss per channel, which a branch
// mispredicts): max, min and the rounding term 2^(s-1) (0 when s is 0).
// s is at most 30 (multipliers): at 31 the rounding term would wrap.
func requant(acc, m int32, s uint8) uint8 {
	r := int32(1) << s >> 1
	// cannot overflow: m was sized for the layer's largest |acc|
	return uint8(min((max(acc, 0)*m+r)>>s, actMax))
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
		lo[j], hi[j] = -inMax, inMax
		if s.Lo != nil {
			lo[j] = max(lo[j], min(float32((s.Lo[j]-mean[j])*inv[j]), inMax))
			hi[j] = min(hi[j], max(float32((s.Hi[j]-mean[j])*inv[j]), -inMax))
		}
	}
	return mean, inv, lo, hi
}

// quantizeInput maps raw features [from, to) to int8 inputs.
func (n *Int8Net) quantizeInput(raw []float32, q []int8, from, to int) {
	for j := from; j < to; j++ {
		q[j] = quantize1(raw[j], n.mean[j], n.inv[j], n.lo[j], n.hi[j])
	}
}

// roundMagic is 1.5 * 2^23: adding it to a float32 of magnitude below
// 2^22 leaves no fraction bits, so the addition rounds to an integer
// (half to even, IEEE's default), and subtracting it back is exact.
const roundMagic = 12582912

// quantize1 is one input: roundHalfEven(clamp((x - mean) * inv, lo,
// hi)), lo and hi within ±127 (inputScale), without a call to
// math.RoundToEven (TestQuantize1 holds them equal). A NaN (features are
// finite by construction; this is defence) counts as 0, held within lo
// and hi, in every kernel.
func quantize1(x, mean, inv, lo, hi float32) int8 {
	v := float32((x - mean) * inv)
	if v != v {
		v = 0
	}
	v = min(max(v, lo), hi)
	return int8(float32(v+roundMagic) - roundMagic)
}

// dot is the int8 x int8 (inputs) or u8 x int8 (activations) dot
// product with int32 accumulation.
func dot[T int8 | uint8](a []T, b []int8) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += int32(a[i]) * int32(b[i])
		s1 += int32(a[i+1]) * int32(b[i+1])
		s2 += int32(a[i+2]) * int32(b[i+2])
		s3 += int32(a[i+3]) * int32(b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}

// Scorer returns a policy.Scorer over n with its own scratch (one per
// run), scoring with the fastest kernel this build and CPU have (Kernel).
func (n *Int8Net) Scorer() *Int8Scorer { return n.newScorer(n.vec) }

// ScorerWith is Scorer with the named kernel (one of Kernels): every
// kernel computes the same scores; benchmarks compare them.
func (n *Int8Net) ScorerWith(kernel string) (*Int8Scorer, error) {
	if kernel == KernelPortable {
		return n.newScorer(nil), nil
	}
	v, err := newVecNetKernel(n, kernel)
	if err != nil {
		return nil, err
	}
	return n.newScorer(v), nil
}

func (n *Int8Net) newScorer(v *vecNet) *Int8Scorer {
	s := &Int8Scorer{n: n, q: make([]int8, n.F), pod: make([]int32, n.H1), a1: make([]uint8, n.H1), a2: make([]uint8, n.H2),
		podRaw: make([]float32, policy.NumPodFeatures), u: make([]uint64, max(n.F, n.H1)), acc: make([]int32, max(n.H1, n.H2))}
	if v != nil {
		s.vec, s.vs = v, v.scratch()
	}
	return s
}

// Int8Scorer scores with an Int8Net. Not safe for concurrent use.
type Int8Scorer struct {
	n      *Int8Net
	q      []int8
	pod    []int32 // bias + pod features' share of layer 1
	podRaw []float32
	a1, a2 []uint8
	u      []uint64
	acc    []int32
	vec    *vecNet // nil: the portable kernel
	vs     *vecScratch
}

var _ policy.Scorer = (*Int8Scorer)(nil)

// Scores implements policy.Scorer: the pod features' share of layer 1 is
// computed once per call (and again for any row whose pod features
// differ), then each row runs the rest of the MLP in integers.
func (s *Int8Scorer) Scores(raw []float32, k int, out []float32) error {
	n := s.n
	F, P := n.F, policy.NumPodFeatures
	if k <= 0 || len(raw) != k*F || len(out) < k {
		return fmt.Errorf("%w: %d values for %d candidates of %d features", policy.ErrShape, len(raw), k, F)
	}
	if s.vec != nil {
		s.scoresVec(raw, k, out)
		return nil
	}
	havePod := false
	for i := range k {
		row := raw[i*F : (i+1)*F]
		if !havePod || !equalF32(row[:P], s.podRaw) {
			s.podShare(row)
			havePod = true
		}
		n.quantizeInput(row, s.q, P, F)
		out[i] = s.forward()
	}
	return nil
}

// scoresVec is Scores with the vector kernel: runs of rows with the same
// pod features go through it a block (8 or 16 nodes) at a time.
func (s *Int8Scorer) scoresVec(raw []float32, k int, out []float32) {
	n, v := s.n, s.vec
	F, P := n.F, policy.NumPodFeatures
	for i := 0; i < k; {
		if i == 0 || !equalF32(raw[i*F:i*F+P], s.podRaw) {
			s.podShare(raw[i*F : (i+1)*F])
		}
		j := i + 1
		for ; j < k && j-i < v.width; j++ {
			if !equalF32(raw[j*F:j*F+P], s.podRaw) {
				break
			}
		}
		v.put(raw[i*F:], F, j-i, s.vs)
		v.block(n, s.pod, s.vs, out[i:j])
		i = j
	}
}

func (s *Int8Scorer) podShare(row []float32) {
	n := s.n
	P := policy.NumPodFeatures
	copy(s.podRaw, row[:P])
	n.quantizeInput(row, s.q, 0, P)
	for c := range n.H1 {
		s.pod[c] = n.b1[c] + dot(s.q[:P], n.w1[c*n.F:c*n.F+P])
	}
}

// equalF32 compares bit patterns: equal bits give the same pod share
// (and -0 against +0 only costs a recomputation).
func equalF32(a, b []float32) bool {
	b = b[:len(a)]
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// forward runs layers 1 (node features), 2 and 3 on s.q with the packed
// (SWAR) dot products; forwardPlain is the same arithmetic one product at
// a time (the reference the packed path must equal exactly).
func (s *Int8Scorer) forward() float32 {
	n := s.n
	F, P := n.F, policy.NumPodFeatures
	var su int64
	for j := P; j < F; j++ {
		v := int64(s.q[j]) + inMax
		s.u[j-P] = uint64(v)
		su += v
	}
	n.sw1.dots(s.u, su, s.acc)
	for c := range n.H1 {
		s.a1[c] = requant(s.pod[c]+s.acc[c], n.m1[c], n.s1[c])
	}
	su = 0
	for k, v := range s.a1 {
		s.u[k] = uint64(v)
		su += int64(v)
	}
	n.sw2.dots(s.u, su, s.acc)
	for c := range n.H2 {
		s.a2[c] = requant(n.b2[c]+s.acc[c], n.m2[c], n.s2[c])
	}
	return float32(n.b3+dot(s.a2, n.w3)) * n.outScale
}

func (s *Int8Scorer) forwardPlain() float32 {
	n := s.n
	F, P := n.F, policy.NumPodFeatures
	xq := s.q[P:F]
	for c := range n.H1 {
		acc := s.pod[c] + dot(xq, n.w1[c*F+P:(c+1)*F])
		s.a1[c] = requant(acc, n.m1[c], n.s1[c])
	}
	H1 := n.H1
	for c := range n.H2 {
		acc := n.b2[c] + dot(s.a1, n.w2[c*H1:(c+1)*H1])
		s.a2[c] = requant(acc, n.m2[c], n.s2[c])
	}
	return float32(n.b3+dot(s.a2, n.w3)) * n.outScale
}

// ReadsInput reports whether the network reads input feature i (some
// first-layer weight of it is not zero; policy.InputReader).
func (n *Int8Net) ReadsInput(i int) bool {
	if i < 0 || i >= n.F {
		return false
	}
	for h := range n.H1 {
		if n.w1[h*n.F+i] != 0 {
			return true
		}
	}
	return false
}

// ReadsInput implements policy.InputReader.
func (s *Int8Scorer) ReadsInput(i int) bool { return s.n.ReadsInput(i) }

var _ policy.AffinityReader = (*Int8Scorer)(nil)

// AffinityEncoder implements policy.AffinityReader: the artifact's
// (Int8Net.AffinityEncoder).
func (s *Int8Scorer) AffinityEncoder() string { return s.n.AffinityEncoder }

var _ policy.InputReader = (*Int8Scorer)(nil)
