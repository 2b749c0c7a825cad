//go:build !(goexperiment.simd && amd64)

package int8net

import "fmt"

// Kernel names the kernel a Net's Scorer uses: KernelPortable in
// this build (GOEXPERIMENT=simd builds on amd64 use KernelAVX2 or
// KernelAVX512 on CPUs that have them).
func Kernel() string { return KernelPortable }

// Kernels lists the kernels this build can run: only KernelPortable.
func Kernels() []string { return []string{KernelPortable} }

func newVecNetKernel(_ *Net, kernel string) (*vecNet, error) {
	return nil, fmt.Errorf("%w: kernel %q: this build runs %v (the vector kernels need GOEXPERIMENT=simd on amd64)", ErrKernel, kernel, Kernels())
}

type vecNet struct{ width int }

type vecScratch struct{}

func newVecNet(*Net) *vecNet { return nil }

func (v *vecNet) scratch() *vecScratch { return nil }

func (v *vecNet) put([]float32, int, int, *vecScratch) {}

func (v *vecNet) block(*Net, []int32, *vecScratch, []float32) {}
