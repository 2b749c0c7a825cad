package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// refForward is an independent float64 implementation of the network,
// written with plain loops from the parameter slices, with tanh hidden
// layers where tanh says so, returning the loss sum_i c_i s_i + cv v and a
// signature of the ReLU and max-pool branches taken (so finite
// differences can skip kinks).
func refForward(p [][]float64, tanh [2]bool, f, h1, h2, hc int, x []float64, n int, c []float64, cv float64) (float64, []float64, float64, string) {
	w1, b1, w2, b2, w3, b3, wc1, bc1, wc2, bc2 := p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]
	sig := []byte{}
	a2 := make([]float64, n*h2)
	scores := make([]float64, n)
	for i := range n {
		a1 := make([]float64, h1)
		for k := range h1 {
			z := b1[k]
			for j := range f {
				z += x[i*f+j] * w1[j*h1+k]
			}
			if tanh[0] {
				a1[k] = math.Tanh(z)
			} else if z > 0 {
				a1[k] = z
				sig = append(sig, '+')
			} else {
				sig = append(sig, '-')
			}
		}
		for k := range h2 {
			z := b2[k]
			for j := range h1 {
				z += a1[j] * w2[j*h2+k]
			}
			if tanh[1] {
				a2[i*h2+k] = math.Tanh(z)
			} else if z > 0 {
				a2[i*h2+k] = z
				sig = append(sig, '+')
			} else {
				sig = append(sig, '-')
			}
		}
		s := b3[0]
		for k := range h2 {
			s += a2[i*h2+k] * w3[k]
		}
		scores[i] = s
	}
	pool := make([]float64, 2*h2)
	for j := range h2 {
		best, bi := a2[j], 0
		for i := range n {
			pool[j] += a2[i*h2+j] / float64(n)
			if a2[i*h2+j] > best {
				best, bi = a2[i*h2+j], i
			}
		}
		pool[h2+j] = best
		sig = append(sig, byte('a'+bi))
	}
	v := bc2[0]
	for k := range hc {
		z := bc1[k]
		for j := range 2 * h2 {
			z += pool[j] * wc1[j*hc+k]
		}
		if z > 0 {
			v += z * wc2[k]
			sig = append(sig, '+')
		} else {
			sig = append(sig, '-')
		}
	}
	loss := cv * v
	for i := range n {
		loss += c[i] * scores[i]
	}
	return loss, scores, v, string(sig)
}

// TestNetForwardAndGradients checks Forward against refForward and
// Backward against its finite differences, for ReLU, Tanh and mixed
// hidden layers.
func TestNetForwardAndGradients(t *testing.T) {
	for _, act := range [][2]Activation{{ReLU, ReLU}, {Tanh, Tanh}, {Tanh, ReLU}, {ReLU, Tanh}} {
		t.Run(act[0].String()+","+act[1].String(), func(t *testing.T) { testNetGradients(t, act) })
	}
}

func testNetGradients(t *testing.T, act [2]Activation) {
	const f, h1, h2, hc, n = policy.NumFeatures, 8, 6, 5, 7
	rng := rand.New(rand.NewPCG(1, 2))
	net, err := NewNet(f, h1, h2, hc, rng)
	if err != nil {
		t.Fatal(err)
	}
	net.Act = act
	tanh := [2]bool{act[0] == Tanh, act[1] == Tanh}
	// random, non-zero biases so every path is exercised
	for _, p := range net.Params() {
		for i, d := 0, f32(p.T); i < len(d); i++ {
			d[i] = float32(rng.NormFloat64() * 0.5)
		}
	}
	x := make([]float32, n*f)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	c := make([]float32, n)
	for i := range c {
		c[i] = float32(rng.NormFloat64())
	}
	const cv = 0.7

	scores, value, err := net.Forward(x, n)
	if err != nil {
		t.Fatal(err)
	}
	// Scores (inference, reused buffers) computes Forward's actor scores
	// with the same activations.
	inf, err := net.Clone().Scores(x, n)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if d := math.Abs(float64(inf[i]) - float64(scores[i])); d > 1e-5*math.Max(1, math.Abs(float64(scores[i]))) {
			t.Fatalf("Scores[%d] = %v, Forward %v", i, inf[i], scores[i])
		}
	}
	params := make([][]float64, 0)
	for _, p := range net.Params() {
		d := f32(p.T)
		q := make([]float64, len(d))
		for i, v := range d {
			q[i] = float64(v)
		}
		params = append(params, q)
	}
	x64 := make([]float64, len(x))
	for i, v := range x {
		x64[i] = float64(v)
	}
	c64 := make([]float64, n)
	for i, v := range c {
		c64[i] = float64(v)
	}
	_, refScores, refV, _ := refForward(params, tanh, f, h1, h2, hc, x64, n, c64, cv)
	for i := range n {
		if math.Abs(float64(scores[i])-refScores[i]) > 1e-4*math.Max(1, math.Abs(refScores[i])) {
			t.Fatalf("score %d = %v, reference %v", i, scores[i], refScores[i])
		}
	}
	if math.Abs(float64(value)-refV) > 1e-4*math.Max(1, math.Abs(refV)) {
		t.Fatalf("value = %v, reference %v", value, refV)
	}

	grads := net.Clone()
	grads.Zero()
	net.Backward(c, cv, grads)
	const h = 1e-5
	checked, skipped := 0, 0
	for pi, p := range grads.Params() {
		g := f32(p.T)
		for i := range params[pi] {
			orig := params[pi][i]
			params[pi][i] = orig + h
			lp, _, _, sp := refForward(params, tanh, f, h1, h2, hc, x64, n, c64, cv)
			params[pi][i] = orig - h
			lm, _, _, sm := refForward(params, tanh, f, h1, h2, hc, x64, n, c64, cv)
			params[pi][i] = orig
			if sp != sm { // a ReLU or the max flipped: not differentiable here
				skipped++
				continue
			}
			num := (lp - lm) / (2 * h)
			if math.Abs(float64(g[i])-num) > 1e-3+1e-3*math.Abs(num) {
				t.Errorf("d loss / d %s[%d] = %v, finite difference %v", p.Name, i, g[i], num)
			}
			checked++
		}
	}
	if checked < net.NumParams()*9/10 {
		t.Fatalf("checked %d of %d parameters (%d skipped at kinks)", checked, net.NumParams(), skipped)
	}
	t.Logf("checked %d gradients against finite differences, %d skipped at kinks", checked, skipped)
}

func TestNetShapes(t *testing.T) {
	net, err := NewNet(policy.NumFeatures, 4, 4, 4, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := net.Forward(make([]float32, 10), 2); err == nil {
		t.Error("Forward accepted 10 values for 2 candidates of 26 features")
	}
	if _, _, err := net.Forward(nil, 0); err == nil {
		t.Error("Forward accepted 0 candidates")
	}
	if _, err := NewNet(0, 1, 1, 1, nil); err == nil {
		t.Error("NewNet accepted 0 inputs")
	}
	// F*4 + 4 (layer 1) + 4*4 + 4 (layer 2) + 4 + 1 (score) + 8*4 + 4
	// (critic, mean and max pooled) + 4 + 1 (value) = 4F + 70
	if got, want := net.NumParams(), 4*policy.NumFeatures+70; got != want {
		t.Errorf("NumParams = %d, want %d", got, want)
	}
}

// TestSgemmColumnMatchesGonum: the one-column product (the scorer's last
// layer) gives gonum's Sgemm bits exactly, on random rows with zeros,
// negative zeros, tiny and large values, for the row counts and inner
// sizes the scorers use (a changed bit would change every trained model).
func TestSgemmColumnMatchesGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 12))
	val := func() float32 {
		switch rng.IntN(8) {
		case 0:
			return 0
		case 1:
			return float32(math.Copysign(0, -1))
		case 2:
			return float32(rng.NormFloat64() * 1e-30)
		case 3:
			return float32(rng.NormFloat64() * 1e20)
		default:
			return float32(rng.NormFloat64())
		}
	}
	for _, k := range []int{1, 7, 32, 64, 65, 200} {
		for _, m := range []int{1, 5, 191, 192, 193, 1000} {
			a, b := make([]float32, m*k), make([]float32, k)
			for i := range a {
				a[i] = val()
			}
			for i := range b {
				b[i] = val()
			}
			got := make([]float32, m)
			sgemm(m, 1, k, a, b, got)
			want := make([]float32, m)
			gonum.Implementation{}.Sgemm(blas.NoTrans, blas.NoTrans, m, 1, k, 1, a, k, b, 1, 0, want, 1)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("k=%d m=%d row %d: %v (%#x), gonum %v (%#x)", k, m, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		}
	}
}

// TestBiasActMatchesRelu: the branchless bias-and-ReLU pass gives every
// bit addBias then relu give, on the values where a mask could differ
// from a comparison: signed zeros, NaN, infinities, subnormals, and sums
// that round to zero.
func TestBiasActMatchesRelu(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negz := float32(math.Copysign(0, -1))
	sub := math.Float32frombits(1) // the least subnormal
	vals := []float32{0, negz, 1, -1, nan, inf, -inf, sub, -sub, 1e-38, -1e-38, 3.5, -3.5}
	// every value beside every bias, one row per bias
	h := len(vals)
	for _, act := range []Activation{ReLU, Tanh} {
		for _, bias := range vals {
			b := make([]float32, h)
			for j := range b {
				b[j] = bias
			}
			z := append([]float32(nil), vals...)
			want := append([]float32(nil), vals...)
			addBias(want, b)
			act.apply(want, want)
			biasAct(z, b, act)
			for j := range z {
				if math.Float32bits(z[j]) != math.Float32bits(want[j]) {
					t.Errorf("%v: %v + %v: got %v (%#x), want %v (%#x)", act, vals[j], bias, z[j], math.Float32bits(z[j]), want[j], math.Float32bits(want[j]))
				}
			}
		}
	}
}
