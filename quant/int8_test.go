package quant

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/sage"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/scenario"
)

// TestFloatPathMatchesReference is the cross-check of the float model: the
// gorgonia path (nn.Net) and the independent float64 loops agree to
// 1e-5 (relative to the score's magnitude) on random rows.
func TestFloatPathMatchesReference(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		m := randomModel(t, 32, 32, seed)
		const k = 200
		x := benchRows(k, seed)
		fs, err := nn.NewFloatScorer(m)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, k)
		if err := fs.Scores(x, k, got); err != nil {
			t.Fatal(err)
		}
		want, err := ReferenceScores(m.Float(), x, k)
		if err != nil {
			t.Fatal(err)
		}
		for i := range k {
			if d := math.Abs(float64(got[i]) - want[i]); d > 1e-5*math.Max(1, math.Abs(want[i])) {
				t.Fatalf("seed %d row %d: gorgonia %v, reference %v", seed, i, got[i], want[i])
			}
		}
	}
}

// TestQuantize1 holds quantize1's magic-number rounding equal to clamping
// and math.RoundToEven in float64: on named edge cases (ties round to
// even: 2.5 -> 2, 3.5 -> 4, -2.5 -> -2; the clamp at ±127) and on a
// million random values of every magnitude; a third of them under input
// bounds (inputScale), where the reference holds the raw value within
// them first, as policy.Schema.Bound does.
func TestQuantize1(t *testing.T) {
	ref := func(x, mean, inv float32) int8 {
		v := float64(float32((x - mean) * inv))
		return int8(max(-inMax, min(inMax, math.RoundToEven(v))))
	}
	for _, tc := range []struct {
		name string
		x    float32
		want int8
	}{
		{"tie to even down", 2.5, 2},
		{"tie to even up", 3.5, 4},
		{"negative tie", -2.5, -2},
		{"just below a tie", 2.4999998, 2},
		{"zero", 0, 0},
		{"negative zero", float32(math.Copysign(0, -1)), 0},
		{"126.5 ties to 126", 126.5, 126},
		{"126.6 rounds up to 127", 126.6, 127},
		{"clamped above", 127.5, 127},
		{"clamped below", -1e9, -127},
		{"+Inf", float32(math.Inf(1)), 127},
		{"-Inf", float32(math.Inf(-1)), -127},
		{"NaN", float32(math.NaN()), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quantize1(tc.x, 0, 1, -inMax, inMax); got != tc.want {
				t.Errorf("quantize1(%v) = %d, want %d", tc.x, got, tc.want)
			}
			if !math.IsInf(float64(tc.x), 0) && !math.IsNaN(float64(tc.x)) {
				if r := ref(tc.x, 0, 1); r != tc.want {
					t.Errorf("reference(%v) = %d, want %d", tc.x, r, tc.want)
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for i := range 1_000_000 {
		x := float32(rng.NormFloat64() * math.Pow(10, float64(i%4)))
		mean, inv := float32(rng.NormFloat64()), float32(rng.ExpFloat64()*20)
		if i%7 == 0 {
			x = float32(math.Round(float64(x)*2)) / 2 // exact ties
			mean, inv = 0, 1
		}
		if i%3 == 1 { // bounds about the mean or to one side, often beyond ±127 levels
			a := mean + float32((rng.ExpFloat64()*-100+float64(rng.IntN(3)-1)*60)/float64(inv))
			b := a + float32(rng.ExpFloat64()*100/float64(inv))
			s := policy.Schema{Mean: []float32{mean}, Std: []float32{1}, Lo: []float32{a}, Hi: []float32{b}}
			m, iv, lo, hi := inputScale(s, []float32{1 / inv})
			if got, want := quantize1(x, m[0], iv[0], lo[0], hi[0]), ref(min(max(x, a), b), m[0], iv[0]); got != want {
				t.Fatalf("quantize1(%v, %v, %v) within [%v, %v] = %d, reference %d", x, mean, iv[0], a, b, got, want)
			}
			continue
		}
		if got, want := quantize1(x, mean, inv, -inMax, inMax), ref(x, mean, inv); got != want {
			t.Fatalf("quantize1(%v, %v, %v) = %d, reference %d", x, mean, inv, got, want)
		}
	}
}

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
	scorers := map[string]*Int8Scorer{"Scorer()": n.Scorer()}
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

// TestMultipliersNeverOverflow: for every channel, the largest accumulator
// times its multiplier plus the rounding term stays inside int32, and the
// multiplier approximates the real ratio to 1/1000.
func TestMultipliersNeverOverflow(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for trial := range 50 {
		fanIn, outs := 1+rng.IntN(64), 1+rng.IntN(16)
		w := make([]int8, fanIn*outs)
		for i := range w {
			w[i] = int8(rng.IntN(255) - 127)
		}
		b := make([]int32, outs)
		ws, os := make([]float32, outs), make([]float32, outs)
		for c := range outs {
			b[c] = int32(rng.IntN(20001) - 10000)
			ws[c] = float32(math.Exp(rng.NormFloat64() * 3))
			os[c] = float32(math.Exp(rng.NormFloat64() * 3))
		}
		m, s, err := multipliers(w, b, fanIn, actMax, ws, os)
		if err != nil {
			continue // a ratio beyond int32 reach is refused, not wrapped
		}
		for c := range outs {
			var maxAcc int64
			for _, v := range w[c*fanIn : (c+1)*fanIn] {
				maxAcc += actMax * int64(abs8(v))
			}
			maxAcc += int64(math.Abs(float64(b[c])))
			if p := maxAcc*int64(m[c]) + (int64(1)<<s[c])>>1; p > math.MaxInt32 {
				t.Fatalf("trial %d channel %d: %d * %d overflows", trial, c, maxAcc, m[c])
			}
			M := float64(ws[c]) / float64(os[c])
			if M < actMax && s[c] > 0 && math.Abs(float64(m[c])/math.Ldexp(1, int(s[c]))-M) > M/1000+math.Ldexp(1, -int(s[c])) {
				t.Fatalf("trial %d channel %d: %d/2^%d approximates %v badly", trial, c, m[c], s[c], M)
			}
		}
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
	ref, _ := ReferenceScores(m.Float(), x, k)
	rel := map[string]float64{}
	for _, tc := range []struct {
		rounding string
		// how far a dequantized weight may be from the float one, in levels
		within float64
	}{{RoundNearest, 0.5}, {RoundAdaptive, 1}} {
		opt := DefaultCalibration()
		opt.Rounding = tc.rounding
		a, err := Quantize(m.Float(), benchRows(20000, 12), opt, Info{})
		if err != nil {
			t.Fatal(err)
		}
		n, err := NewInt8Net(a)
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
	if rel[RoundAdaptive] >= rel[RoundNearest] {
		t.Errorf("adaptive rounding's error %.4f is not below nearest rounding's %.4f", rel[RoundAdaptive], rel[RoundNearest])
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
	rows, seen, err := CollectRows(context.Background(), env, m.Float(), []engine.RunConfig{engine.DefaultRunConfig(engine.Replay)}, 5000, 1)
	if err != nil || seen == 0 || len(rows) != min(seen, 5000)*policy.NumFeatures {
		t.Fatalf("CollectRows: %d rows of %d seen, %v", len(rows)/policy.NumFeatures, seen, err)
	}
	if _, _, err := CollectRows(context.Background(), env, &policy.FloatModel{}, []engine.RunConfig{engine.DefaultRunConfig(engine.Replay)}, 10, 1); !errors.Is(err, ErrQuant) {
		t.Fatalf("CollectRows without a float network: %v", err)
	}
	a, err := Quantize(m.Float(), rows, DefaultCalibration(), Info{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := NewInt8Net(a)
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

// TestConstantFeatures: a feature with one value on every row is named; a
// feature that varies on one row only is not.
func TestConstantFeatures(t *testing.T) {
	const F = policy.NumFeatures
	names := policy.NewSchema().Names
	rows := make([]float32, 3*F)
	for i := range rows {
		rows[i] = float32(i % F) // every feature constant (its own index)
	}
	if got := ConstantFeatures(rows); len(got) != F {
		t.Fatalf("all constant: %d names, want %d", len(got), F)
	}
	rows[2*F+3] = -1 // feature 3 differs on the last row
	rows[F+5] = 0.5  // feature 5 on the middle one
	got := ConstantFeatures(rows)
	if len(got) != F-2 || slices.Contains(got, names[3]) || slices.Contains(got, names[5]) || !slices.Contains(got, names[4]) {
		t.Fatalf("constant %v, want all but %s and %s", got, names[3], names[5])
	}
	if got := ConstantFeatures(rows[:F-1]); got != nil {
		t.Fatalf("less than a row: %v", got)
	}
}

// TestTanhRefused: a network with a Tanh hidden layer is refused by
// Quantize (ErrQuant, naming the activations and the reason) and by
// FromModel (ErrArtifact): the int8 scheme keeps unsigned 8-bit values
// after each ReLU, and artifacts lead there. The same network with ReLU
// quantizes (the refusal is the activation's, nothing else).
func TestTanhRefused(t *testing.T) {
	for _, act := range [][2]nn.Activation{{nn.Tanh, nn.Tanh}, {nn.ReLU, nn.Tanh}} {
		m := randomModel(t, 16, 16, 4)
		m.Net.Act = act
		_, err := Quantize(m.Float(), benchRows(200, 4), DefaultCalibration(), Info{})
		want := "hidden layers are " + act[0].String() + " and " + act[1].String() + ": the int8 path runs ReLU networks only"
		if !errors.Is(err, ErrQuant) || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: Quantize: %v, want ErrQuant naming %q", act, err, want)
		}
		if _, err := FromModel(m.Float(), Info{}); !errors.Is(err, ErrArtifact) || !strings.Contains(err.Error(), "artifacts carry ReLU networks only") {
			t.Errorf("%v: FromModel: %v, want ErrArtifact", act, err)
		}
		m.Net.Act = [2]nn.Activation{}
		if _, err := Quantize(m.Float(), benchRows(200, 4), DefaultCalibration(), Info{}); err != nil {
			t.Errorf("the ReLU twin: %v", err)
		}
	}
}

// TestAdaptiveRoundingSkipsNaNRows: a calibration row the float network
// scores as NaN is left out of the fit instead of turning every
// residual of the layer into NaN (which would leave nearest rounding in
// place under an artifact that says adaptive): with one such row among
// 3,000 the weights are those fitted on the other 2,999.
func TestAdaptiveRoundingSkipsNaNRows(t *testing.T) {
	m := randomModel(t, 16, 16, 21)
	F := policy.NumFeatures
	rows := benchRows(3000, 22)
	bad := append([]float32(nil), rows...)
	bad[1500*F+policy.NumPodFeatures] = float32(math.NaN())
	clean := append(append([]float32(nil), rows[:1500*F]...), rows[1501*F:]...)
	quantize := func(rows []float32, rounding string) *Artifact {
		opt := DefaultCalibration()
		opt.Rounding = rounding
		a, err := Quantize(m.Float(), rows, opt, Info{})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	near, withNaN, without := quantize(bad, RoundNearest), quantize(bad, RoundAdaptive), quantize(clean, RoundAdaptive)
	if slices.Equal(near.Tensor("w1").I8, withNaN.Tensor("w1").I8) {
		t.Fatal("with a NaN row, adaptive rounding left the first layer as nearest rounding has it")
	}
	// the same rows are fitted either way (the NaN row's other values
	// are nowhere near a calibration extreme here, so the scales agree)
	for _, name := range []string{"in_scale", "w1", "b1", "w2", "b2", "w3", "b3"} {
		a, b := withNaN.Tensor(name), without.Tensor(name)
		if !slices.Equal(a.F32, b.F32) || !slices.Equal(a.I8, b.I8) || !slices.Equal(a.I32, b.I32) {
			t.Errorf("%s differs between the fit with the NaN row and the fit without it", name)
		}
	}
}

// TestCalibrationOptions: the zero Rounding is adaptive, as the default
// is, and the header's calibration string says which rounding ran.
func TestCalibrationOptions(t *testing.T) {
	for _, tc := range []struct {
		opt  CalibrationOptions
		want string // String(), or the error's text
	}{
		{DefaultCalibration(), "percentile:99.99,rounding:adaptive"},
		{CalibrationOptions{Method: "minmax"}, "minmax,rounding:adaptive"},
		{CalibrationOptions{Method: "percentile", Percentile: 99.9, Rounding: RoundNearest}, "percentile:99.9"},
		{CalibrationOptions{Method: "minmax", Rounding: "up"}, `rounding "up" (want nearest or adaptive)`},
		{CalibrationOptions{Method: "percentile", Percentile: 40}, `calibration "percentile" at 40`},
	} {
		err := tc.opt.Validate()
		got := tc.opt.String()
		if err != nil {
			got = err.Error()
			if !errors.Is(err, ErrQuant) {
				t.Errorf("%+v: error %v does not wrap ErrQuant", tc.opt, err)
			}
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%+v: %q, want %q", tc.opt, got, tc.want)
		}
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
	ref, err := ReferenceScores(m.Float(), x, k)
	if err != nil {
		t.Fatal(err)
	}
	rmse := map[string]float64{}
	for _, rounding := range []string{RoundNearest, RoundAdaptive} {
		opt := DefaultCalibration()
		opt.Rounding = rounding
		a, err := Quantize(m.Float(), benchRows(20000, 34), opt, Info{})
		if err != nil {
			t.Fatal(err)
		}
		n, err := NewInt8Net(a)
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
	t.Logf("int8 score error on rows within the bounds: nearest %.4f, adaptive %.4f", rmse[RoundNearest], rmse[RoundAdaptive])
	if !(rmse[RoundAdaptive] < rmse[RoundNearest]) {
		t.Errorf("adaptive rounding's error %.4f is not below nearest rounding's %.4f", rmse[RoundAdaptive], rmse[RoundNearest])
	}
}
