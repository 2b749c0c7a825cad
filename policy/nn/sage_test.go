package nn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// refSage is an independent float64 GraphSAGE: per node, per layer, with
// the neighbour lists as (index, weight) pairs and plain loops. It returns
// the loss sum of c times the embeddings (nbr: per layer, per node, the
// (neighbour, weight) pairs), the embeddings, and the signs of
// the hidden ReLUs (finite differences skip parameters that flip one).
func refSage(p [][]float64, f, h, d, layers int, x []float64, n int, nbr [][][][2]float64, c []float64) (float64, []float64, string) {
	sig := []byte{}
	cur, width := x, f
	for k := range layers {
		w, b := p[2*k], p[2*k+1]
		out := d
		if k < layers-1 {
			out = h
		}
		next := make([]float64, n*out)
		for v := range n {
			in := make([]float64, 2*width)
			copy(in, cur[v*width:(v+1)*width])
			for _, e := range nbr[k][v] {
				for j := range width {
					in[width+j] += e[1] * cur[int(e[0])*width+j]
				}
			}
			for o := range out {
				z := b[o]
				for j := range 2 * width {
					z += in[j] * w[j*out+o]
				}
				if k < layers-1 {
					if z > 0 {
						sig = append(sig, '+')
					} else {
						sig = append(sig, '-')
						z = 0
					}
				}
				next[v*out+o] = z
			}
		}
		cur, width = next, out
	}
	loss := 0.0
	for v := range n {
		var sq float64
		for j := range d {
			sq += cur[v*d+j] * cur[v*d+j]
		}
		nrm := math.Sqrt(sq)
		for j := range d {
			cur[v*d+j] /= nrm
			loss += c[v*d+j] * cur[v*d+j]
		}
	}
	return loss, cur, string(sig)
}

// testGraph is a small graph: a chain 0-1-2-3, a hub 4 linked to 0, 2, 5
// and 6, and an isolated node 7, as per-layer aggregators (layer 2 drops
// one of the hub's edges, as a sample would) and as refSage's lists.
func testGraph() ([]Mean, [][][][2]float64) {
	type edge struct{ a, b int }
	full := []edge{{0, 1}, {1, 2}, {2, 3}, {4, 0}, {4, 2}, {4, 5}, {4, 6}}
	const n = 8
	build := func(edges []edge, rate func(e edge) float64) (Mean, [][][2]float64) {
		lists := make([][][2]float64, n)
		for _, e := range edges {
			lists[e.a] = append(lists[e.a], [2]float64{float64(e.b), rate(e)})
			lists[e.b] = append(lists[e.b], [2]float64{float64(e.a), rate(e)})
		}
		var m Mean
		m.Off = append(m.Off, 0)
		for v := range n {
			var sum float64
			for _, e := range lists[v] {
				sum += e[1]
			}
			for i := range lists[v] {
				lists[v][i][1] /= sum
				m.Idx = append(m.Idx, int32(lists[v][i][0]))
				m.W = append(m.W, float32(lists[v][i][1]))
			}
			m.Off = append(m.Off, int32(len(m.Idx)))
		}
		return m, lists
	}
	m1, l1 := build(full, func(e edge) float64 { return float64(1 + e.a + e.b) })
	m2, l2 := build(full[:6], func(edge) float64 { return 1 })
	return []Mean{m1, m2}, [][][][2]float64{l1, l2}
}

// TestSageForwardAndGradients checks Forward against refSage and Backward
// against refSage's finite differences, with one and with two layers.
func TestSageForwardAndGradients(t *testing.T) {
	for _, layers := range []int{1, 2} {
		t.Run(fmt.Sprint(layers, " layers"), func(t *testing.T) {
			const f, h, d, n = 5, 6, 4, 8
			rng := rand.New(rand.NewPCG(3, uint64(layers)))
			s, err := NewSage(f, h, d, layers, rng)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range s.Params() {
				for i, v := 0, f32(p.T); i < len(v); i++ {
					v[i] = float32(rng.NormFloat64() * 0.5) // biases too
				}
			}
			agg, lists := testGraph()
			agg = agg[:layers]
			x := make([]float32, n*f)
			x64 := make([]float64, n*f)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
				x64[i] = float64(x[i])
			}
			c := make([]float32, n*d)
			c64 := make([]float64, n*d)
			for i := range c {
				c[i] = float32(rng.NormFloat64())
				c64[i] = float64(c[i])
			}
			emb, err := s.Forward(x, n, agg)
			if err != nil {
				t.Fatal(err)
			}
			var params [][]float64
			for _, p := range s.Params() {
				q := make([]float64, len(f32(p.T)))
				for i, v := range f32(p.T) {
					q[i] = float64(v)
				}
				params = append(params, q)
			}
			_, ref, _ := refSage(params, f, h, d, layers, x64, n, lists, c64)
			for i := range ref {
				if math.Abs(float64(emb[i])-ref[i]) > 1e-5 {
					t.Fatalf("embedding value %d = %v, reference %v", i, emb[i], ref[i])
				}
			}
			for v := range n {
				var sq float64
				for j := range d {
					sq += float64(emb[v*d+j]) * float64(emb[v*d+j])
				}
				if math.Abs(sq-1) > 1e-5 {
					t.Fatalf("node %d's embedding has squared length %v, want 1", v, sq)
				}
			}
			grads := s.Clone()
			grads.Zero()
			s.Backward(c, grads)
			const eps = 1e-5
			checked, skipped := 0, 0
			for pi, p := range grads.Params() {
				g := f32(p.T)
				for i := range params[pi] {
					orig := params[pi][i]
					params[pi][i] = orig + eps
					lp, _, sp := refSage(params, f, h, d, layers, x64, n, lists, c64)
					params[pi][i] = orig - eps
					lm, _, sm := refSage(params, f, h, d, layers, x64, n, lists, c64)
					params[pi][i] = orig
					if sp != sm {
						skipped++
						continue
					}
					num := (lp - lm) / (2 * eps)
					if math.Abs(float64(g[i])-num) > 1e-3+1e-3*math.Abs(num) {
						t.Errorf("d loss / d %s[%d] = %v, finite difference %v", p.Name, i, g[i], num)
					}
					checked++
				}
			}
			if checked < s.NumParams()*9/10 {
				t.Fatalf("checked %d of %d parameters (%d skipped at kinks)", checked, s.NumParams(), skipped)
			}
			t.Logf("checked %d gradients against finite differences, %d skipped at kinks", checked, skipped)
		})
	}
}

// TestSageInductive: a node's embedding depends on its neighbourhood
// within Layers hops, not on the rest of the graph or on the nodes'
// numbering, so the same weights embed a graph they never saw.
func TestSageInductive(t *testing.T) {
	s, err := NewSage(3, 5, 4, 2, rand.New(rand.NewPCG(9, 9)))
	if err != nil {
		t.Fatal(err)
	}
	// a path 0-1-2 with unit weights (1's neighbours weigh 1/2 each)
	path := Mean{Off: []int32{0, 1, 3, 4}, Idx: []int32{1, 0, 2, 1}, W: []float32{1, 0.5, 0.5, 1}}
	x := []float32{0.1, 0.2, 0.3, 1, 0, -1, 0.5, 0.5, 0.5}
	e1, err := s.Forward(x, 3, []Mean{path, path})
	if err != nil {
		t.Fatal(err)
	}
	e1 = append([]float32(nil), e1...)
	// the same path numbered 2-0-1 next to an unconnected pair 3-4
	other := Mean{Off: []int32{0, 2, 3, 4, 5, 6}, Idx: []int32{2, 1, 0, 0, 4, 3}, W: []float32{0.5, 0.5, 1, 1, 1, 1}}
	x2 := []float32{1, 0, -1, 0.5, 0.5, 0.5, 0.1, 0.2, 0.3, 9, 9, 9, -9, 9, -9}
	e2, err := s.Forward(x2, 5, []Mean{other, other})
	if err != nil {
		t.Fatal(err)
	}
	for old, nw := range []int{2, 0, 1} {
		for j := range 4 {
			if d := math.Abs(float64(e1[old*4+j] - e2[nw*4+j])); d > 1e-6 {
				t.Fatalf("node %d (now %d) embedding value %d: %v vs %v", old, nw, j, e1[old*4+j], e2[nw*4+j])
			}
		}
	}
}

// TestSageRefuses checks shapes and aggregators are validated.
func TestSageRefuses(t *testing.T) {
	for _, c := range []struct {
		f, h, d, layers int
	}{{0, 4, 4, 2}, {4, 0, 4, 2}, {4, 4, 0, 1}, {4, 4, 4, 3}, {4, 4, 4, 0}, {MaxSageWidth + 1, 4, 4, 1}} {
		if _, err := NewSage(c.f, c.h, c.d, c.layers, nil); err == nil {
			t.Errorf("NewSage(%+v) accepted", c)
		}
	}
	if _, err := NewSage(4, 0, 4, 1, nil); err != nil {
		t.Errorf("one layer needs no hidden width: %v", err)
	}
	s, _ := NewSage(2, 3, 2, 1, nil)
	x := []float32{1, 2, 3, 4}
	for name, m := range map[string]Mean{
		"offsets":   {Off: []int32{0, 1}, Idx: []int32{1}, W: []float32{1}},
		"index":     {Off: []int32{0, 1, 1}, Idx: []int32{2}, W: []float32{1}},
		"weight":    {Off: []int32{0, 1, 1}, Idx: []int32{1}, W: []float32{2}},
		"nan":       {Off: []int32{0, 1, 1}, Idx: []int32{1}, W: []float32{float32(math.NaN())}},
		"decrease":  {Off: []int32{0, 1, 0}, Idx: nil, W: nil},
		"last":      {Off: []int32{0, 1, 2}, Idx: []int32{1}, W: []float32{1}},
		"negative":  {Off: []int32{0, 1, 1}, Idx: []int32{-1}, W: []float32{1}},
		"w missing": {Off: []int32{0, 1, 1}, Idx: []int32{1}, W: nil},
	} {
		if _, err := s.Forward(x, 2, []Mean{m}); !errors.Is(err, ErrAggregator) {
			t.Errorf("%s: %v, want ErrAggregator", name, err)
		}
	}
	if _, err := s.Forward(x, 2, nil); !errors.Is(err, ErrAggregator) {
		t.Errorf("no aggregator: %v", err)
	}
}

// TestSageOverflow: a row whose output overflows embeds as zero, not NaN.
func TestSageOverflow(t *testing.T) {
	s, err := NewSage(2, 3, 2, 1, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	none := Mean{Off: []int32{0, 0, 0}}
	emb, err := s.Forward([]float32{float32(math.Inf(1)), 1, 0.5, 0.5}, 2, []Mean{none})
	if err != nil {
		t.Fatal(err)
	}
	for j, v := range emb[:2] {
		if v != 0 {
			t.Fatalf("the overflowed row's value %d is %v, want 0", j, v)
		}
	}
	var sq float64
	for _, v := range emb[2:] {
		sq += float64(v) * float64(v)
	}
	if math.Abs(sq-1) > 1e-5 {
		t.Fatalf("the finite row's squared length is %v", sq)
	}
}
