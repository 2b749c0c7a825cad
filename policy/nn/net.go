package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/edgesched/edgesched/policy"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Net is the actor-critic network.
//
// Actor: one scorer MLP, F -> H1 -> H2 -> 1 with an activation after each
// hidden layer (Act: ReLU unless set; Tanh for networks made elsewhere,
// which only the float path runs), applied to each candidate node's
// feature row; the scores are the logits of a softmax over
// the candidates, so any number of nodes works. Critic: the candidates'
// last hidden layer pooled by mean and max (2*H2), then 2*H2 -> HC -> 1 with
// ReLU. The trunk is shared. Parameters are float32 Tensors (gorgonia.org/tensor; see Tensor); the
// backward pass is written out (Backward) and checked against finite
// differences in the tests.
//
// A Net is not safe for concurrent use: Forward keeps activations for
// Backward. Clone gives an independent copy.
type Net struct {
	F, H1, H2, HC int
	W1, B1        *Tensor // F x H1, H1
	W2, B2        *Tensor // H1 x H2, H2
	W3, B3        *Tensor // H2 x 1, 1
	WC1, BC1      *Tensor // 2*H2 x HC, HC
	WC2, BC2      *Tensor // HC x 1, 1

	// Act holds the scorer's hidden layers' activations; the zero value
	// is ReLU for both. The critic's hidden layer is always ReLU.
	Act [2]Activation

	// activations of the last Forward
	n          int
	x, z1, a1  *Tensor
	z2, a2     *Tensor
	pool, zc   []float32
	argmax     []int
	scores     []float32
	value      float32
	bufA, bufB []float32
}

// Activation is a hidden layer's nonlinearity. The zero value is ReLU.
type Activation uint8

const (
	// ReLU is max(0, z): what training makes and the int8 path runs.
	ReLU Activation = iota
	// Tanh is tanh(z): float path only (imported networks).
	Tanh
)

// String is the activation's name in model files and messages.
func (a Activation) String() string {
	switch a {
	case ReLU:
		return "relu"
	case Tanh:
		return "tanh"
	}
	return fmt.Sprintf("activation(%d)", uint8(a))
}

// ParseActivation reads an activation's name (String).
func ParseActivation(s string) (Activation, error) {
	switch s {
	case "relu":
		return ReLU, nil
	case "tanh":
		return Tanh, nil
	}
	return 0, fmt.Errorf("%w: activation %q (want relu or tanh)", policy.ErrShape, s)
}

// AllReLU reports whether every hidden layer is ReLU.
func (m *Net) AllReLU() bool { return m.Act == [2]Activation{} }

// apply writes the activation of z into dst.
func (a Activation) apply(dst, z []float32) []float32 {
	if a == Tanh {
		for i, v := range z {
			dst[i] = float32(math.Tanh(float64(v)))
		}
		return dst
	}
	return relu(dst, z)
}

// backward multiplies the gradient da by the activation's derivative at
// pre-activation z (output y).
func (a Activation) backward(da, z, y []float32) {
	if a == Tanh {
		for i, v := range y {
			da[i] *= 1 - v*v
		}
		return
	}
	for i := range da {
		if z[i] <= 0 {
			da[i] = 0
		}
	}
}

// Param is a named parameter tensor.
type Param struct {
	Name string
	T    *Tensor
}

// Values returns the parameter's values, row-major, sharing its storage:
// writes change the network.
func (p Param) Values() []float32 { return f32(p.T) }

// Dims returns the parameter's shape (do not modify it).
func (p Param) Dims() []int { return dims(p.T) }

// Params lists the parameters in a fixed order (serialisation and the
// optimiser rely on it).
func (m *Net) Params() []Param {
	return []Param{
		{"w1", m.W1}, {"b1", m.B1}, {"w2", m.W2}, {"b2", m.B2}, {"w3", m.W3}, {"b3", m.B3},
		{"wc1", m.WC1}, {"bc1", m.BC1}, {"wc2", m.WC2}, {"bc2", m.BC2},
	}
}

// NewNet returns a network with He-initialised weights drawn from rng and
// zero biases.
func NewNet(f, h1, h2, hc int, rng *rand.Rand) (*Net, error) {
	return NewNetExcluding(f, h1, h2, hc, rng, nil)
}

// NewNetExcluding is NewNet with the first-layer weights of the inputs
// marked in exclude (len f, or nil) set to zero: the network does not read
// them (ReadsInput) as long as training keeps them at zero (MaskInputs).
// Excluded weights draw nothing from rng, so a network that excludes its
// last inputs starts from the same weights as one without those inputs.
func NewNetExcluding(f, h1, h2, hc int, rng *rand.Rand, exclude []bool) (*Net, error) {
	if exclude != nil && len(exclude) != f {
		return nil, fmt.Errorf("%w: an exclusion mask of %d inputs for %d", policy.ErrShape, len(exclude), f)
	}
	if f <= 0 || h1 <= 0 || h2 <= 0 || hc <= 0 || h1 > 4096 || h2 > 4096 || hc > 4096 {
		return nil, fmt.Errorf("%w: layer sizes %d, %d, %d, %d", policy.ErrShape, f, h1, h2, hc)
	}
	m := &Net{F: f, H1: h1, H2: h2, HC: hc}
	shapes := policy.Shapes(f, h1, h2, hc)
	ts := make([]*Tensor, len(shapes))
	for i, s := range shapes {
		ts[i] = newTensor(s...)
		if len(s) == 2 && rng != nil {
			fanIn := s[0]
			if i == 0 {
				for _, x := range exclude {
					if x {
						fanIn-- // inputs it does not read are no fan-in
					}
				}
			}
			scale := math.Sqrt(2 / float64(max(fanIn, 1)))
			if i == 4 || i == 8 { // output layers start small
				scale = 0.1 / math.Sqrt(float64(s[0]))
			}
			for j, d := 0, f32(ts[i]); j < len(d); j++ {
				if i == 0 && exclude != nil && exclude[j/h1] {
					continue // W1 is f x h1: row j/h1 is the input
				}
				d[j] = float32(rng.NormFloat64() * scale)
			}
		}
	}
	m.W1, m.B1, m.W2, m.B2, m.W3, m.B3, m.WC1, m.BC1, m.WC2, m.BC2 = ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], ts[6], ts[7], ts[8], ts[9]
	return m, nil
}

// Clone returns a deep copy (without activations).
func (m *Net) Clone() *Net {
	c := &Net{F: m.F, H1: m.H1, H2: m.H2, HC: m.HC, Act: m.Act}
	ps := m.Params()
	cs := make([]*Tensor, len(ps))
	for i, p := range ps {
		cs[i] = cloneTensor(p.T)
	}
	c.W1, c.B1, c.W2, c.B2, c.W3, c.B3, c.WC1, c.BC1, c.WC2, c.BC2 = cs[0], cs[1], cs[2], cs[3], cs[4], cs[5], cs[6], cs[7], cs[8], cs[9]
	return c
}

// Flat returns every parameter, in Params order, as one vector (the
// layout of federated weight updates).
func (m *Net) Flat() []float32 {
	out := make([]float32, 0, m.NumParams())
	for _, p := range m.Params() {
		out = append(out, f32(p.T)...)
	}
	return out
}

// AddFlat adds scale * delta (in Flat's layout) to the parameters.
func (m *Net) AddFlat(delta []float32, scale float32) error {
	if len(delta) != m.NumParams() {
		return fmt.Errorf("%w: delta of %d values for %d parameters", policy.ErrShape, len(delta), m.NumParams())
	}
	i := 0
	for _, p := range m.Params() {
		d := f32(p.T)
		for j := range d {
			d[j] += scale * delta[i]
			i++
		}
	}
	return nil
}

// NumParams is the number of scalars in the network.
func (m *Net) NumParams() int {
	var n int
	for _, p := range m.Params() {
		n += len(f32(p.T))
	}
	return n
}

// Scores computes only the actor's scores of n candidates (inference):
// Forward without the critic. The returned slice is reused by the next
// call; Backward must not follow Scores.
func (m *Net) Scores(x []float32, n int) ([]float32, error) {
	if n <= 0 || len(x) != n*m.F {
		return nil, fmt.Errorf("%w: %d values for %d candidates of %d features", policy.ErrShape, len(x), n, m.F)
	}
	// Inference only: the same products as actor (gonum's Sgemm, which is
	// what the tensor library calls), into reused buffers instead of new
	// tensors (Forward keeps the tensors Backward needs).
	a1 := grow(&m.bufA, n*m.H1)
	sgemm(n, m.H1, m.F, x, f32(m.W1), a1)
	return m.scoresFrom(a1, n), nil
}

// scoresFrom finishes Scores from the first layer's products a1 (n x H1,
// x W1 without the bias; in m.bufA or the caller's buffer).
func (m *Net) scoresFrom(a1 []float32, n int) []float32 {
	m.scores = m.rest().scores(a1, n, &m.bufB, &m.scores)
	return m.scores
}

// rest is what the actor computes after the first layer's products: its
// weights as slices (a tensor's Data is an interface call per use, 4% of
// a learned sweep when FloatScorer looked them up per call) and its
// activations. A FloatScorer keeps one over its private network, which
// nothing changes.
type rest struct {
	h1, h2     int
	b1, w2, b2 []float32
	w3         []float32
	b3         float32
	act        [2]Activation
}

func (m *Net) rest() rest {
	return rest{h1: m.H1, h2: m.H2, b1: f32(m.B1), w2: f32(m.W2), b2: f32(m.B2), w3: f32(m.W3), b3: f32(m.B3)[0], act: m.Act}
}

// scores adds the first layer's bias to a1 (n x h1, in place), applies
// its activation, runs the second and the output layer and returns the n
// scores (in *out; *a2 is scratch). Each bias is added and then the
// activation applied to the sum, as addBias and apply one after the other.
func (r rest) scores(a1 []float32, n int, a2buf, out *[]float32) []float32 {
	biasAct(a1, r.b1, r.act[0])
	a2 := grow(a2buf, n*r.h2)
	sgemm(n, r.h2, r.h1, a1, r.w2, a2)
	biasAct(a2, r.b2, r.act[1])
	s := grow(out, n)
	sgemm(n, 1, r.h2, a2, r.w3, s)
	for i := range s {
		s[i] += r.b3
	}
	return s
}

// biasAct adds b to every row of z and applies a, in one pass for ReLU.
func biasAct(z, b []float32, a Activation) {
	if a != ReLU {
		addBias(z, b)
		a.apply(z, z)
		return
	}
	h := len(b)
	for i := 0; i+h <= len(z); i += h {
		row := z[i : i+h : i+h]
		for j := range row {
			// v where v > 0, else +0 (NaN included), as relu; without a
			// branch, which the signs of a layer's sums make unpredictable
			v := row[j] + b[j]
			row[j] = math.Float32frombits(math.Float32bits(v) & -positive(v))
		}
	}
}

// positive is 1 when v > 0, else 0 (a SETcc, not a branch).
func positive(v float32) uint32 {
	if v > 0 {
		return 1
	}
	return 0
}

// sgemm sets c (m x n) = a (m x k) b (k x n), row-major.
//
// It runs in chunks of serialRows rows: gonum goes parallel from four
// 64 x 64 blocks of the output on, and for a scorer's few hidden units
// spreading one decision's candidates over goroutines costs more in
// wake-ups than it saves (11% of a learned sweep's CPU went to futex
// calls). The inner dimension is below one block, so every element is
// summed in the same order either way: the results are identical.
//
// A single output column (the scorer's last layer) is a dot product per
// row, summed here in gonum's order (each nonzero a[i,l]*b[l] rounded,
// then added, l ascending, from 0): gonum's blocked code calls its axpy
// kernel once per term, for one element, which cost as much as the whole
// second layer. TestSgemmColumnMatchesGonum checks the bits.
func sgemm(m, n, k int, a, b, c []float32) {
	if n == 1 {
		b = b[:k]
		for i := range m {
			var s float32
			for l, v := range a[i*k : i*k+k] {
				if v != 0 {
					// the conversion rounds the product before the sum:
					// no fused multiply-add (gonum's amd64 kernel
					// multiplies, then adds)
					s += float32(v * b[l])
				}
			}
			c[i] = s
		}
		return
	}
	gemm(m, n, k, a, k, b, 0, c)
}

// gemm sets c (m x n) = a b + beta c, where a is m x k with rows lda
// apart and b is k x n, row-major, in gonum's Sgemm, in chunks of rows
// (sgemm says why). With beta 1 it adds to c what it holds, each element
// summed as from zero after it: the first layer's node features added
// to the pod features' share (FloatScorer).
func gemm(m, n, k int, a []float32, lda int, b []float32, beta float32, c []float32) {
	const serialRows = 3 * 64
	for r := 0; r < m; r += serialRows {
		rows := min(serialRows, m-r)
		gonum.Implementation{}.Sgemm(blas.NoTrans, blas.NoTrans, rows, n, k, 1, a[r*lda:], lda, b, n, beta, c[r*n:], n)
	}
}

// actor runs the scorer MLP, keeping its activations.
func (m *Net) actor(x []float32, n int) error {
	if n <= 0 || len(x) != n*m.F {
		return fmt.Errorf("%w: %d values for %d candidates of %d features", policy.ErrShape, len(x), n, m.F)
	}
	m.n = n
	m.x = dense(x, n, m.F)
	m.z1 = matmul(m.x, m.W1, false, false)
	addBias(f32(m.z1), f32(m.B1))
	m.a1 = dense(m.Act[0].apply(grow(&m.bufA, n*m.H1), f32(m.z1)), n, m.H1)
	m.z2 = matmul(m.a1, m.W2, false, false)
	addBias(f32(m.z2), f32(m.B2))
	m.a2 = dense(m.Act[1].apply(grow(&m.bufB, n*m.H2), f32(m.z2)), n, m.H2)
	s := matmul(m.a2, m.W3, false, false)
	m.scores = grow(&m.scores, n)
	b3 := f32(m.B3)[0]
	for i, v := range f32(s) {
		m.scores[i] = v + b3
	}
	return nil
}

// Forward computes the scores of n candidates whose normalised feature
// rows are x (n*F values, row-major) and the critic's value. It keeps the
// activations for Backward. The returned slice is reused by the next call.
func (m *Net) Forward(x []float32, n int) ([]float32, float32, error) {
	if err := m.actor(x, n); err != nil {
		return nil, 0, err
	}
	// critic: pool a2 by mean and max
	h2 := m.H2
	m.pool = grow(&m.pool, 2*h2)
	m.argmax = growInt(&m.argmax, h2)
	a2 := f32(m.a2)
	for j := range h2 {
		var sum float32
		best, bi := a2[j], 0
		for i := range n {
			v := a2[i*h2+j]
			sum += v
			if v > best {
				best, bi = v, i
			}
		}
		m.pool[j] = sum / float32(n)
		m.pool[h2+j] = best
		m.argmax[j] = bi
	}
	m.zc = grow(&m.zc, m.HC)
	wc1, bc1, wc2 := f32(m.WC1), f32(m.BC1), f32(m.WC2)
	var v float32
	for k := range m.HC {
		z := bc1[k]
		for j := range 2 * h2 {
			z += m.pool[j] * wc1[j*m.HC+k]
		}
		m.zc[k] = z
		if z > 0 {
			v += z * wc2[k]
		}
	}
	m.value = v + f32(m.BC2)[0]
	return m.scores, m.value, nil
}

// Backward adds to grads (a network of the same shape used as gradient
// storage) the gradient of a loss whose derivatives with respect to the
// last Forward's scores and value are dScores and dValue.
func (m *Net) Backward(dScores []float32, dValue float32, grads *Net) {
	n, h1, h2, hc := m.n, m.H1, m.H2, m.HC
	// critic
	gwc1, gbc1, gwc2 := f32(grads.WC1), f32(grads.BC1), f32(grads.WC2)
	f32(grads.BC2)[0] += dValue
	wc1, wc2 := f32(m.WC1), f32(m.WC2)
	dpool := make([]float32, 2*h2)
	for k := range hc {
		if m.zc[k] <= 0 {
			continue
		}
		gwc2[k] += m.zc[k] * dValue
		dz := wc2[k] * dValue
		gbc1[k] += dz
		for j := range 2 * h2 {
			gwc1[j*hc+k] += m.pool[j] * dz
			dpool[j] += wc1[j*hc+k] * dz
		}
	}
	// scorer output layer and pooling into dA2
	da2 := make([]float32, n*h2)
	w3 := f32(m.W3)
	gw3 := f32(grads.W3)
	a2 := f32(m.a2)
	var db3 float32
	for i := range n {
		ds := dScores[i]
		db3 += ds
		for j := range h2 {
			gw3[j] += a2[i*h2+j] * ds
			da2[i*h2+j] += w3[j]*ds + dpool[j]/float32(n)
		}
	}
	f32(grads.B3)[0] += db3
	for j := range h2 {
		da2[m.argmax[j]*h2+j] += dpool[h2+j]
	}
	// the activation, then layer 2
	m.Act[1].backward(da2, f32(m.z2), f32(m.a2))
	dz2 := dense(da2, n, h2)
	accumulate(f32(grads.W2), f32(matmul(m.a1, dz2, true, false)))
	colSums(f32(grads.B2), da2, h2)
	da1 := f32(matmul(dz2, m.W2, false, true))
	m.Act[0].backward(da1, f32(m.z1), f32(m.a1))
	dz1 := dense(da1, n, h1)
	accumulate(f32(grads.W1), f32(matmul(m.x, dz1, true, false)))
	colSums(f32(grads.B1), da1, h1)
}

// Zero sets every parameter to 0 (for gradient storage).
func (m *Net) Zero() {
	for _, p := range m.Params() {
		d := f32(p.T)
		for i := range d {
			d[i] = 0
		}
	}
}

// addBias adds b to every row of z (len(z) a multiple of len(b)); row by
// row, without a division per element.
func addBias(z, b []float32) {
	h := len(b)
	for i := 0; i+h <= len(z); i += h {
		row := z[i : i+h : i+h]
		for j := range row {
			row[j] += b[j]
		}
	}
}

func relu(dst, z []float32) []float32 {
	for i, v := range z {
		if v > 0 {
			dst[i] = v
		} else {
			dst[i] = 0
		}
	}
	return dst
}

func accumulate(dst, src []float32) {
	for i, v := range src {
		dst[i] += v
	}
}

func colSums(dst, m []float32, cols int) {
	for i, v := range m {
		dst[i%cols] += v
	}
}

func grow(buf *[]float32, n int) []float32 {
	if cap(*buf) < n {
		*buf = make([]float32, n)
	}
	*buf = (*buf)[:n]
	return *buf
}

func growInt(buf *[]int, n int) []int {
	if cap(*buf) < n {
		*buf = make([]int, n)
	}
	*buf = (*buf)[:n]
	return *buf
}

// ReadsInput reports whether the scorer reads input feature i: false when
// its first-layer weights of i are all zero (a feature left out by the
// training configuration, ppo.NetConfig.Exclude), so its value cannot
// change a score.
func (m *Net) ReadsInput(i int) bool {
	if i < 0 || i >= m.F {
		return false
	}
	for _, w := range f32(m.W1)[i*m.H1 : (i+1)*m.H1] {
		if w != 0 {
			return true
		}
	}
	return false
}

// MaskInputs sets the first-layer weights (or their gradients) of the
// inputs marked in exclude to zero.
func (m *Net) MaskInputs(exclude []bool) {
	w := f32(m.W1)
	for i, x := range exclude {
		if x && i < m.F {
			clear(w[i*m.H1 : (i+1)*m.H1])
		}
	}
}
