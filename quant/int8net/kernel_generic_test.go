//go:build !(goexperiment.simd && amd64)

package int8net

import "testing"

func TestSIMDKernelIsExact(t *testing.T) {
	t.Skip("portable build: the AVX2/AVX-512 kernels need GOEXPERIMENT=simd on amd64 (make test runs them)")
}
