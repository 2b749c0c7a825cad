//go:build goexperiment.simd && amd64

package nn

import "simd/archsimd"

// vectorKernel is true when this build and CPU run FloatScorer's AVX2
// kernel (GOEXPERIMENT=simd on amd64, a CPU with AVX2).
var vectorKernel = archsimd.X86.AVX2()

// scoresAVX2 finishes k rows of a 32 -> 32 ReLU scorer after its input
// layer's start: row i's first-layer sums start from a1[32i:32i+32] (the
// pod features' share), to which inputs lo..hi-1 of x's row (nf values
// apart, normalised) add their products; then bias, ReLU, the second
// layer, bias, ReLU and the output, into out[i].
//
// The sums keep gonum's rounding and order: each product is rounded
// (VMULPS), then added (VADDPS), input by input in ascending order, as
// gonum's SSE axpy does it (MULPS, ADDPS), no fused multiply-add. Where
// gonum skips a zero input, adding its product (a signed zero) changes
// nothing: a sum that starts at +0 is never -0 (a nonzero sum is unmoved
// by a zero; +0 + -0 is +0, and exact cancellation gives +0). ReLU keeps
// a lane only where it is > 0, as relu does. The output layer is summed
// in scalar code, as sgemm's one-column path.
func scoresAVX2(k, nf, lo, hi int, x, a1, w1, b1, w2, b2, w3 []float32, b3 float32, out []float32) {
	zero := archsimd.BroadcastFloat32x8(0)
	p0, p1 := archsimd.LoadFloat32x8Slice(b1[0:]), archsimd.LoadFloat32x8Slice(b1[8:])
	p2, p3 := archsimd.LoadFloat32x8Slice(b1[16:]), archsimd.LoadFloat32x8Slice(b1[24:])
	q0, q1 := archsimd.LoadFloat32x8Slice(b2[0:]), archsimd.LoadFloat32x8Slice(b2[8:])
	q2, q3 := archsimd.LoadFloat32x8Slice(b2[16:]), archsimd.LoadFloat32x8Slice(b2[24:])
	w3 = w3[:32]
	var t [32]float32
	for i := range k {
		xr := x[i*nf : (i+1)*nf]
		c := a1[i*32 : i*32+32]
		a0, a1_, a2, a3 := archsimd.LoadFloat32x8Slice(c[0:]), archsimd.LoadFloat32x8Slice(c[8:]), archsimd.LoadFloat32x8Slice(c[16:]), archsimd.LoadFloat32x8Slice(c[24:])
		for l := lo; l < hi; l++ {
			v := archsimd.BroadcastFloat32x8(xr[l])
			w := w1[l*32 : l*32+32]
			a0 = a0.Add(v.Mul(archsimd.LoadFloat32x8Slice(w[0:])))
			a1_ = a1_.Add(v.Mul(archsimd.LoadFloat32x8Slice(w[8:])))
			a2 = a2.Add(v.Mul(archsimd.LoadFloat32x8Slice(w[16:])))
			a3 = a3.Add(v.Mul(archsimd.LoadFloat32x8Slice(w[24:])))
		}
		a0, a1_, a2, a3 = a0.Add(p0), a1_.Add(p1), a2.Add(p2), a3.Add(p3)
		a0.Masked(a0.Greater(zero)).StoreSlice(t[0:])
		a1_.Masked(a1_.Greater(zero)).StoreSlice(t[8:])
		a2.Masked(a2.Greater(zero)).StoreSlice(t[16:])
		a3.Masked(a3.Greater(zero)).StoreSlice(t[24:])
		s0, s1, s2, s3 := zero, zero, zero, zero
		for l := range 32 {
			v := archsimd.BroadcastFloat32x8(t[l])
			w := w2[l*32 : l*32+32]
			s0 = s0.Add(v.Mul(archsimd.LoadFloat32x8Slice(w[0:])))
			s1 = s1.Add(v.Mul(archsimd.LoadFloat32x8Slice(w[8:])))
			s2 = s2.Add(v.Mul(archsimd.LoadFloat32x8Slice(w[16:])))
			s3 = s3.Add(v.Mul(archsimd.LoadFloat32x8Slice(w[24:])))
		}
		s0, s1, s2, s3 = s0.Add(q0), s1.Add(q1), s2.Add(q2), s3.Add(q3)
		s0.Masked(s0.Greater(zero)).StoreSlice(t[0:])
		s1.Masked(s1.Greater(zero)).StoreSlice(t[8:])
		s2.Masked(s2.Greater(zero)).StoreSlice(t[16:])
		s3.Masked(s3.Greater(zero)).StoreSlice(t[24:])
		var s float32
		for l, v := range t {
			if v != 0 {
				s += float32(v * w3[l]) // rounded, then added: see sgemm
			}
		}
		out[i] = s + b3
	}
	archsimd.ClearAVXUpperBits()
}
