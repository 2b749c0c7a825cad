package nn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/edgesched/edgesched/policy"
)

// Limits of a GraphSAGE encoder.
const (
	// MaxSageLayers is the deepest encoder (hops of neighbourhood).
	MaxSageLayers = 2
	// MaxSageWidth bounds every layer's width.
	MaxSageWidth = 256
)

// ErrAggregator reports a mean aggregator that does not describe the
// graph it is used on.
var ErrAggregator = errors.New("nn: invalid mean aggregator")

// Mean is one layer's mean aggregator over a graph of n nodes, in
// compressed rows: node v's (sampled) neighbours are Idx[Off[v]:Off[v+1]]
// with weights W at the same positions, which sum to 1 (a node without
// neighbours has none, and its mean is 0). The weights make a weighted
// mean: the share of a neighbour among the samples, or its share of the
// node's call rate when every neighbour is kept.
type Mean struct {
	Off []int32 // n+1 offsets, Off[0] = 0, non-decreasing
	Idx []int32 // neighbours, each in [0, n)
	W   []float32
}

// Validate checks m describes a graph of n nodes.
func (m *Mean) Validate(n int) error {
	switch {
	case len(m.Off) != n+1 || m.Off[0] != 0:
		return fmt.Errorf("%w: %d offsets for %d nodes", ErrAggregator, len(m.Off), n)
	case int(m.Off[n]) != len(m.Idx) || len(m.Idx) != len(m.W):
		return fmt.Errorf("%w: last offset %d, %d neighbours, %d weights", ErrAggregator, m.Off[n], len(m.Idx), len(m.W))
	}
	for v := range n {
		if m.Off[v+1] < m.Off[v] {
			return fmt.Errorf("%w: offsets decrease at node %d", ErrAggregator, v)
		}
	}
	for i, u := range m.Idx {
		if u < 0 || int(u) >= n {
			return fmt.Errorf("%w: neighbour %d of a graph of %d nodes", ErrAggregator, u, n)
		}
		if w := m.W[i]; !(w >= 0 && w <= 1) {
			return fmt.Errorf("%w: weight %v outside [0, 1]", ErrAggregator, w)
		}
	}
	return nil
}

// apply writes into dst (n x d) the weighted mean of each node's
// neighbours' rows of h (n x d).
func (m *Mean) apply(dst, h []float32, n, d int) {
	clear(dst[:n*d])
	for v := range n {
		out := dst[v*d : (v+1)*d : (v+1)*d]
		for i := m.Off[v]; i < m.Off[v+1]; i++ {
			w, row := m.W[i], h[int(m.Idx[i])*d:int(m.Idx[i]+1)*d]
			for j := range out {
				out[j] += w * row[j]
			}
		}
	}
}

// applyT adds into dst (n x d) the transpose of apply on g: every
// neighbour u of v receives its weight times g's row v.
func (m *Mean) applyT(dst, g []float32, n, d int) {
	for v := range n {
		row := g[v*d : (v+1)*d : (v+1)*d]
		for i := m.Off[v]; i < m.Off[v+1]; i++ {
			w, out := m.W[i], dst[int(m.Idx[i])*d:int(m.Idx[i]+1)*d]
			for j := range row {
				out[j] += w * row[j]
			}
		}
	}
}

// Sage is a GraphSAGE encoder with the mean aggregator (Hamilton, Ying
// and Leskovec, "Inductive Representation Learning on Large Graphs",
// 2017). Layer k maps every node's row h to
//
//	z = [h, mean of the neighbours' h] W_k + b_k
//
// with ReLU after every layer but the last, whose rows are scaled to unit
// length: the embeddings. It reads only node inputs and the aggregators'
// neighbourhoods, never a node's identity, so it embeds nodes and graphs
// it never saw (inductive). Parameters are float32 Tensors like Net's;
// the backward pass is written out (Backward) and checked against finite
// differences in the tests.
//
// A Sage is not safe for concurrent use: Forward keeps activations for
// Backward. Clone gives an independent copy.
type Sage struct {
	// F inputs per node, H hidden units (two layers), D embedding width.
	F, H, D int
	// Layers is 1 (F -> D) or 2 (F -> H -> D).
	Layers int
	W1, B1 *Tensor // 2F x out1, out1 (out1 = H with two layers, D with one)
	W2, B2 *Tensor // 2H x D, D; nil with one layer

	// activations of the last Forward
	n     int
	agg   []Mean
	c     [MaxSageLayers][]float32 // each layer's [h, mean h]
	z     [MaxSageLayers][]float32 // pre-activations
	a     []float32                // layer 1's ReLU (two layers)
	emb   []float32
	norms []float32
}

// NewSage returns an encoder with He-initialised weights drawn from rng
// and zero biases.
func NewSage(f, h, d, layers int, rng *rand.Rand) (*Sage, error) {
	if f <= 0 || d <= 0 || f > MaxSageWidth || d > MaxSageWidth || layers < 1 || layers > MaxSageLayers ||
		(layers == 2 && (h <= 0 || h > MaxSageWidth)) {
		return nil, fmt.Errorf("%w: GraphSAGE of %d inputs, %d hidden, %d outputs, %d layers (layers 1..%d, widths 1..%d)",
			policy.ErrShape, f, h, d, layers, MaxSageLayers, MaxSageWidth)
	}
	s := &Sage{F: f, H: h, D: d, Layers: layers}
	if layers == 1 {
		s.H = 0
	}
	for _, p := range s.shapes() {
		t := newTensor(p.dims...)
		if len(p.dims) == 2 && rng != nil {
			scale := math.Sqrt(2 / float64(p.dims[0]))
			for j, v := 0, f32(t); j < len(v); j++ {
				v[j] = float32(rng.NormFloat64() * scale)
			}
		}
		s.set(p.name, t)
	}
	return s, nil
}

// sageParam is a parameter's name and shape.
type sageParam struct {
	name string
	dims []int
}

// shapes lists the parameters' names and shapes, in Params order.
func (s *Sage) shapes() []sageParam {
	out1 := s.D
	if s.Layers == 2 {
		out1 = s.H
	}
	ps := []sageParam{{"sage_w1", []int{2 * s.F, out1}}, {"sage_b1", []int{out1}}}
	if s.Layers == 2 {
		ps = append(ps, sageParam{"sage_w2", []int{2 * s.H, s.D}}, sageParam{"sage_b2", []int{s.D}})
	}
	return ps
}

func (s *Sage) set(name string, t *Tensor) {
	switch name {
	case "sage_w1":
		s.W1 = t
	case "sage_b1":
		s.B1 = t
	case "sage_w2":
		s.W2 = t
	case "sage_b2":
		s.B2 = t
	}
}

// Params lists the parameters in a fixed order: W1, B1, then W2, B2 with
// two layers.
func (s *Sage) Params() []Param {
	ps := []Param{{"sage_w1", s.W1}, {"sage_b1", s.B1}}
	if s.Layers == 2 {
		ps = append(ps, Param{"sage_w2", s.W2}, Param{"sage_b2", s.B2})
	}
	return ps
}

// Clone returns a deep copy (without activations).
func (s *Sage) Clone() *Sage {
	c := &Sage{F: s.F, H: s.H, D: s.D, Layers: s.Layers}
	for _, p := range s.Params() {
		c.set(p.Name, cloneTensor(p.T))
	}
	return c
}

// Zero sets every parameter to 0 (for gradient storage).
func (s *Sage) Zero() {
	for _, p := range s.Params() {
		clear(f32(p.T))
	}
}

// NumParams is the number of scalars in the encoder.
func (s *Sage) NumParams() int {
	var n int
	for _, p := range s.Params() {
		n += len(f32(p.T))
	}
	return n
}

// Forward embeds the n nodes whose input rows are x (n*F values,
// row-major), aggregating layer k over agg[k] (len Layers, each
// validated against n). It returns n*D values, every row of unit length
// (or zero when its last layer's row is zero or not finite), and keeps
// the activations
// for Backward. The returned slice is reused by the next call.
func (s *Sage) Forward(x []float32, n int, agg []Mean) ([]float32, error) {
	if n <= 0 || len(x) != n*s.F {
		return nil, fmt.Errorf("%w: %d values for %d nodes of %d inputs", policy.ErrShape, len(x), n, s.F)
	}
	if len(agg) != s.Layers {
		return nil, fmt.Errorf("%w: %d aggregators for %d layers", ErrAggregator, len(agg), s.Layers)
	}
	for k := range agg {
		if err := agg[k].Validate(n); err != nil {
			return nil, fmt.Errorf("layer %d: %w", k+1, err)
		}
	}
	s.n, s.agg = n, agg
	h, d := x, s.F
	for k := range s.Layers {
		w, b := s.W1, s.B1
		if k == 1 {
			w, b = s.W2, s.B2
		}
		out := dims(w)[1]
		c := grow(&s.c[k], n*2*d)
		mean := make([]float32, n*d)
		agg[k].apply(mean, h, n, d)
		for v := range n {
			copy(c[v*2*d:], h[v*d:(v+1)*d])
			copy(c[v*2*d+d:], mean[v*d:(v+1)*d])
		}
		z := grow(&s.z[k], n*out)
		sgemm(n, out, 2*d, c, f32(w), z)
		addBias(z, f32(b))
		if k < s.Layers-1 {
			h = relu(grow(&s.a, n*out), z)
		} else {
			h = z
		}
		d = out
	}
	s.emb = grow(&s.emb, n*s.D)
	s.norms = grow(&s.norms, n)
	for v := range n {
		row := h[v*s.D : (v+1)*s.D]
		var sq float64
		for _, e := range row {
			sq += float64(e) * float64(e)
		}
		nrm := float32(math.Sqrt(sq))
		if math.IsInf(float64(nrm), 0) || math.IsNaN(float64(nrm)) {
			nrm = 0 // a row that overflowed: zero, like an all-zero one
		}
		s.norms[v] = nrm
		for j, e := range row {
			if nrm > 0 {
				s.emb[v*s.D+j] = e / nrm
			} else {
				s.emb[v*s.D+j] = 0
			}
		}
	}
	return s.emb, nil
}

// Backward adds to grads (an encoder of the same shape used as gradient
// storage) the gradient of a loss whose derivative with respect to the
// last Forward's embeddings is dEmb (n*D values).
func (s *Sage) Backward(dEmb []float32, grads *Sage) {
	n, D := s.n, s.D
	// through the normalisation: d(h/|h|) = (I - e e^T) / |h|
	dz := make([]float32, n*D)
	for v := range n {
		if s.norms[v] == 0 {
			continue
		}
		e, g := s.emb[v*D:(v+1)*D], dEmb[v*D:(v+1)*D]
		var dot float32
		for j := range e {
			dot += e[j] * g[j]
		}
		for j := range e {
			dz[v*D+j] = (g[j] - e[j]*dot) / s.norms[v]
		}
	}
	for k := s.Layers - 1; k >= 0; k-- {
		w, gw, gb := s.W1, grads.W1, grads.B1
		if k == 1 {
			w, gw, gb = s.W2, grads.W2, grads.B2
		}
		in, out := dims(w)[0], dims(w)[1]
		d := in / 2
		accumulate(f32(gw), f32(matmul(dense(s.c[k], n, in), dense(dz, n, out), true, false)))
		colSums(f32(gb), dz, out)
		if k == 0 {
			return
		}
		dc := f32(matmul(dense(dz, n, out), w, false, true)) // n x 2d
		dh := make([]float32, n*d)
		for v := range n {
			copy(dh[v*d:(v+1)*d], dc[v*2*d:v*2*d+d])
		}
		dmean := make([]float32, n*d)
		for v := range n {
			copy(dmean[v*d:(v+1)*d], dc[v*2*d+d:(v+1)*2*d])
		}
		s.agg[k].applyT(dh, dmean, n, d)
		// through layer k-1's ReLU
		zPrev := s.z[k-1]
		for i := range dh {
			if zPrev[i] <= 0 {
				dh[i] = 0
			}
		}
		dz = dh
	}
}
