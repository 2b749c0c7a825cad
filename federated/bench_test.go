package federated

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

const benchDim = 50_000

// benchPool returns k distinct contributions of benchDim parameters; the
// benchmarks cycle through them so that 1,000 contributions do not need
// 200 MB of input.
func benchPool(k int) []Contribution {
	rng := rand.New(rand.NewPCG(77, 1))
	cs := make([]Contribution, k)
	for j := range cs {
		d := make([]float32, benchDim)
		for i := range d {
			d[i] = float32(0.01 * rng.NormFloat64())
		}
		cs[j] = Contribution{Site: fmt.Sprintf("site-%d", j), Delta: d, Weight: float64(1 + j)}
	}
	return cs
}

func runRule(b *testing.B, c AggregatorConfig, pool []Contribution, n int) Result {
	a, err := NewAggregator(c, benchDim)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		if err := a.Add(pool[i%len(pool)]); err != nil {
			b.Fatal(err)
		}
	}
	r, err := a.Result()
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkFedAvg50k streams 1,000 contributions of 50,000 parameters
// through fedavg (validation, weighted float64 accumulation, result) and
// reports contributions/s and MB/s of float32 deltas consumed.
func BenchmarkFedAvg50k(b *testing.B) {
	const n = 1000
	pool := benchPool(8)
	b.ReportAllocs()
	for b.Loop() {
		runRule(b, DefaultAggregatorConfig(), pool, n)
	}
	perSec := float64(b.N*n) / b.Elapsed().Seconds()
	b.ReportMetric(perSec, "contributions/s")
	b.ReportMetric(perSec*benchDim*4/1e6, "MB/s")
}

// BenchmarkMedian50k: the coordinate-wise median of 100 contributions of
// 50,000 parameters (copies kept, 50,000 sorts of 100 values).
func BenchmarkMedian50k(b *testing.B) {
	const n = 100
	pool := benchPool(8)
	c := DefaultAggregatorConfig()
	c.Rule = RuleMedian
	b.ReportAllocs()
	for b.Loop() {
		runRule(b, c, pool, n)
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "contributions/s")
}

// BenchmarkKrum50k: Krum over 30 contributions of 50,000 parameters (435
// squared distances).
func BenchmarkKrum50k(b *testing.B) {
	const n = 30
	pool := benchPool(8)
	c := DefaultAggregatorConfig()
	c.Rule, c.Byzantine = RuleKrum, 5
	b.ReportAllocs()
	for b.Loop() {
		runRule(b, c, pool, n)
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "contributions/s")
}

// holdAll is the naive aggregator the streaming one is compared with: it
// keeps a copy of every contribution and averages them at the end.
type holdAll struct {
	rows    [][]float32
	weights []float64
}

func (h *holdAll) add(c Contribution) {
	h.rows = append(h.rows, append([]float32(nil), c.Delta...))
	h.weights = append(h.weights, c.Weight)
}

func (h *holdAll) result() []float32 {
	sum := make([]float64, len(h.rows[0]))
	var w float64
	for j, r := range h.rows {
		for i, v := range r {
			sum[i] += h.weights[j] * float64(v)
		}
		w += h.weights[j]
	}
	out := make([]float32, len(sum))
	for i, s := range sum {
		out[i] = float32(s / w)
	}
	return out
}

// BenchmarkPeakMemory compares the heap held while aggregating 1,000
// contributions of 50,000 parameters: fedavg's running sum against an
// aggregator that holds every contribution (1,000 x 200 kB = 200 MB).
// peak-MB is the largest HeapInuse above the pre-run baseline, sampled
// every 50 adds and after the result.
func BenchmarkPeakMemory(b *testing.B) {
	const n = 1000
	pool := benchPool(8)
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	for _, tc := range []struct {
		name string
		run  func(sample func())
	}{
		{"streaming-fedavg", func(sample func()) {
			a, err := NewAggregator(DefaultAggregatorConfig(), benchDim)
			if err != nil {
				b.Fatal(err)
			}
			for i := range n {
				if err := a.Add(pool[i%len(pool)]); err != nil {
					b.Fatal(err)
				}
				if i%50 == 49 {
					sample()
				}
			}
			if _, err := a.Result(); err != nil {
				b.Fatal(err)
			}
			sample()
			runtime.KeepAlive(a)
		}},
		{"hold-all", func(sample func()) {
			var h holdAll
			for i := range n {
				h.add(pool[i%len(pool)])
				if i%50 == 49 {
					sample()
				}
			}
			h.result()
			sample()
			runtime.KeepAlive(&h)
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var peak float64
			for b.Loop() {
				runtime.GC()
				base := heap()
				var top uint64
				tc.run(func() { top = max(top, heap()) })
				peak = max(peak, float64(top-min(top, base))/1e6)
			}
			b.ReportMetric(peak, "peak-MB")
		})
	}
}
