//go:build !nogorgonia

package nn

import (
	"fmt"

	"gorgonia.org/tensor"
)

// Tensor is a dense float32 tensor, row-major: gorgonia.org/tensor's Dense
// in the default build. Under the nogorgonia build tag it is a small
// slice-backed type whose matrix product calls the same gonum Sgemm with
// the same arguments, so both builds compute bit-identical results
// (TestMatMulMatchesSgemm); see tensor_gonum.go for why that build exists.
type Tensor = tensor.Dense

// tensorBackend names the backend in use (logs, tests, docs).
const tensorBackend = "gorgonia.org/tensor"

// newTensor returns a zeroed float32 tensor of the given shape.
func newTensor(shape ...int) *Tensor {
	return tensor.New(tensor.WithShape(shape...), tensor.Of(tensor.Float32))
}

// dense wraps a slice of length r*c as an r x c tensor without copying.
func dense(buf []float32, r, c int) *Tensor {
	return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(buf[:r*c]))
}

func f32(t *Tensor) []float32 { return t.Data().([]float32) }

func dims(t *Tensor) []int { return []int(t.Shape()) }

func cloneTensor(t *Tensor) *Tensor { return t.Clone().(*Tensor) }

// matmul computes a (r x k) times b (k x c) into a new r x c tensor; when
// ta/tb are set, a/b are used transposed.
func matmul(a, b *Tensor, ta, tb bool) *Tensor {
	if ta {
		_ = a.T()
		defer a.UT()
	}
	if tb {
		_ = b.T()
		defer b.UT()
	}
	out, err := tensor.MatMul(a, b)
	if err != nil {
		// shapes are checked by the callers; a failure is a programming error
		panic(fmt.Sprintf("policy: matmul %v x %v: %v", a.Shape(), b.Shape(), err))
	}
	return out.(*Tensor)
}
