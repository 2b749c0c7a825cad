//go:build goexperiment.simd && amd64

package quant

import (
	"simd/archsimd"

	"github.com/edgesched/edgesched/policy"
)

// SIMDKernel reports whether this build scores with a vector kernel
// (built with GOEXPERIMENT=simd, on a CPU with AVX2; AVX-512 is used when
// present).
func SIMDKernel() bool { return archsimd.X86.AVX2() }

// vecLayer holds a layer's weights widened to int16 for VPMADDWD: for
// input pair p (inputs 2p, 2p+1) and output block b (width channels: 8
// with AVX2, 16 with AVX-512), 2*width int16 values [w[c][2p],
// w[c][2p+1]] for c in the block.
type vecLayer struct {
	pairs, blocks, width int
	w                    []int16
	w32                  [][32]int16 // w in 512-bit rows (width 16)
}

func newVecLayer(w []int8, fanIn, outs, width int) *vecLayer {
	l := &vecLayer{pairs: (fanIn + 1) / 2, blocks: (outs + width - 1) / width, width: width}
	l.w = make([]int16, l.pairs*l.blocks*2*width)
	for p := range l.pairs {
		for b := range l.blocks {
			for i := range width {
				c := b*width + i
				if c >= outs {
					continue
				}
				base := (p*l.blocks+b)*2*width + 2*i
				for j := range 2 {
					if k := 2*p + j; k < fanIn {
						l.w[base+j] = int16(w[c*fanIn+k])
					}
				}
			}
		}
	}
	if width == 16 {
		l.w32 = make([][32]int16, len(l.w)/32)
		for i := range l.w32 {
			copy(l.w32[i][:], l.w[32*i:])
		}
	}
	return l
}

// dots writes the layer's accumulators (without bias) for inputs packed
// as pairs (low 16 bits input 2p, high 16 bits input 2p+1) into out
// (blocks*width values).
func (l *vecLayer) dots(pairs []int32, out []int32) {
	if l.width == 16 {
		l.dots512(pairs, out)
		return
	}
	w := l.w
	B := l.blocks
	b := 0
	for ; b+4 <= B; b += 4 {
		var a0, a1, a2, a3 archsimd.Int32x8
		for p, v := range pairs[:l.pairs] {
			x := archsimd.BroadcastInt32x8(v).AsInt16x16()
			o := (p*B + b) * 16
			a0 = a0.Add(x.DotProductPairs(archsimd.LoadInt16x16Slice(w[o:])))
			a1 = a1.Add(x.DotProductPairs(archsimd.LoadInt16x16Slice(w[o+16:])))
			a2 = a2.Add(x.DotProductPairs(archsimd.LoadInt16x16Slice(w[o+32:])))
			a3 = a3.Add(x.DotProductPairs(archsimd.LoadInt16x16Slice(w[o+48:])))
		}
		a0.StoreSlice(out[b*8:])
		a1.StoreSlice(out[b*8+8:])
		a2.StoreSlice(out[b*8+16:])
		a3.StoreSlice(out[b*8+24:])
	}
	for ; b < B; b++ {
		var a archsimd.Int32x8
		for p, v := range pairs[:l.pairs] {
			x := archsimd.BroadcastInt32x8(v).AsInt16x16()
			a = a.Add(x.DotProductPairs(archsimd.LoadInt16x16Slice(w[(p*B+b)*16:])))
		}
		a.StoreSlice(out[b*8:])
	}
}

// dots512 is dots with AVX-512: 16 channels per VPMADDWD.
func (l *vecLayer) dots512(pairs []int32, out []int32) {
	w := l.w32
	B := l.blocks
	b := 0
	for ; b+2 <= B; b += 2 {
		var a0, a1 archsimd.Int32x16
		for p, v := range pairs[:l.pairs] {
			x := archsimd.BroadcastInt32x16(v).AsInt16x32()
			o := p*B + b
			a0 = a0.Add(x.DotProductPairs(archsimd.LoadInt16x32(&w[o])))
			a1 = a1.Add(x.DotProductPairs(archsimd.LoadInt16x32(&w[o+1])))
		}
		a0.StoreSlice(out[b*16:])
		a1.StoreSlice(out[b*16+16:])
	}
	for ; b < B; b++ {
		var a archsimd.Int32x16
		for p, v := range pairs[:l.pairs] {
			x := archsimd.BroadcastInt32x16(v).AsInt16x32()
			a = a.Add(x.DotProductPairs(archsimd.LoadInt16x32(&w[p*B+b])))
		}
		a.StoreSlice(out[b*16:])
	}
}

// vecRequant is requant on 8 channels at a time: ReLU, times m, plus the
// rounding term, shifted right by s, at most 255. Bit-identical to
// requant (m was sized so nothing overflows).
func vecRequant(acc, bias, m, round, shift []int32, out []int32, width int) {
	if width == 16 {
		zero := archsimd.BroadcastInt32x16(0)
		top := archsimd.BroadcastInt32x16(actMax)
		for i := 0; i+16 <= len(out); i += 16 {
			a := archsimd.LoadInt32x16Slice(acc[i:]).Add(archsimd.LoadInt32x16Slice(bias[i:])).Max(zero)
			a = a.Mul(archsimd.LoadInt32x16Slice(m[i:])).Add(archsimd.LoadInt32x16Slice(round[i:]))
			a.ShiftRight(archsimd.LoadInt32x16Slice(shift[i:])).Min(top).StoreSlice(out[i:])
		}
		return
	}
	zero := archsimd.BroadcastInt32x8(0)
	top := archsimd.BroadcastInt32x8(actMax)
	for i := 0; i+8 <= len(out); i += 8 {
		a := archsimd.LoadInt32x8Slice(acc[i:]).Add(archsimd.LoadInt32x8Slice(bias[i:])).Max(zero)
		a = a.Mul(archsimd.LoadInt32x8Slice(m[i:])).Add(archsimd.LoadInt32x8Slice(round[i:]))
		a.ShiftRight(archsimd.LoadInt32x8Slice(shift[i:])).Min(top).StoreSlice(out[i:])
	}
}

// vecNet is the AVX2 form of an Int8Net's node-dependent layers.
type vecNet struct {
	l1, l2     *vecLayer
	width      int // channels per vector: 8 (AVX2) or 16 (AVX-512)
	h1p, h2p   int // channel counts padded to width
	m1, r1, s1 []int32
	m2, r2, s2 []int32
	b2         []int32
	w3         []int32
}

func newVecNet(n *Int8Net) *vecNet {
	if !SIMDKernel() {
		return nil
	}
	width := 8
	if archsimd.X86.AVX512() {
		width = 16
	}
	return newVecNetWidth(n, width)
}

// newVecNetWidth builds the kernel for 8 (AVX2) or 16 (AVX-512) channels
// per vector.
func newVecNetWidth(n *Int8Net, width int) *vecNet {
	P := policy.NumPodFeatures
	nodeW := make([]int8, 0, n.H1*(n.F-P))
	for c := range n.H1 {
		nodeW = append(nodeW, n.w1[c*n.F+P:(c+1)*n.F]...)
	}
	v := &vecNet{l1: newVecLayer(nodeW, n.F-P, n.H1, width), l2: newVecLayer(n.w2, n.H1, n.H2, width), width: width}
	v.h1p, v.h2p = v.l1.blocks*width, v.l2.blocks*width
	pad := func(src []int32, n int) []int32 { out := make([]int32, n); copy(out, src); return out }
	mults := func(m []int32, s []uint8, n int) (mm, rr, ss []int32) {
		mm, rr, ss = make([]int32, n), make([]int32, n), make([]int32, n)
		for c := range m {
			mm[c], ss[c] = m[c], int32(s[c])
			if s[c] > 0 {
				rr[c] = 1 << (s[c] - 1)
			}
		}
		return
	}
	v.m1, v.r1, v.s1 = mults(n.m1, n.s1, v.h1p)
	v.m2, v.r2, v.s2 = mults(n.m2, n.s2, v.h2p)
	v.b2 = pad(n.b2, v.h2p)
	v.w3 = make([]int32, v.h2p)
	for k, w := range n.w3 {
		v.w3[k] = int32(w)
	}
	return v
}

// scratch for one scorer
type vecScratch struct {
	pairs, acc, act, pod []int32
}

func (v *vecNet) scratch() *vecScratch {
	m := max(v.h1p, v.h2p)
	return &vecScratch{pairs: make([]int32, max(v.l1.pairs, v.l2.pairs, 16)), acc: make([]int32, m), act: make([]int32, m), pod: make([]int32, v.h1p)}
}

// forward scores one row whose node features are quantized in q[P:F],
// with the pod's share of layer 1 (bias included) in pod.
func (v *vecNet) forward(n *Int8Net, q []int8, pod []int32, sc *vecScratch) float32 {
	P := policy.NumPodFeatures
	v.packInt8(q[P:n.F], sc)
	copy(sc.pod, pod)
	v.l1.dots(sc.pairs[:v.l1.pairs], sc.acc[:v.h1p])
	vecRequant(sc.acc[:v.h1p], sc.pod, v.m1, v.r1, v.s1, sc.act[:v.h1p], v.width)
	v.packActs(sc.act[:v.h1p], sc)
	v.l2.dots(sc.pairs[:v.l2.pairs], sc.acc[:v.h2p])
	vecRequant(sc.acc[:v.h2p], v.b2, v.m2, v.r2, v.s2, sc.act[:v.h2p], v.width)
	acc := n.b3
	act, w3 := sc.act[:n.H2], v.w3[:n.H2]
	for k := range act {
		acc += act[k] * w3[k]
	}
	return float32(acc) * n.outScale
}

// packInt8 packs signed int8 inputs into int16 pairs (zero padded).
func (v *vecNet) packInt8(x []int8, sc *vecScratch) {
	for p := range v.l1.pairs {
		lo := uint32(uint16(int16(x[2*p])))
		var hi uint32
		if 2*p+1 < len(x) {
			hi = uint32(uint16(int16(x[2*p+1])))
		}
		sc.pairs[p] = int32(lo | hi<<16)
	}
}

// packActs packs u8 activations (held in int32 lanes, padded with zeros
// to a whole number of vectors) into int16 pairs: narrowing each 16 lanes
// to int16 lays out consecutive activations as pairs.
func (v *vecNet) packActs(act []int32, sc *vecScratch) {
	for i := 0; i+16 <= len(act); i += 16 {
		archsimd.LoadInt32x16Slice(act[i:]).TruncateToInt16().AsInt32x8().StoreSlice(sc.pairs[i/2:])
	}
	if rem := len(act) % 16; rem != 0 {
		for i := len(act) - rem; i < len(act); i += 2 {
			lo := uint32(act[i])
			var hi uint32
			if i+1 < len(act) {
				hi = uint32(act[i+1])
			}
			sc.pairs[i/2] = int32(lo | hi<<16)
		}
	}
}
