//go:build !(goexperiment.simd && amd64)

package nn

// vectorKernel is false in this build: FloatScorer's AVX2 kernel needs
// GOEXPERIMENT=simd on amd64.
const vectorKernel = false

func scoresAVX2(k, nf, lo, hi int, x, a1, w1, b1, w2, b2, w3 []float32, b3 float32, out []float32) {
	panic("nn: no vector kernel in this build")
}
