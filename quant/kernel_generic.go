//go:build !(goexperiment.simd && amd64)

package quant

// SIMDKernel reports whether this build scores with the AVX2 kernel (built
// with GOEXPERIMENT=simd, on a CPU with AVX2): not this build, which uses
// the portable packed (SWAR) kernel.
func SIMDKernel() bool { return false }

// Kernel names the kernel an Int8Net built now scores with: "portable"
// in this build (GOEXPERIMENT=simd builds on amd64 report "avx2" or
// "avx512" on CPUs that have them).
func Kernel() string { return "portable" }

type vecNet struct{ width int }

type vecScratch struct{}

func newVecNet(*Int8Net) *vecNet { return nil }

func (v *vecNet) scratch() *vecScratch { return nil }

func (v *vecNet) put([]float32, int, int, *vecScratch) {}

func (v *vecNet) block(*Int8Net, []int32, *vecScratch, []float32) {}
