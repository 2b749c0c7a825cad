package nn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// TestMatMulMatchesSgemm checks the backend's matrix product bit for bit
// against gonum's Sgemm called directly on plain row-major slices. The
// default build (gorgonia.org/tensor) and the nogorgonia build (a direct
// Sgemm call) both run it, so passing under both tags is what makes their
// networks — forward, backward, training — compute the same bits: every
// other step of Net is shared code. The shapes are the network's own
// uses: candidates x features times features x hidden, the transposed
// products of Backward, and a single output column.
func TestMatMulMatchesSgemm(t *testing.T) {
	t.Logf("tensor backend: %s", tensorBackend)
	const seed = 20261130
	rng := rand.New(rand.NewPCG(seed, 1))
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	for _, tc := range []struct {
		name   string
		m, k   int // op(a) is m x k
		n      int // op(b) is k x n
		ta, tb bool
	}{
		{"forward layer", 37, 23, 64, false, false},
		{"output column", 37, 64, 1, false, false},
		{"single candidate", 1, 23, 64, false, false},
		{"weight gradient (a transposed)", 64, 37, 64, true, false},
		{"input gradient (b transposed)", 37, 64, 64, false, true},
		{"both transposed", 5, 7, 3, true, true},
		{"large (gonum's parallel blocks)", 300, 64, 130, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// stored shapes: a is m x k, or k x m when used transposed
			ar, ac := tc.m, tc.k
			if tc.ta {
				ar, ac = tc.k, tc.m
			}
			br, bc := tc.k, tc.n
			if tc.tb {
				br, bc = tc.n, tc.k
			}
			a, b := fill(ar*ac), fill(br*bc)
			aCopy, bCopy := slices.Clone(a), slices.Clone(b)

			got := matmul(dense(a, ar, ac), dense(b, br, bc), tc.ta, tc.tb)

			if d := dims(got); !slices.Equal(d, []int{tc.m, tc.n}) {
				t.Fatalf("result shape %v, want [%d %d]", d, tc.m, tc.n)
			}
			tA, tB := blas.NoTrans, blas.NoTrans
			if tc.ta {
				tA = blas.Trans
			}
			if tc.tb {
				tB = blas.Trans
			}
			want := make([]float32, tc.m*tc.n)
			gonum.Implementation{}.Sgemm(tA, tB, tc.m, tc.n, tc.k, 1, aCopy, ac, bCopy, bc, 0, want, tc.n)
			for i, w := range want {
				if g := f32(got)[i]; math.Float32bits(g) != math.Float32bits(w) {
					t.Fatalf("element %d: %v (bits %08x), Sgemm %v (bits %08x)", i, g, math.Float32bits(g), w, math.Float32bits(w))
				}
			}
			// an independent float64 product, so a wrong Sgemm call
			// (swapped operands, wrong leading dimension) cannot pass
			// by agreeing with itself
			for i := range tc.m {
				for j := range tc.n {
					var s float64
					for l := range tc.k {
						ai, bi := i*ac+l, l*bc+j
						if tc.ta {
							ai = l*ac + i
						}
						if tc.tb {
							bi = j*bc + l
						}
						av, bv := a[ai], b[bi]
						s += float64(av) * float64(bv)
					}
					if g := float64(f32(got)[i*tc.n+j]); math.Abs(g-s) > 1e-4*(1+math.Abs(s)) {
						t.Fatalf("[%d,%d] = %v, float64 reference %v", i, j, g, s)
					}
				}
			}
			if !slices.Equal(a, aCopy) || !slices.Equal(b, bCopy) {
				t.Fatal("matmul modified its operands")
			}
			// a transposed operand is left as it was (gorgonia's T/UT)
			if d := dims(dense(a, ar, ac)); !slices.Equal(d, []int{ar, ac}) {
				t.Fatalf("operand shape %v after matmul", d)
			}
		})
	}
}

func TestParamAccessors(t *testing.T) {
	net, err := NewNet(4, 3, 2, 5, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	want := policy.Shapes(4, 3, 2, 5)
	total := 0
	for i, p := range net.Params() {
		if !slices.Equal(p.Dims(), want[i]) {
			t.Errorf("%s: dims %v, want %v", p.Name, p.Dims(), want[i])
		}
		total += len(p.Values())
	}
	// 4*3+3 + 3*2+2 + 2*1+1 + 4*5+5 + 5*1+1 = 15+8+3+25+6 = 57
	if total != 57 || net.NumParams() != 57 {
		t.Errorf("values %d, NumParams %d, want 57", total, net.NumParams())
	}
	// Values shares storage with the network
	net.Params()[0].Values()[0] = 42
	if f32(net.W1)[0] != 42 {
		t.Error("Values does not share the parameter's storage")
	}
}
