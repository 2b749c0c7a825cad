package int8net

import (
	"errors"
	"fmt"
	"math"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant"
)

// Net is the all-integer scorer (quant.QuantScheme): int8 inputs, int8
// weights, int32 accumulation and biases, unsigned 8-bit activations, and
// integer requantization between layers (acc * m >> s, with m sized at
// load time so the product never overflows int32: quant.Requantization).
// Only the input quantization (features are floats) and the final score
// scale are float.
//
// A Net is read-only after New; Scorer gives each run its own scratch,
// so one Net may serve many runs at once.
type Net struct {
	F, H1, H2 int
	// input quantization: q = round(clamp((x - mean) * inv, lo, hi)),
	// lo and hi the artifact's input bounds on that scale, within ±127
	// (quant.Requantization)
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
	inMax  = quant.MaxInput
	actMax = quant.MaxActivation
)

// New builds the integer scorer of an int8 artifact, with its
// requantization (quant.Artifact.Requantization, whose refusals it
// returns).
func New(a *quant.Artifact) (*Net, error) {
	r, err := a.Requantization()
	if err != nil {
		return nil, err
	}
	l := a.Header.Layers
	n := &Net{F: l.F, H1: l.H1, H2: l.H2, Decision: a.Header.Decision, AffinityEncoder: a.AffinityEncoder(),
		w1: a.Tensor("w1").I8, b1: a.Tensor("b1").I32, w2: a.Tensor("w2").I8, b2: a.Tensor("b2").I32,
		w3: a.Tensor("w3").I8, b3: a.Tensor("b3").I32[0],
		mean: r.Mean, inv: r.Inv, lo: r.Lo, hi: r.Hi, m1: r.M1, s1: r.S1, m2: r.M2, s2: r.S2}
	n.outScale = a.Tensor("w3_scale").F32[0]
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

// requant maps a layer's accumulator to its ReLU'd u8 activation.
// Branch-free (ReLU is a coin toss per channel, which a branch
// mispredicts): max, min and the rounding term 2^(s-1) (0 when s is 0).
// s is at most 30 (quant.Requantization): at 31 the rounding term would
// wrap.
func requant(acc, m int32, s uint8) uint8 {
	r := int32(1) << s >> 1
	// cannot overflow: m was sized for the layer's largest |acc|
	return uint8(min((max(acc, 0)*m+r)>>s, actMax))
}

// quantizeInput maps raw features [from, to) to int8 inputs.
func (n *Net) quantizeInput(raw []float32, q []int8, from, to int) {
	for j := from; j < to; j++ {
		q[j] = quant.QuantizeInput(raw[j], n.mean[j], n.inv[j], n.lo[j], n.hi[j])
	}
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
func (n *Net) Scorer() *Scorer { return n.newScorer(n.vec) }

// ScorerWith is Scorer with the named kernel (one of Kernels): every
// kernel computes the same scores; benchmarks compare them.
func (n *Net) ScorerWith(kernel string) (*Scorer, error) {
	if kernel == KernelPortable {
		return n.newScorer(nil), nil
	}
	v, err := newVecNetKernel(n, kernel)
	if err != nil {
		return nil, err
	}
	return n.newScorer(v), nil
}

func (n *Net) newScorer(v *vecNet) *Scorer {
	s := &Scorer{n: n, q: make([]int8, n.F), pod: make([]int32, n.H1), a1: make([]uint8, n.H1), a2: make([]uint8, n.H2),
		podRaw: make([]float32, policy.NumPodFeatures), u: make([]uint64, max(n.F, n.H1)), acc: make([]int32, max(n.H1, n.H2))}
	if v != nil {
		s.vec, s.vs = v, v.scratch()
	}
	return s
}

// Scorer scores with a Net. Not safe for concurrent use.
type Scorer struct {
	n      *Net
	q      []int8
	pod    []int32 // bias + pod features' share of layer 1
	podRaw []float32
	a1, a2 []uint8
	u      []uint64
	acc    []int32
	vec    *vecNet // nil: the portable kernel
	vs     *vecScratch
}

var _ policy.Scorer = (*Scorer)(nil)

// Scores implements policy.Scorer: the pod features' share of layer 1 is
// computed once per call (and again for any row whose pod features
// differ), then each row runs the rest of the MLP in integers.
func (s *Scorer) Scores(raw []float32, k int, out []float32) error {
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
func (s *Scorer) scoresVec(raw []float32, k int, out []float32) {
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

func (s *Scorer) podShare(row []float32) {
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
func (s *Scorer) forward() float32 {
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

func (s *Scorer) forwardPlain() float32 {
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
func (n *Net) ReadsInput(i int) bool {
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
func (s *Scorer) ReadsInput(i int) bool { return s.n.ReadsInput(i) }

var _ policy.AffinityReader = (*Scorer)(nil)

// AffinityEncoder implements policy.AffinityReader: the artifact's
// (Net.AffinityEncoder).
func (s *Scorer) AffinityEncoder() string { return s.n.AffinityEncoder }

var _ policy.InputReader = (*Scorer)(nil)
