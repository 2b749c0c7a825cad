package ppo

import (
	"math"

	"github.com/edgesched/edgesched/policy/nn"
)

// adam is the Adam optimiser (Kingma & Ba) over a network's parameters,
// with its moment estimates stored as networks of the same shape.
type adam struct {
	m, v   *nn.Net
	step   int64
	b1, b2 float64
	eps    float64
}

func newAdam(like *nn.Net) *adam {
	m, v := like.Clone(), like.Clone()
	m.Zero()
	v.Zero()
	return &adam{m: m, v: v, b1: 0.9, b2: 0.999, eps: 1e-8}
}

// apply updates params with grads at learning rate lr.
func (a *adam) apply(params, grads *nn.Net, lr float64) {
	a.step++
	c1 := 1 - math.Pow(a.b1, float64(a.step))
	c2 := 1 - math.Pow(a.b2, float64(a.step))
	ps, gs, ms, vs := params.Params(), grads.Params(), a.m.Params(), a.v.Params()
	for i := range ps {
		p, g := data(ps[i]), data(gs[i])
		m, v := data(ms[i]), data(vs[i])
		for j := range p {
			gj := float64(g[j])
			mj := a.b1*float64(m[j]) + (1-a.b1)*gj
			vj := a.b2*float64(v[j]) + (1-a.b2)*gj*gj
			m[j], v[j] = float32(mj), float32(vj)
			p[j] -= float32(lr * (mj / c1) / (math.Sqrt(vj/c2) + a.eps))
		}
	}
}

func data(p nn.Param) []float32 { return p.Values() }

// scale multiplies every gradient by f.
func scale(g *nn.Net, f float32) {
	for _, p := range g.Params() {
		d := data(p)
		for i := range d {
			d[i] *= f
		}
	}
}

// clipNorm scales g so its global L2 norm is at most max; it returns the
// norm before clipping.
func clipNorm(g *nn.Net, max float64) float64 {
	var sq float64
	for _, p := range g.Params() {
		for _, v := range data(p) {
			sq += float64(v) * float64(v)
		}
	}
	n := math.Sqrt(sq)
	if n > max && n > 0 {
		scale(g, float32(max/n))
	}
	return n
}
