package quant

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
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

// TestQuantizeInput holds QuantizeInput's magic-number rounding equal to clamping
// and math.RoundToEven in float64: on named edge cases (ties round to
// even: 2.5 -> 2, 3.5 -> 4, -2.5 -> -2; the clamp at ±127) and on a
// million random values of every magnitude; a third of them under input
// bounds (inputScale), where the reference holds the raw value within
// them first, as policy.Schema.Bound does.
func TestQuantizeInput(t *testing.T) {
	ref := func(x, mean, inv float32) int8 {
		v := float64(float32((x - mean) * inv))
		return int8(max(-MaxInput, min(MaxInput, math.RoundToEven(v))))
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
			if got := QuantizeInput(tc.x, 0, 1, -MaxInput, MaxInput); got != tc.want {
				t.Errorf("QuantizeInput(%v) = %d, want %d", tc.x, got, tc.want)
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
			if got, want := QuantizeInput(x, m[0], iv[0], lo[0], hi[0]), ref(min(max(x, a), b), m[0], iv[0]); got != want {
				t.Fatalf("QuantizeInput(%v, %v, %v) within [%v, %v] = %d, reference %d", x, mean, iv[0], a, b, got, want)
			}
			continue
		}
		if got, want := QuantizeInput(x, mean, inv, -MaxInput, MaxInput), ref(x, mean, inv); got != want {
			t.Fatalf("QuantizeInput(%v, %v, %v) = %d, reference %d", x, mean, inv, got, want)
		}
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
		m, s, err := multipliers(w, b, fanIn, MaxActivation, ws, os)
		if err != nil {
			continue // a ratio beyond int32 reach is refused, not wrapped
		}
		for c := range outs {
			var maxAcc int64
			for _, v := range w[c*fanIn : (c+1)*fanIn] {
				maxAcc += MaxActivation * int64(abs8(v))
			}
			maxAcc += int64(math.Abs(float64(b[c])))
			if p := maxAcc*int64(m[c]) + (int64(1)<<s[c])>>1; p > math.MaxInt32 {
				t.Fatalf("trial %d channel %d: %d * %d overflows", trial, c, maxAcc, m[c])
			}
			M := float64(ws[c]) / float64(os[c])
			if M < MaxActivation && s[c] > 0 && math.Abs(float64(m[c])/math.Ldexp(1, int(s[c]))-M) > M/1000+math.Ldexp(1, -int(s[c])) {
				t.Fatalf("trial %d channel %d: %d/2^%d approximates %v badly", trial, c, m[c], s[c], M)
			}
		}
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
