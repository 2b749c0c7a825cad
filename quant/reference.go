package quant

import (
	"fmt"
	"math"

	"github.com/edgesched/edgesched/policy"
)

// CheckQuantizable refuses, wrapping ErrQuant, a model the int8 path
// cannot run: an invalid one, or one whose hidden layers are not all ReLU
// (QuantScheme keeps the activations after each ReLU as unsigned 8-bit
// values; a Tanh layer's negative half has no place there). Such a model
// runs in the float path only.
func CheckQuantizable(m *policy.FloatModel) error {
	if err := checkFloat(m); err != nil {
		return err
	}
	if !m.AllReLU() {
		return fmt.Errorf("%w: the network's hidden layers are %v and %v: the int8 path runs ReLU networks only (its activations are unsigned 8-bit values after each ReLU); run this model in the float path (edgectl sim --policies learned:FILE.esm), or retrain it with ReLU",
			ErrQuant, m.Act[0], m.Act[1])
	}
	return nil
}

// checkFloat validates a float model's schema, decision rule and
// parameter shapes and values.
func checkFloat(m *policy.FloatModel) error {
	if m == nil {
		return fmt.Errorf("%w: no model", ErrQuant)
	}
	if err := m.Schema.Validate(); err != nil {
		return err
	}
	if err := m.Decision.Validate(); err != nil {
		return err
	}
	l := m.Layers
	if l.F != policy.NumFeatures || l.H1 <= 0 || l.H2 <= 0 || l.HC <= 0 {
		return fmt.Errorf("%w: layers %+v (input must be %d features)", policy.ErrShape, l, policy.NumFeatures)
	}
	shapes := policy.Shapes(l.F, l.H1, l.H2, l.HC)
	if len(m.Params) != len(shapes) {
		return fmt.Errorf("%w: %d parameter tensors, want %d", policy.ErrShape, len(m.Params), len(shapes))
	}
	for i, sh := range shapes {
		n := 1
		for _, d := range sh {
			n *= d
		}
		if len(m.Params[i]) != n {
			return fmt.Errorf("%w: parameter %d has %d values, want %v", policy.ErrShape, i, len(m.Params[i]), sh)
		}
		for j, v := range m.Params[i] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("%w: parameter %d value %d is %v", ErrQuant, i, j, v)
			}
		}
	}
	return nil
}

// reference is the float scorer written out in float64 loops from the
// parameter slices, independently of the gorgonia path (nn.Net): the
// cross-check of the float model and the source of calibration
// activations.
type reference struct {
	f, h1, h2          int
	mean, std          []float64
	schema             policy.Schema // for its input bounds (Schema.Bound)
	w1, b1, w2, b2, w3 []float64
	b3                 float64
	xn, a1, a2         []float64 // activations of the last row
	z1, z2             []float64 // pre-activations of the last row
}

func newReference(m *policy.FloatModel) (*reference, error) {
	if err := CheckQuantizable(m); err != nil {
		return nil, err
	}
	d := func(i int) []float64 {
		v := m.Params[i]
		out := make([]float64, len(v))
		for j := range v {
			out[j] = float64(v[j])
		}
		return out
	}
	r := &reference{f: m.Layers.F, h1: m.Layers.H1, h2: m.Layers.H2,
		w1: d(0), b1: d(1), w2: d(2), b2: d(3), w3: d(4), b3: d(5)[0]}
	r.schema = m.Schema
	for j := range r.f {
		r.mean = append(r.mean, float64(m.Schema.Mean[j]))
		r.std = append(r.std, float64(m.Schema.Std[j]))
	}
	r.xn, r.a1, r.a2 = make([]float64, r.f), make([]float64, r.h1), make([]float64, r.h2)
	r.z1, r.z2 = make([]float64, r.h1), make([]float64, r.h2)
	return r, nil
}

// score runs one raw feature row.
func (r *reference) score(raw []float32) float64 {
	for j := range r.f {
		r.xn[j] = (float64(r.schema.Bound(j, raw[j])) - r.mean[j]) / r.std[j]
	}
	for c := range r.h1 {
		z := r.b1[c]
		for j := range r.f {
			z += r.xn[j] * r.w1[j*r.h1+c]
		}
		r.z1[c], r.a1[c] = z, math.Max(z, 0)
	}
	for c := range r.h2 {
		z := r.b2[c]
		for k := range r.h1 {
			z += r.a1[k] * r.w2[k*r.h2+c]
		}
		r.z2[c], r.a2[c] = z, math.Max(z, 0)
	}
	s := r.b3
	for k := range r.h2 {
		s += r.a2[k] * r.w3[k]
	}
	return s
}

// ReferenceScores scores raw feature rows (k rows) with the float model in
// plain float64 loops, independently of the gorgonia path.
func ReferenceScores(m *policy.FloatModel, raw []float32, k int) ([]float64, error) {
	r, err := newReference(m)
	if err != nil {
		return nil, err
	}
	if k <= 0 || len(raw) != k*r.f {
		return nil, fmt.Errorf("%w: %d values for %d rows", policy.ErrShape, len(raw), k)
	}
	out := make([]float64, k)
	for i := range k {
		out[i] = r.score(raw[i*r.f : (i+1)*r.f])
	}
	return out, nil
}
