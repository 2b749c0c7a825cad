package federated

import "math"

// clipMargin shrinks the clipping scale by 2^-23 so that float32 rounding
// of the scaled values (at most 2^-24 relative each) cannot leave the
// clipped norm above maxNorm.
const clipMargin = 1 - 0x1p-23

// ClipL2 scales delta in place so its L2 norm is at most maxNorm (maxNorm
// <= 0, or NaN, disables), returning the norm before clipping and whether
// it clipped. A clipped delta's norm lies in [maxNorm*(1-2^-22), maxNorm]
// (barring float32 subnormals).
// A delta with a NaN or infinite value has a NaN or infinite norm and is
// left unchanged (clipped is false): validate contributions first.
func ClipL2(delta []float32, maxNorm float64) (norm float64, clipped bool) {
	norm = L2Norm(delta)
	if !(maxNorm > 0) || !(norm > maxNorm) || math.IsInf(norm, 0) {
		return norm, false
	}
	scale := maxNorm / norm * clipMargin
	for i, v := range delta {
		delta[i] = float32(float64(v) * scale)
	}
	return norm, true
}

// L2Norm is the Euclidean norm of v, accumulated in float64 (which cannot
// overflow for float32 values).
func L2Norm(v []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(v); i += 4 {
		a, b, c, d := float64(v[i]), float64(v[i+1]), float64(v[i+2]), float64(v[i+3])
		s0 += a * a
		s1 += b * b
		s2 += c * c
		s3 += d * d
	}
	for ; i < len(v); i++ {
		a := float64(v[i])
		s0 += a * a
	}
	return math.Sqrt((s0 + s1) + (s2 + s3))
}
