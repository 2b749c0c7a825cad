package nn

import (
	"math/rand/v2"
	"testing"

	"github.com/edgesched/edgesched/policy"
)

// BenchmarkForward scores 1,000 candidate nodes in one batch with the
// float32 network (26 -> 32 -> 32 -> 1 plus the critic): the reference the
// int8 kernels are measured against. ns/node is the per-node cost.
func BenchmarkForward(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	net, err := NewNet(policy.NumFeatures, 32, 32, 32, rng)
	if err != nil {
		b.Fatal(err)
	}
	const n = 1000
	x := make([]float32, n*policy.NumFeatures)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for b.Loop() {
		if _, _, err := net.Forward(x, n); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/node")
}
