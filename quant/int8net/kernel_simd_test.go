//go:build goexperiment.simd && amd64

package int8net

import (
	"math"
	"testing"

	"simd/archsimd"

	"github.com/edgesched/edgesched/policy"
)

// TestSIMDKernelIsExact: the AVX2 and AVX-512 kernels compute exactly what
// the plain integer path computes, on layer sizes that fill whole vectors
// and on sizes that leave remainders (odd channel and feature counts),
// for calls whose row count is not a multiple of the block and whose pod
// features change mid-block (a block never mixes pods).
func TestSIMDKernelIsExact(t *testing.T) {
	if !archsimd.X86.AVX2() {
		t.Skip("this CPU has no AVX2: the portable kernel runs")
	}
	kernels := []string{KernelAVX2}
	if archsimd.X86.AVX512() {
		kernels = append(kernels, KernelAVX512)
	} else {
		t.Log("no AVX-512 on this CPU: only the AVX2 kernel is checked")
	}
	F, P := policy.NumFeatures, policy.NumPodFeatures
	for _, h := range [][2]int{{32, 32}, {16, 8}, {20, 13}, {64, 40}, {7, 5}} {
		m := randomModel(t, h[0], h[1], uint64(h[0]))
		_, n := quantized(t, m, 3000, 7)
		x := benchRows(301, 8)
		// rows 40-44 and 100 belong to another pod
		for _, i := range []int{40, 41, 42, 43, 44, 100} {
			x[i*F] += 0.5
		}
		// non-finite node features (defence: features are finite by
		// construction) quantize alike in every kernel
		x[7*F+P] = float32(math.NaN())
		x[8*F+P+3] = float32(math.Inf(1))
		x[9*F+F-1] = float32(math.Inf(-1))
		for _, kernel := range kernels {
			sc, err := n.ScorerWith(kernel)
			if err != nil {
				t.Fatal(err)
			}
			width := sc.vec.width
			for _, k := range []int{301, 1, width - 1, width + 1, 45} {
				got := make([]float32, k)
				if err := sc.Scores(x[:k*F], k, got); err != nil {
					t.Fatal(err)
				}
				ref := n.Scorer()
				for i := range k {
					row := x[i*F : (i+1)*F]
					ref.podShare(row)
					n.quantizeInput(row, ref.q, P, F)
					if plain := ref.forwardPlain(); got[i] != plain {
						t.Fatalf("%v %s, %d rows: row %d: vector %v, plain %v", h, kernel, k, i, got[i], plain)
					}
				}
			}
		}
	}
}
