//go:build goexperiment.simd && amd64

package int8net

import (
	"fmt"
	"simd/archsimd"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant"
)

// Kernel names the kernel a Net's Scorer uses: KernelAVX512,
// KernelAVX2 or KernelPortable.
func Kernel() string {
	k := Kernels()
	return k[len(k)-1]
}

// Kernels lists the kernels this build can run on this CPU, slowest
// first: KernelPortable, then KernelAVX2 and KernelAVX512 when the CPU
// has them.
func Kernels() []string {
	k := []string{KernelPortable}
	if archsimd.X86.AVX2() {
		k = append(k, KernelAVX2)
		if archsimd.X86.AVX512() {
			k = append(k, KernelAVX512)
		}
	}
	return k
}

// newVecNetKernel builds the named vector kernel, if this CPU has it.
func newVecNetKernel(n *Net, kernel string) (*vecNet, error) {
	switch {
	case kernel == KernelAVX2 && archsimd.X86.AVX2():
		return newVecNetWidth(n, 8), nil
	case kernel == KernelAVX512 && archsimd.X86.AVX2() && archsimd.X86.AVX512():
		return newVecNetWidth(n, 16), nil
	}
	return nil, fmt.Errorf("%w: kernel %q: this CPU runs %v", ErrKernel, kernel, Kernels())
}

// vecNet is the vector form of a Net's node-dependent layers. Its
// lanes are candidate nodes, not channels: one vector holds one value of
// 8 (AVX2) or 16 (AVX-512) nodes, so a layer is, per output channel, a
// sum of VPMADDWD products of an input-pair vector (two inputs of every
// node as int16 halves of an int32 lane) with that channel's two weights
// broadcast, then requantization on whole vectors with the channel's
// multiplier broadcast. Nothing is reduced across lanes and nothing is
// extracted per node until the score.
type vecNet struct {
	width      int // nodes per vector: 8 (AVX2) or 16 (AVX-512)
	nodeF      int // node features (F - NumPodFeatures)
	p1, p2, p3 int // input pairs of layers 1 (node features), 2 and 3
	h1, h2     int
	// weight pairs: w[c*p + k] holds w[c][2k] (low int16) and w[c][2k+1]
	// (high int16; 0 past the fan-in)
	w1, w2, w3 []int32
	m1, r1     []int32
	m2, r2, b2 []int32
	s1, s2     []int32
	b3         int32
	// the node features' input quantization, zero padded to whole
	// vectors (padding lanes quantize to 0): Net's, node features only
	mean, inv, lo, hi []float32
}

// newVecNet builds the fastest vector kernel this CPU has (nil without
// AVX2: the portable kernel scores).
func newVecNet(n *Net) *vecNet {
	if Kernel() == KernelPortable {
		return nil
	}
	v, _ := newVecNetKernel(n, Kernel()) // Kernel names one this CPU has
	return v
}

// pairWeights packs a layer's int8 weights (outs x fanIn, output-major,
// the first skip inputs of each row left out) as int16 pairs.
func pairWeights(w []int8, outs, fanIn, skip int) []int32 {
	in := fanIn - skip
	p := (in + 1) / 2
	out := make([]int32, outs*p)
	for c := range outs {
		row := w[c*fanIn+skip : (c+1)*fanIn]
		for k := range p {
			var hi int8
			if 2*k+1 < in {
				hi = row[2*k+1]
			}
			out[c*p+k] = pair(int32(row[2*k]), int32(hi))
		}
	}
	return out
}

// pair packs lo and hi (each within int16) into the two halves of an
// int32, as VPMADDWD reads them.
func pair(lo, hi int32) int32 {
	return int32(uint32(uint16(int16(lo))) | uint32(uint16(int16(hi)))<<16)
}

// newVecNetWidth builds the kernel for 8 (AVX2) or 16 (AVX-512) nodes
// per vector.
func newVecNetWidth(n *Net, width int) *vecNet {
	P := policy.NumPodFeatures
	v := &vecNet{width: width, nodeF: n.F - P, h1: n.H1, h2: n.H2,
		w1: pairWeights(n.w1, n.H1, n.F, P), w2: pairWeights(n.w2, n.H2, n.H1, 0), w3: pairWeights(n.w3, 1, n.H2, 0),
		m1: n.m1, m2: n.m2, b2: n.b2, b3: n.b3}
	v.p1, v.p2, v.p3 = (v.nodeF+1)/2, (n.H1+1)/2, (n.H2+1)/2
	padded := (v.nodeF + width - 1) / width * width
	v.mean, v.inv = make([]float32, padded), make([]float32, padded)
	v.lo, v.hi = make([]float32, padded), make([]float32, padded)
	copy(v.mean, n.mean[P:])
	copy(v.inv, n.inv[P:])
	copy(v.lo, n.lo[P:])
	copy(v.hi, n.hi[P:])
	rounding := func(s []uint8) (r, sh []int32) {
		r, sh = make([]int32, len(s)), make([]int32, len(s))
		for c, x := range s {
			sh[c] = int32(x)
			r[c] = int32(1) << x >> 1
		}
		return r, sh
	}
	v.r1, v.s1 = rounding(n.s1)
	v.r2, v.s2 = rounding(n.s2)
	return v
}

// vecScratch holds one block of nodes, lane-major: x[k][l] is input pair
// k of the block's node l.
type vecScratch struct {
	x, a1, a2 [][16]int32
	score     [16]int32
	q         []int32   // one node's quantized features (or pairs)
	pad       []float32 // one node's features, zero padded
}

func (v *vecNet) scratch() *vecScratch {
	return &vecScratch{x: make([][16]int32, v.p1), a1: make([][16]int32, v.p2), a2: make([][16]int32, v.p3),
		q: make([]int32, len(v.mean)), pad: make([]float32, len(v.mean))}
}

// put quantizes the block's nodes (rows of F features, node features
// from P on; lane l is rows[l*F:]) into the block's input pairs. The
// float32 operations are quant.QuantizeInput's (NaN to 0, clamp to the
// feature's lo and hi, then the round-half-even addition and subtraction
// of quant.RoundMagic); the conversion truncates values that are already
// integers.
func (v *vecNet) put(rows []float32, F, lanes int, sc *vecScratch) {
	if v.width == 16 {
		v.put512(rows, F, lanes, sc)
	} else {
		v.put256(rows, F, lanes, sc)
	}
	archsimd.ClearAVXUpperBits() // see block
}

// features returns lane l's node features: full vectors are loaded from
// the rows where they fit (lanes past the node's features meet zero
// means and scales and quantize to 0), from a zero-padded copy otherwise.
func (v *vecNet) features(rows []float32, F, l int, sc *vecScratch) []float32 {
	rest := rows[l*F+policy.NumPodFeatures:]
	if len(rest) < len(v.mean) {
		copy(sc.pad, rest[:v.nodeF])
		return sc.pad
	}
	return rest
}

// put512 quantizes 16 features a vector; the int16 halves of consecutive
// features are the input pairs.
func (v *vecNet) put512(rows []float32, F, lanes int, sc *vecScratch) {
	magic := archsimd.BroadcastFloat32x16(quant.RoundMagic)
	x := sc.x[:v.p1]
	q := sc.q[:len(x)]
	for l := range lanes {
		rest := v.features(rows, F, l, sc)
		for i := 0; i < len(v.mean); i += 16 {
			f := archsimd.LoadFloat32x16Slice(rest[i:]).Sub(archsimd.LoadFloat32x16Slice(v.mean[i:]))
			f = f.Mul(archsimd.LoadFloat32x16Slice(v.inv[i:]))
			lo, hi := archsimd.LoadFloat32x16Slice(v.lo[i:]), archsimd.LoadFloat32x16Slice(v.hi[i:])
			f = f.Masked(f.Equal(f)).Min(hi).Max(lo).Add(magic).Sub(magic) // NaN -> 0
			f.ConvertToInt32().TruncateToInt16().AsInt32x8().StoreSlice(sc.q[i/2:])
		}
		for k := range x {
			x[k][l] = q[k]
		}
	}
}

// put256 quantizes 8 features a vector (AVX2 has no int32 -> int16
// truncation: the pairs are packed in scalar code).
func (v *vecNet) put256(rows []float32, F, lanes int, sc *vecScratch) {
	magic := archsimd.BroadcastFloat32x8(quant.RoundMagic)
	x := sc.x[:v.p1]
	q := sc.q[:2*len(x)]
	for l := range lanes {
		rest := v.features(rows, F, l, sc)
		for i := 0; i < len(v.mean); i += 8 {
			f := archsimd.LoadFloat32x8Slice(rest[i:]).Sub(archsimd.LoadFloat32x8Slice(v.mean[i:]))
			f = f.Mul(archsimd.LoadFloat32x8Slice(v.inv[i:]))
			lo, hi := archsimd.LoadFloat32x8Slice(v.lo[i:]), archsimd.LoadFloat32x8Slice(v.hi[i:])
			f = f.Masked(f.Equal(f)).Min(hi).Max(lo).Add(magic).Sub(magic) // NaN -> 0
			f.ConvertToInt32().StoreSlice(sc.q[i:])
		}
		for k := range x {
			x[k][l] = pair(q[2*k], q[2*k+1])
		}
	}
}

// block scores the block's first len(out) nodes, whose pod's share of
// layer 1 (bias included) is pod. Lanes past len(out) hold stale inputs
// whose scores are dropped.
func (v *vecNet) block(n *Net, pod []int32, sc *vecScratch, out []float32) {
	if v.width == 16 {
		v.block512(pod, sc)
	} else {
		v.block256(pod, sc)
	}
	// VZEROUPPER before scalar float code again: legacy SSE instructions
	// after dirty upper halves pay a false dependency each (measured: the
	// scalar float code around the kernel ran 5x slower).
	archsimd.ClearAVXUpperBits()
	for l := range out {
		out[l] = float32(sc.score[l]) * n.outScale
	}
}

// layer512: out pair c/2 gets channel c's activations in its low
// (even c) or high half; with an odd number of channels the last pair's
// high half stays 0, an input its weight pair zeroes. Four channels a
// step share each input load.
func layer512(in, out [][16]int32, w, bias, m, r, s []int32) {
	zero, top := archsimd.BroadcastInt32x16(0), archsimd.BroadcastInt32x16(actMax)
	rq := func(a archsimd.Int32x16, c int) archsimd.Int32x16 {
		a = a.Max(zero).Mul(archsimd.BroadcastInt32x16(m[c])).Add(archsimd.BroadcastInt32x16(r[c]))
		return a.ShiftRight(archsimd.BroadcastInt32x16(s[c])).Min(top)
	}
	p := len(in)
	c := 0
	for ; c+4 <= len(bias); c += 4 {
		a0, a1 := archsimd.BroadcastInt32x16(bias[c]), archsimd.BroadcastInt32x16(bias[c+1])
		a2, a3 := archsimd.BroadcastInt32x16(bias[c+2]), archsimd.BroadcastInt32x16(bias[c+3])
		w0, w1, w2, w3 := w[c*p:][:p], w[(c+1)*p:][:p], w[(c+2)*p:][:p], w[(c+3)*p:][:p]
		for k := range in {
			x := archsimd.LoadInt32x16(&in[k]).AsInt16x32()
			a0 = a0.Add(x.DotProductPairs(archsimd.BroadcastInt32x16(w0[k]).AsInt16x32()))
			a1 = a1.Add(x.DotProductPairs(archsimd.BroadcastInt32x16(w1[k]).AsInt16x32()))
			a2 = a2.Add(x.DotProductPairs(archsimd.BroadcastInt32x16(w2[k]).AsInt16x32()))
			a3 = a3.Add(x.DotProductPairs(archsimd.BroadcastInt32x16(w3[k]).AsInt16x32()))
		}
		rq(a0, c).Or(rq(a1, c+1).ShiftAllLeft(16)).Store(&out[c/2])
		rq(a2, c+2).Or(rq(a3, c+3).ShiftAllLeft(16)).Store(&out[c/2+1])
	}
	for ; c < len(bias); c++ {
		acc := archsimd.BroadcastInt32x16(bias[c])
		wc := w[c*p:][:p]
		for k := range in {
			x := archsimd.LoadInt32x16(&in[k]).AsInt16x32()
			acc = acc.Add(x.DotProductPairs(archsimd.BroadcastInt32x16(wc[k]).AsInt16x32()))
		}
		a := rq(acc, c)
		if c%2 == 0 {
			a.Store(&out[c/2])
		} else {
			archsimd.LoadInt32x16(&out[c/2]).Or(a.ShiftAllLeft(16)).Store(&out[c/2])
		}
	}
}

// block512 scores a block of 16 nodes (AVX-512).
func (v *vecNet) block512(pod []int32, sc *vecScratch) {
	layer512(sc.x, sc.a1, v.w1, pod[:v.h1], v.m1, v.r1, v.s1)
	layer512(sc.a1, sc.a2, v.w2, v.b2, v.m2, v.r2, v.s2)
	acc := archsimd.BroadcastInt32x16(v.b3)
	for k := range sc.a2 {
		x := archsimd.LoadInt32x16(&sc.a2[k]).AsInt16x32()
		acc = acc.Add(x.DotProductPairs(archsimd.BroadcastInt32x16(v.w3[k]).AsInt16x32()))
	}
	acc.Store(&sc.score)
}

// lo8 is the first 8 lanes of a block row: AVX2 blocks are 8 nodes.
func lo8(x *[16]int32) *[8]int32 { return (*[8]int32)(x[:8]) }

// layer256: out pair c/2 gets channel c's activations in its low
// (even c) or high half; with an odd number of channels the last pair's
// high half stays 0, an input its weight pair zeroes. Four channels a
// step share each input load.
func layer256(in, out [][16]int32, w, bias, m, r, s []int32) {
	zero, top := archsimd.BroadcastInt32x8(0), archsimd.BroadcastInt32x8(actMax)
	rq := func(a archsimd.Int32x8, c int) archsimd.Int32x8 {
		a = a.Max(zero).Mul(archsimd.BroadcastInt32x8(m[c])).Add(archsimd.BroadcastInt32x8(r[c]))
		return a.ShiftRight(archsimd.BroadcastInt32x8(s[c])).Min(top)
	}
	p := len(in)
	c := 0
	for ; c+4 <= len(bias); c += 4 {
		a0, a1 := archsimd.BroadcastInt32x8(bias[c]), archsimd.BroadcastInt32x8(bias[c+1])
		a2, a3 := archsimd.BroadcastInt32x8(bias[c+2]), archsimd.BroadcastInt32x8(bias[c+3])
		w0, w1, w2, w3 := w[c*p:][:p], w[(c+1)*p:][:p], w[(c+2)*p:][:p], w[(c+3)*p:][:p]
		for k := range in {
			x := archsimd.LoadInt32x8(lo8(&in[k])).AsInt16x16()
			a0 = a0.Add(x.DotProductPairs(archsimd.BroadcastInt32x8(w0[k]).AsInt16x16()))
			a1 = a1.Add(x.DotProductPairs(archsimd.BroadcastInt32x8(w1[k]).AsInt16x16()))
			a2 = a2.Add(x.DotProductPairs(archsimd.BroadcastInt32x8(w2[k]).AsInt16x16()))
			a3 = a3.Add(x.DotProductPairs(archsimd.BroadcastInt32x8(w3[k]).AsInt16x16()))
		}
		rq(a0, c).Or(rq(a1, c+1).ShiftAllLeft(16)).Store(lo8(&out[c/2]))
		rq(a2, c+2).Or(rq(a3, c+3).ShiftAllLeft(16)).Store(lo8(&out[c/2+1]))
	}
	for ; c < len(bias); c++ {
		acc := archsimd.BroadcastInt32x8(bias[c])
		wc := w[c*p:][:p]
		for k := range in {
			x := archsimd.LoadInt32x8(lo8(&in[k])).AsInt16x16()
			acc = acc.Add(x.DotProductPairs(archsimd.BroadcastInt32x8(wc[k]).AsInt16x16()))
		}
		a := rq(acc, c)
		if c%2 == 0 {
			a.Store(lo8(&out[c/2]))
		} else {
			archsimd.LoadInt32x8(lo8(&out[c/2])).Or(a.ShiftAllLeft(16)).Store(lo8(&out[c/2]))
		}
	}
}

// block256 scores a block of 8 nodes (AVX2).
func (v *vecNet) block256(pod []int32, sc *vecScratch) {
	layer256(sc.x, sc.a1, v.w1, pod[:v.h1], v.m1, v.r1, v.s1)
	layer256(sc.a1, sc.a2, v.w2, v.b2, v.m2, v.r2, v.s2)
	acc := archsimd.BroadcastInt32x8(v.b3)
	for k := range sc.a2 {
		x := archsimd.LoadInt32x8(lo8(&sc.a2[k])).AsInt16x16()
		acc = acc.Add(x.DotProductPairs(archsimd.BroadcastInt32x8(v.w3[k]).AsInt16x16()))
	}
	acc.Store(lo8(&sc.score))
}
