package int8net

import "math/bits"

// swar is a layer's weights packed for SIMD-within-a-register dot
// products in portable Go: each uint64 holds the offset weights (w + 128,
// so 0..255) of `lanes` output channels in lanes of `width` bits, for one
// input. Multiplying by an unsigned input u (0..255) and summing over the
// inputs accumulates every lane at once; width is chosen so no lane can
// carry into the next (fanIn * 255 * 255 < 2^width). The true dot products
// are recovered exactly:
//
//	lane_c = sum_k u_k (w_ck + 128) = sum_k u_k w_ck + 128 sum_k u_k
//	sum_k x_k w_ck = lane_c - 128 sum_k u_k - off sum_k w_ck, u_k = x_k + off
//
// where off is 127 for signed int8 inputs and 0 for u8 activations.
type swar struct {
	fanIn, outs  int
	lanes, width int
	groups       int
	mask         uint64
	off          int64
	packed       []uint64 // groups x fanIn, group-major
	sumW         []int64  // per output channel
}

// newSWAR packs w (outs x fanIn, output-major).
func newSWAR(w []int8, fanIn, outs int, off int64) *swar {
	maxLane := uint64(fanIn) * 255 * 255
	width := bits.Len64(maxLane)
	lanes := 64 / width
	s := &swar{fanIn: fanIn, outs: outs, lanes: lanes, width: width, off: off,
		groups: (outs + lanes - 1) / lanes, mask: 1<<width - 1, sumW: make([]int64, outs)}
	s.packed = make([]uint64, s.groups*fanIn)
	for c := range outs {
		g, l := c/lanes, c%lanes
		for k := range fanIn {
			v := int64(w[c*fanIn+k])
			s.packed[g*fanIn+k] |= uint64(v+128) << (l * width)
			s.sumW[c] += v
		}
	}
	return s
}

// dots writes sum_k x_k w_ck for every output channel c, given the offset
// inputs u (u_k = x_k + off) and their sum.
func (s *swar) dots(u []uint64, sumU int64, out []int32) {
	K := s.fanIn
	u = u[:K]
	for g := range s.groups {
		// p and v have the same length (no bounds checks in the loops);
		// four products per step, independent of each other
		p, v := s.packed[g*K:][:len(u)], u
		var a uint64
		for len(p) >= 4 && len(v) >= 4 {
			a += v[0]*p[0] + v[1]*p[1] + v[2]*p[2] + v[3]*p[3]
			p, v = p[4:], v[4:]
		}
		for k, w := range p {
			a += v[k] * w
		}
		base := g * s.lanes
		for l := 0; l < s.lanes && base+l < s.outs; l++ {
			c := base + l
			lane := int64((a >> (l * s.width)) & s.mask)
			out[c] = int32(lane - 128*sumU - s.off*s.sumW[c])
		}
	}
}
