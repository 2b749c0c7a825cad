//go:build nogorgonia

package nn

import (
	"fmt"
	"slices"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Tensor is a dense float32 tensor, row-major. This is the nogorgonia
// build (`go build -tags nogorgonia`), used for the edge-agent binary:
// gorgonia.org/tensor's Dtype embeds reflect.Type, and a binary that also
// calls reflect.Type.MethodByName (protobuf, through the Prometheus
// client) then keeps every exported method of every type it converts to
// an interface — about 10 MB in edge-agent (docs/agent.md, "Binary
// size"). The network only needs a shape, a backing slice and a matrix
// product, and gorgonia's float32 MatMul is gonum's Sgemm; matmul below
// calls it with the arguments gorgonia passes, so results are bit for bit
// those of the default build (TestMatMulMatchesSgemm runs under both).
type Tensor struct {
	shape []int
	data  []float32
}

// tensorBackend names the backend in use (logs, tests, docs).
const tensorBackend = "gonum (nogorgonia build)"

// newTensor returns a zeroed float32 tensor of the given shape.
func newTensor(shape ...int) *Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return &Tensor{shape: slices.Clone(shape), data: make([]float32, n)}
}

// dense wraps a slice of length r*c as an r x c tensor without copying.
func dense(buf []float32, r, c int) *Tensor {
	return &Tensor{shape: []int{r, c}, data: buf[:r*c]}
}

func f32(t *Tensor) []float32 { return t.data }

func dims(t *Tensor) []int { return t.shape }

func cloneTensor(t *Tensor) *Tensor {
	return &Tensor{shape: slices.Clone(t.shape), data: slices.Clone(t.data)}
}

// matmul computes a (r x k) times b (k x c) into a new r x c tensor; when
// ta/tb are set, a/b are used transposed. Row-major, so the leading
// dimension of each operand is its stored column count.
func matmul(a, b *Tensor, ta, tb bool) *Tensor {
	if len(a.shape) != 2 || len(b.shape) != 2 {
		panic(fmt.Sprintf("policy: matmul %v x %v: not matrices", a.shape, b.shape))
	}
	tA, tB := blas.NoTrans, blas.NoTrans
	m, k := a.shape[0], a.shape[1]
	if ta {
		tA, m, k = blas.Trans, k, m
	}
	kb, n := b.shape[0], b.shape[1]
	if tb {
		tB, kb, n = blas.Trans, n, kb
	}
	if k != kb {
		// shapes are checked by the callers; a mismatch is a programming error
		panic(fmt.Sprintf("policy: matmul %v x %v (transposed %v, %v): inner dimensions differ", a.shape, b.shape, ta, tb))
	}
	out := newTensor(m, n)
	gonum.Implementation{}.Sgemm(tA, tB, m, n, k, 1, a.data, a.shape[1], b.data, b.shape[1], 0, out.data, n)
	return out
}
