package int8net

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/sage"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/scenario"
)

// TestScorerWith: every kernel this build lists, and Scorer (the
// fastest), score exactly as the plain one-product-at-a-time path does;
// Kernel is the last listed; an unknown or unavailable kernel is refused
// with ErrKernel naming what runs.
func TestScorerWith(t *testing.T) {
	m := randomModel(t, 32, 32, 5)
	_, n := quantized(t, m, 2000, 6)
	ks := Kernels()
	if ks[0] != KernelPortable || Kernel() != ks[len(ks)-1] {
		t.Fatalf("Kernels() = %v, Kernel() = %q", ks, Kernel())
	}
	const k = 77
	rows := benchRows(k, 9)
	want := make([]float32, k)
	ref := n.Scorer()
	F, P := policy.NumFeatures, policy.NumPodFeatures
	for i := range k {
		row := rows[i*F : (i+1)*F]
		ref.podShare(row)
		n.quantizeInput(row, ref.q, P, F)
		want[i] = ref.forwardPlain()
	}
	scorers := map[string]*Scorer{"Scorer()": n.Scorer()}
	for _, kernel := range ks {
		sc, err := n.ScorerWith(kernel)
		if err != nil {
			t.Fatal(err)
		}
		scorers[kernel] = sc
	}
	for kernel, sc := range scorers {
		got := make([]float32, k)
		if err := sc.Scores(rows, k, got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s row %d: %v, plain path %v", kernel, i, got[i], want[i])
			}
		}
	}
	for _, bad := range []string{"sse", "AVX2", ""} {
		if _, err := n.ScorerWith(bad); !errors.Is(err, ErrKernel) || !strings.Contains(err.Error(), KernelPortable) {
			t.Errorf("ScorerWith(%q) = %v, want ErrKernel naming the kernels that run", bad, err)
		}
	}
}

// TestRequant: worked examples of the integer requantization.
func TestRequant(t *testing.T) {
	for _, tc := range []struct {
		name string
		acc  int32
		m    int32
		s    uint8
		want uint8
	}{
		{"negative is ReLU'd", -500, 3, 2, 0},
		{"zero", 0, 3, 2, 0},
		// 10 * 3 / 4 = 7.5, rounds half up to 8
		{"half rounds up", 10, 3, 2, 8},
		// 9 * 3 / 4 = 6.75 -> 7
		{"rounds to nearest", 9, 3, 2, 7},
		// 1000 * 1 / 2 = 500 saturates at 255
		{"saturates", 1000, 1, 1, 255},
		{"no shift", 17, 5, 0, 85},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := requant(tc.acc, tc.m, tc.s); got != tc.want {
				t.Fatalf("requant(%d, %d, %d) = %d, want %d", tc.acc, tc.m, tc.s, got, tc.want)
			}
		})
	}
}

// requantBranchy is requant as first written, with branches: the
// reference the branch-free form must equal.
func requantBranchy(acc, m int32, s uint8) uint8 {
	if acc <= 0 {
		return 0
	}
	p := acc * m
	if s > 0 {
		p = (p + 1<<(s-1)) >> s
	}
	if p > actMax {
		return actMax
	}
	return uint8(p)
}

// TestRequantMatchesBranchy: over the whole domain multipliers produces
// (s in 0..30, m >= 1, |acc| * m <= 2^30), the branch-free requant equals
// the branchy one: edges of that domain, then seeded random draws.
func TestRequantMatchesBranchy(t *testing.T) {
	check := func(acc, m int32, s uint8) {
		t.Helper()
		if got, want := requant(acc, m, s), requantBranchy(acc, m, s); got != want {
			t.Fatalf("requant(%d, %d, %d) = %d, the branchy form %d", acc, m, s, got, want)
		}
	}
	for s := range uint8(31) {
		for _, m := range []int32{1, 2, 255, 1 << 15, 1 << 30} {
			top := int32((int64(1) << 30) / int64(m))
			for _, acc := range []int32{-top, -1, 0, 1, 2, top / 2, top - 1, top} {
				check(acc, m, s)
			}
		}
	}
	const seed = 20261130
	rng := rand.New(rand.NewPCG(seed, 7))
	for range 200000 {
		s := uint8(rng.IntN(31))
		m := int32(1 + rng.IntN(1<<30))
		top := (int64(1) << 30) / int64(m)
		acc := int32(rng.Int64N(2*top+1) - top)
		check(acc, m, s)
	}
}

// TestSWARIsExact: the packed dot products equal the plain ones, bit for
// bit, including the extremes of every range.
func TestSWARIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, tc := range []struct {
		name       string
		fanIn, out int
		off        int64
	}{{"int8 inputs, 19 x 32", 19, 32, inMax}, {"u8 inputs, 32 x 32", 32, 32, 0}, {"u8 inputs, 64 x 7 (two lanes)", 64, 7, 0}, {"one input", 1, 5, inMax}} {
		t.Run(tc.name, func(t *testing.T) {
			for trial := range 200 {
				w := make([]int8, tc.fanIn*tc.out)
				for i := range w {
					switch trial % 3 {
					case 0:
						w[i] = int8(rng.IntN(255) - 127)
					case 1:
						w[i] = 127
					default:
						w[i] = -127
					}
				}
				sw := newSWAR(w, tc.fanIn, tc.out, tc.off)
				u := make([]uint64, tc.fanIn)
				x := make([]int64, tc.fanIn)
				var su int64
				for k := range u {
					hi := int64(255)
					if tc.off > 0 {
						hi = 254
					}
					v := rng.Int64N(hi + 1)
					if trial%5 == 0 {
						v = hi
					}
					u[k], x[k] = uint64(v), v-tc.off
					su += v
				}
				got := make([]int32, tc.out)
				sw.dots(u, su, got)
				for c := range tc.out {
					var want int64
					for k := range tc.fanIn {
						want += x[k] * int64(w[c*tc.fanIn+k])
					}
					if int64(got[c]) != want {
						t.Fatalf("trial %d channel %d: packed %d, plain %d", trial, c, got[c], want)
					}
				}
			}
		})
	}
}

// TestInt8TracksFloat quantizes one random network both ways, calibrated
// on 20,000 random rows, and scores 2,000 other rows: the int8 error is a
// few percent of the score spread at most, adaptive rounding's is below
// nearest rounding's (it fits the calibration rows, and these rows come
// from the same distribution), nearest rounding keeps every weight within
// half a level of its float value and adaptive within one, and the packed
// kernel equals the plain one.
func TestInt8TracksFloat(t *testing.T) {
	m := randomModel(t, 32, 32, 11)
	const k = 2000
	x := benchRows(k, 13)
	ref, _ := quant.ReferenceScores(m.Float(), x, k)
	rel := map[string]float64{}
	for _, tc := range []struct {
		rounding string
		// how far a dequantized weight may be from the float one, in levels
		within float64
	}{{quant.RoundNearest, 0.5}, {quant.RoundAdaptive, 1}} {
		opt := quant.DefaultCalibration()
		opt.Rounding = tc.rounding
		a, err := quant.Quantize(m.Float(), benchRows(20000, 12), opt, quant.Info{})
		if err != nil {
			t.Fatal(err)
		}
		n, err := New(a)
		if err != nil {
			t.Fatal(err)
		}
		sc := n.Scorer()
		got := make([]float32, k)
		if err := sc.Scores(x, k, got); err != nil {
			t.Fatal(err)
		}
		var mean, sq, errSq float64
		for i := range k {
			mean += ref[i] / k
		}
		for i := range k {
			sq += (ref[i] - mean) * (ref[i] - mean) / k
			errSq += (float64(got[i]) - ref[i]) * (float64(got[i]) - ref[i]) / k
		}
		rel[tc.rounding] = math.Sqrt(errSq / sq)
		t.Logf("%s rounding: int8 error %.4f of the score spread", tc.rounding, rel[tc.rounding])
		// int8 noise: a few tenths of a percent of the spread per layer.
		if rel[tc.rounding] > 0.05 {
			t.Fatalf("%s rounding: int8 error is %.3f of the score spread", tc.rounding, rel[tc.rounding])
		}
		for i := range 50 {
			row := x[i*policy.NumFeatures : (i+1)*policy.NumFeatures]
			sc.podShare(row)
			n.quantizeInput(row, sc.q, policy.NumPodFeatures, policy.NumFeatures)
			if p, q := sc.forward(), sc.forwardPlain(); p != q {
				t.Fatalf("%s rounding, row %d: packed %v, plain %v", tc.rounding, i, p, q)
			}
		}
		// Weight round trip: dequantized w2 is within half a level
		// (nearest) or one level (adaptive) of the float weight, with the
		// activation scale folded in.
		w2 := m.Net.Params()[2].Values()
		q2, s2, a1s := a.Tensor("w2").I8, a.Tensor("w2_scale").F32, a.Tensor("a1_scale").F32
		H1, H2 := n.H1, n.H2
		for c := range H2 {
			for kk := range H1 {
				want := float64(a1s[kk]) * float64(w2[kk*H2+c])
				got := float64(q2[c*H1+kk]) * float64(s2[c])
				if math.Abs(got-want) > float64(s2[c])*tc.within*1.0001 {
					t.Fatalf("%s rounding: w2[%d][%d]: %v dequantizes to %v (level %v)", tc.rounding, kk, c, want, got, s2[c])
				}
			}
		}
	}
	if rel[quant.RoundAdaptive] >= rel[quant.RoundNearest] {
		t.Errorf("adaptive rounding's error %.4f is not below nearest rounding's %.4f", rel[quant.RoundAdaptive], rel[quant.RoundNearest])
	}
}

// TestInt8PolicyInSimulator: calibration rows come from the float
// policy's own run, and the int8 policy made from them runs in the
// simulator (quant/agreement measures how often the two agree).
func TestInt8PolicyInSimulator(t *testing.T) {
	l, err := scenario.Load("builtin:factory-vision")
	if err != nil {
		t.Fatal(err)
	}
	env, err := sage.NewEnv(l.Cluster, l.Workload)
	if err != nil {
		t.Fatal(err)
	}
	m := randomModel(t, 32, 32, 21)
	rows, seen, err := quant.CollectRows(context.Background(), env, m.Float(), []engine.RunConfig{engine.DefaultRunConfig(engine.Replay)}, 5000, 1)
	if err != nil || seen == 0 || len(rows) != min(seen, 5000)*policy.NumFeatures {
		t.Fatalf("CollectRows: %d rows of %d seen, %v", len(rows)/policy.NumFeatures, seen, err)
	}
	if _, _, err := quant.CollectRows(context.Background(), env, &policy.FloatModel{}, []engine.RunConfig{engine.DefaultRunConfig(engine.Replay)}, 10, 1); !errors.Is(err, quant.ErrQuant) {
		t.Fatalf("CollectRows without a float network: %v", err)
	}
	a, err := quant.Quantize(m.Float(), rows, quant.DefaultCalibration(), quant.Info{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(a)
	if err != nil {
		t.Fatal(err)
	}
	res, err := engine.Run(context.Background(), env, Factory("int8", n), engine.DefaultRunConfig(engine.Replay))
	if err != nil {
		t.Fatal(err)
	}
	if res.Decisions == 0 {
		t.Fatalf("the int8 policy made no decision: %+v", res)
	}
}

// TestAdaptiveRoundingHonoursBounds: for a model with input bounds the
// float reference holds every input within them, and so does the fit of
// adaptive rounding: calibrated on rows a third of whose node features
// lie beyond the bounds, its int8 scores on rows within them are nearer
// the float ones than nearest rounding's (fitting the raw rows against
// the clamped targets made them several times worse).
func TestAdaptiveRoundingHonoursBounds(t *testing.T) {
	m := randomModel(t, 32, 32, 31)
	const F = policy.NumFeatures
	m.Schema.Lo, m.Schema.Hi = make([]float32, F), make([]float32, F)
	for j := range F {
		m.Schema.Lo[j], m.Schema.Hi[j] = m.Schema.Mean[j]-m.Schema.Std[j], m.Schema.Mean[j]+m.Schema.Std[j]
	}
	const k = 2000
	x := benchRows(k, 33)
	for i := range k {
		m.Schema.Clamp(x[i*F : (i+1)*F])
	}
	ref, err := quant.ReferenceScores(m.Float(), x, k)
	if err != nil {
		t.Fatal(err)
	}
	rmse := map[string]float64{}
	for _, rounding := range []string{quant.RoundNearest, quant.RoundAdaptive} {
		opt := quant.DefaultCalibration()
		opt.Rounding = rounding
		a, err := quant.Quantize(m.Float(), benchRows(20000, 34), opt, quant.Info{})
		if err != nil {
			t.Fatal(err)
		}
		n, err := New(a)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, k)
		if err := n.Scorer().Scores(x, k, got); err != nil {
			t.Fatal(err)
		}
		var sq float64
		for i := range k {
			sq += (float64(got[i]) - ref[i]) * (float64(got[i]) - ref[i]) / k
		}
		rmse[rounding] = math.Sqrt(sq)
	}
	t.Logf("int8 score error on rows within the bounds: nearest %.4f, adaptive %.4f", rmse[quant.RoundNearest], rmse[quant.RoundAdaptive])
	if !(rmse[quant.RoundAdaptive] < rmse[quant.RoundNearest]) {
		t.Errorf("adaptive rounding's error %.4f is not below nearest rounding's %.4f", rmse[quant.RoundAdaptive], rmse[quant.RoundNearest])
	}
}
