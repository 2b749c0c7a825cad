package nn

import (
	"fmt"
	"slices"

	"gonum.org/v1/gonum/blas/gonum"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/sim"
)

// FloatScorer is the float32 network as a Scorer: it holds the inputs
// within the model's bounds (policy.Schema.Clamp, when it has them),
// normalises with the model's schema and runs the actor (Net.Scores).
//
// The first layer is summed as gonum's Sgemm sums it (for each output,
// the nonzero inputs' products in input order, from zero), with two
// shortcuts that leave every bit of the result as it was: the pod
// features (the first policy.NumPodFeatures, equal on every row of a
// call, policy.Scorer) are summed once per call and each row starts from
// that partial sum; and the inputs whose first-layer weights are all zero
// (the features a model leaves out, network.exclude) among the pod
// features and before the first or after the last other input read are
// neither normalised nor multiplied, which only drops additions of zero
// as long as they are finite: a call where one of them normalises to an
// infinity or NaN (whose product with a zero weight is NaN) is scored on
// the plain path, as Net.Scores. A row whose pod features differ from the
// first row's gets its own share. TestFloatScorerMatchesNet checks the
// bits.
type FloatScorer struct {
	m *Model
	// pod: the pod features the network reads; [lo, hi): the other
	// features, from the first to the last the network reads; skip: the
	// inputs outside both
	pod    []int
	lo, hi int
	skip   []int
	part   []float32 // the pod features' share of the first layer
	x, a1  []float32
	out    []float32
	// w1 and the layers after the first: the private network's weights
	w1   []float32
	rest rest
	a2   []float32
	// vector: the AVX2 kernel runs the rest (scoresAVX2)
	vector bool
	// affinity is the model's AffinityEncoder
	affinity string
}

var _ policy.AffinityReader = (*FloatScorer)(nil)

// AffinityEncoder implements policy.AffinityReader.
func (f *FloatScorer) AffinityEncoder() string { return f.affinity }

// NewFloatScorer returns a scorer over a private copy of m's network.
func NewFloatScorer(m *Model) (*FloatScorer, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	f := &FloatScorer{m: &Model{Schema: m.Schema, Net: m.Net.Clone(), Meta: m.Meta, Decision: m.Decision}, affinity: m.AffinityEncoder()}
	f.lo, f.hi = m.Net.F, m.Net.F
	for i := range f.m.Net.F {
		switch {
		case !f.m.Net.ReadsInput(i):
		case i < policy.NumPodFeatures:
			f.pod = append(f.pod, i)
		default:
			f.lo, f.hi = min(f.lo, i), i+1
		}
	}
	for i := range f.m.Net.F {
		if !slices.Contains(f.pod, i) && (i < f.lo || i >= f.hi) {
			f.skip = append(f.skip, i)
		}
	}
	n := f.m.Net
	f.w1, f.rest = f32(n.W1), n.rest()
	f.vector = vectorKernel && n.H1 == 32 && n.H2 == 32 && n.Act == [2]Activation{ReLU, ReLU}
	return f, nil
}

// ReadsInput implements policy.InputReader.
func (f *FloatScorer) ReadsInput(i int) bool { return f.m.Net.ReadsInput(i) }

// Scores implements policy.Scorer.
func (f *FloatScorer) Scores(raw []float32, k int, out []float32) error {
	net, nf, np := f.m.Net, policy.NumFeatures, policy.NumPodFeatures
	if k <= 0 || len(raw) != k*nf || net.F != nf || len(out) < k {
		return fmt.Errorf("%w: %d values for %d candidates of %d features, %d outputs", policy.ErrShape, len(raw), k, nf, len(out))
	}
	h, w1 := net.H1, f.w1
	mean, std := f.m.Schema.Mean, f.m.Schema.Std
	s := &f.m.Schema
	x := grow(&f.x, len(raw))
	for i := range k {
		r := raw[i*nf : (i+1)*nf]
		for _, l := range f.skip {
			if v := (s.Bound(l, r[l]) - mean[l]) / std[l]; v-v != 0 { // ±Inf or NaN
				return f.plain(raw, x, k, out)
			}
		}
	}
	a1 := grow(&f.a1, k*h)
	part := grow(&f.part, h)
	for i := range k {
		r, xr, c := raw[i*nf:(i+1)*nf], x[i*nf:(i+1)*nf], a1[i*h:(i+1)*h]
		for l := f.lo; l < f.hi; l++ {
			xr[l] = (s.Bound(l, r[l]) - mean[l]) / std[l] // Schema.Normalize's arithmetic
		}
		if i > 0 && slices.Equal(r[:np], raw[:np]) {
			copy(c, part)
			continue
		}
		// the pod features' share: once for the call's pod, and for a row
		// of another pod
		clear(c)
		for _, l := range f.pod {
			if v := (s.Bound(l, r[l]) - mean[l]) / std[l]; v != 0 {
				gonum.Implementation{}.Saxpy(h, v, w1[l*h:(l+1)*h], 1, c, 1)
			}
		}
		if i == 0 {
			copy(part, c)
		}
	}
	if f.vector {
		r := &f.rest
		scoresAVX2(k, nf, f.lo, f.hi, x, a1, w1, r.b1, r.w2, r.b2, r.w3, r.b3, out)
		return nil
	}
	if f.lo < f.hi {
		gemm(k, h, f.hi-f.lo, x[f.lo:], nf, w1[f.lo*h:f.hi*h], 1, a1)
	}
	copy(out, f.rest.scores(a1, k, &f.a2, &f.out))
	return nil
}

// plain scores as Net.Scores on rows held within the bounds and
// normalised whole (x: scratch).
func (f *FloatScorer) plain(raw, x []float32, k int, out []float32) error {
	copy(x, raw)
	for i := range k {
		f.m.Schema.Clamp(x[i*policy.NumFeatures : (i+1)*policy.NumFeatures])
		f.m.Schema.Normalize(x[i*policy.NumFeatures : (i+1)*policy.NumFeatures])
	}
	s, err := f.m.Net.Scores(x, k)
	if err != nil {
		return err
	}
	copy(out, s)
	return nil
}

// Kernel names the kernel the scorer runs: "avx2" (GOEXPERIMENT=simd
// builds on amd64 with AVX2, for 32 -> 32 ReLU networks) or "gonum".
func (f *FloatScorer) Kernel() string {
	if f.vector {
		return "avx2"
	}
	return "gonum"
}

// Factory returns a simulator factory for a model under a display name.
func Factory(name string, m *Model) sim.Factory {
	return sim.Factory{Name: name, New: func(env *sim.Env) (sim.Policy, error) { return NewLearned(name, m, env) }}
}

// NewLearned returns a learned policy for one run on env. The model is
// only read; each run gets its own network copy, so runs may share a Model.
func NewLearned(name string, m *Model, env *sim.Env) (*policy.Learned, error) {
	sc, err := NewFloatScorer(m)
	if err != nil {
		return nil, err
	}
	if err := policy.CheckPartners(env, sc, m.AffinityEncoder()); err != nil {
		return nil, err
	}
	return policy.NewLearnedScorer(name, sc, m.Decision, env), nil
}
