package quant

import (
	"math"

	"gonum.org/v1/gonum/mat"
)

// Ways to round a layer's weights to int8 levels (CalibrationOptions.Rounding).
const (
	// RoundNearest rounds every weight to its nearest level, and every
	// bias to its nearest accumulator unit.
	RoundNearest = "nearest"
	// RoundAdaptive rounds each weight up or down, whichever brings the
	// int8 network's pre-activations nearer the float network's on the
	// calibration rows, and refits the biases (adaptiveRound).
	RoundAdaptive = "adaptive"
)

// adaptiveRows is the most calibration rows adaptive rounding fits on: an
// evenly strided subset when there are more, so the fit costs a few
// seconds for the shipped networks' sizes (the Gram matrices are rows x
// fan-in^2 per channel). Rows the float network scores as NaN or
// infinite are left out.
const adaptiveRows = 20000

// adaptivePasses bounds the sweeps over a channel's weights; a sweep that
// changes nothing ends the fit sooner.
const adaptivePasses = 8

// qlayer is one layer of the int8 scorer being built: int8 weights
// (outputs x fanIn, output-major), their per-channel scales, the int32
// biases, and the unrounded weights in level units (w / scale), which
// bound each weight's rounding to the level below or above.
type qlayer struct {
	q      []int8
	scale  []float64
	b      []int32
	levels []float64
	fanIn  int
}

// adaptiveRound refits the rounding of the three layers in order, each on
// the inputs the int8 network gives it (the quantized features, then the
// u8 activations of the layers already refitted), so a layer also makes
// up for the error of the layers before it. Per output channel it
// minimises the squared distance, in accumulator units, between the int8
// pre-activation and the float network's, over the calibration rows where
// either is positive (a ReLU hides the others; the output layer counts
// every row). Each weight stays at the level below or above its float
// value (the constraint of AdaRound, Nagel et al. 2020, which keeps the
// fit from drifting off the float network); the bias, an integer in
// accumulator units, moves freely (within the int32 headroom
// quantizeLayer checks). The search is greedy coordinate
// descent: one level step at a time, kept if it lowers the error.
func adaptiveRound(ref *reference, rows []float32, inScale, sA1, sA2 []float64, layers [3]*qlayer) {
	F := ref.f
	k := len(rows) / F
	n := min(k, adaptiveRows)
	inv := make([]float32, F)
	for j := range F {
		inv[j] = float32(1 / (ref.std[j] * inScale[j]))
	}
	u1 := make([]float64, 0, n*F)
	z1, z2 := make([]float64, 0, n*ref.h1), make([]float64, 0, n*ref.h2)
	out := make([]float64, 0, n)
	for i := range n {
		r := i * k / n // evenly strided: every row when k <= adaptiveRows
		row := rows[r*F : (r+1)*F]
		s := ref.score(row)
		if math.IsNaN(s) || math.IsInf(s, 0) {
			continue // a row the float network cannot score teaches nothing
		}
		out = append(out, s)
		for j := range F {
			v := ref.schema.Bound(j, row[j]) // as the reference holds it
			u1 = append(u1, float64(QuantizeInput(v, float32(ref.mean[j]), inv[j], -MaxInput, MaxInput)))
		}
		z1 = append(z1, ref.z1...)
		z2 = append(z2, ref.z2...)
	}
	n = len(out)
	fitLayer(u1, z1, n, layers[0], true)
	u2 := activations(u1, n, layers[0], sA1)
	fitLayer(u2, z2, n, layers[1], true)
	fitLayer(activations(u2, n, layers[1], sA2), out, n, layers[2], false)
}

// activations returns the u8 activations (as floats) layer l gives its
// n input rows u, at the activation scales sA: the requantization of
// Requantization's multipliers, in float (with the exact ratio their
// m / 2^s approximates, so an activation here can differ from the int8
// network's by one level, rarely: 0.15% of the default model's first
// layer activations on openb rows).
func activations(u []float64, n int, l *qlayer, sA []float64) []float64 {
	outs := len(l.b)
	a := make([]float64, n*outs)
	for i := range n {
		x := u[i*l.fanIn : (i+1)*l.fanIn]
		for c := range outs {
			acc := l.accumulate(c, x)
			a[i*outs+c] = math.Min(MaxActivation, math.RoundToEven(math.Max(acc, 0)*l.scale[c]/sA[c]))
		}
	}
	return a
}

// accumulate is channel c's int32 accumulator for input row x.
func (l *qlayer) accumulate(c int, x []float64) float64 {
	acc := float64(l.b[c])
	for j, v := range l.q[c*l.fanIn : (c+1)*l.fanIn] {
		acc += x[j] * float64(v)
	}
	return acc
}

// fitLayer refits every channel of l on n input rows u against the float
// pre-activations z (n x outputs, real units).
func fitLayer(u, z []float64, n int, l *qlayer, relu bool) {
	outs, D := len(l.b), l.fanIn+1
	var a []float64
	for c := range outs {
		// the rows that count, and their residuals in accumulator units
		a = a[:0]
		var r []float64
		for i := range n {
			x := u[i*l.fanIn : (i+1)*l.fanIn]
			acc, t := l.accumulate(c, x), z[i*outs+c]/l.scale[c]
			if relu && acc <= 0 && t <= 0 {
				continue
			}
			a = append(a, x...)
			a = append(a, 1) // the bias's input
			r = append(r, t-acc)
		}
		m := len(r)
		if m == 0 {
			continue // a channel dead on every row: nothing to fit
		}
		A := mat.NewDense(m, D, a)
		var G mat.SymDense
		G.SymOuterK(1, A.T())
		g := mat.NewVecDense(D, nil)
		g.MulVec(A.T(), mat.NewVecDense(m, r))
		l.descend(c, &G, g)
	}
}

// descend runs the greedy search of channel c on the normal equations of
// its squared error: G = AᵀA and g = Aᵀr, where A's rows are the inputs
// (the bias's input last) and r the residuals. A step d on input j
// changes the error by d²G_jj - 2d g_j, and g by -d G_·j.
func (l *qlayer) descend(c int, G *mat.SymDense, g *mat.VecDense) {
	D := l.fanIn + 1
	q := l.q[c*l.fanIn : (c+1)*l.fanIn]
	step := func(j, d int) {
		for i := range D {
			g.SetVec(i, g.AtVec(i)-float64(d)*G.At(i, j))
		}
	}
	bias := func() {
		if n := G.At(D-1, D-1); n > 0 {
			d := math.RoundToEven(g.AtVec(D-1) / n)
			if d != 0 && math.Abs(float64(l.b[c])+d) <= 1<<28 {
				l.b[c] += int32(d)
				step(D-1, int(d))
			}
		}
	}
	bias()
	for range adaptivePasses {
		moved := false
		for j := range l.fanIn {
			lv := l.levels[c*l.fanIn+j]
			lo, hi := max(-MaxInput, math.Floor(lv)), min(MaxInput, math.Ceil(lv))
			for _, d := range [2]int{1, -1} {
				next := float64(q[j]) + float64(d)
				if next < lo || next > hi {
					continue
				}
				if gain := float64(d)*2*g.AtVec(j) - G.At(j, j); gain > 1e-9*(1+G.At(j, j)) {
					q[j] = int8(next)
					step(j, d)
					moved = true
					break
				}
			}
		}
		bias()
		if !moved {
			break
		}
	}
}
