//go:build goexperiment.simd && amd64

package quant

import (
	"testing"

	"simd/archsimd"

	"github.com/edgesched/edgesched/policy"
)

// TestSIMDKernelIsExact: the AVX2 and AVX-512 kernels compute exactly what
// the portable kernels compute, on layer sizes that fill whole vectors
// and on sizes that leave remainders.
func TestSIMDKernelIsExact(t *testing.T) {
	if !archsimd.X86.AVX2() {
		t.Skip("this CPU has no AVX2: the portable kernel runs")
	}
	widths := []int{8}
	if archsimd.X86.AVX512() {
		widths = append(widths, 16)
	} else {
		t.Log("no AVX-512 on this CPU: only the AVX2 kernel is checked")
	}
	for _, h := range [][2]int{{32, 32}, {16, 8}, {20, 13}, {64, 40}} {
		m := randomModel(t, h[0], h[1], uint64(h[0]))
		a, err := Quantize(m, benchRows(3000, 7), DefaultCalibration(), Info{})
		if err != nil {
			t.Fatal(err)
		}
		n, err := NewInt8Net(a)
		if err != nil {
			t.Fatal(err)
		}
		for _, width := range widths {
			v := newVecNetWidth(n, width)
			sc := n.Scorer()
			vs := v.scratch()
			x := benchRows(300, 8)
			for i := range 300 {
				row := x[i*policy.NumFeatures : (i+1)*policy.NumFeatures]
				sc.podShare(row)
				n.quantizeInput(row, sc.q, policy.NumPodFeatures, policy.NumFeatures)
				plain := sc.forwardPlain()
				if got := v.forward(n, sc.q, sc.pod, vs); got != plain {
					t.Fatalf("%v width %d row %d: vector %v, plain %v", h, width, i, got, plain)
				}
			}
		}
	}
}
