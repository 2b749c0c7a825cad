package int8net

import (
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
)

// BenchmarkScore1000 scores 1,000 candidate nodes of one pod, float32
// (gorgonia) against int8; ns/node is the per-node cost.
func BenchmarkScore1000(b *testing.B) {
	m := randomModel(b, 32, 32, 1)
	const n = 1000
	rows := benchRows(n, 2)
	_, q := quantized(b, m, 5000, 3)
	fs, err := nn.NewFloatScorer(m)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		sc   policy.Scorer
	}{{"float32", fs}, {"int8", q.Scorer()}} {
		b.Run(c.name, func(b *testing.B) {
			out := make([]float32, n)
			for b.Loop() {
				if err := c.sc.Scores(rows, n, out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/node")
		})
	}
}

// BenchmarkScore1000Kernels is BenchmarkScore1000's int8 case with each
// kernel this build has: the portable packed kernel, AVX2 (8 nodes a
// vector) and, on CPUs that have it, AVX-512 (16).
func BenchmarkScore1000Kernels(b *testing.B) {
	m := randomModel(b, 32, 32, 1)
	const k = 1000
	rows := benchRows(k, 2)
	_, n := quantized(b, m, 5000, 3)
	for _, kernel := range Kernels() {
		b.Run(kernel, func(b *testing.B) {
			sc, err := n.ScorerWith(kernel)
			if err != nil {
				b.Fatal(err)
			}
			out := make([]float32, k)
			for b.Loop() {
				if err := sc.Scores(rows, k, out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*k), "ns/node")
		})
	}
}
