package quant

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/edgesched/edgesched/policy"
)

// ErrQuant wraps refusals of quantization.
var ErrQuant = errors.New("quant: cannot quantize")

// CalibrationOptions choose how activation and input scales are set from
// calibration rows. Start from DefaultCalibration.
type CalibrationOptions struct {
	// Method is "minmax" (the largest magnitude seen) or "percentile"
	// (the Percentile-th percentile of the magnitudes; outliers clip).
	Method string
	// Percentile in (50, 100] for Method "percentile".
	Percentile float64
	// Rounding is how weights are rounded to int8 levels: RoundAdaptive
	// (the zero value "" means it too) or RoundNearest.
	Rounding string
}

// DefaultCalibration is percentile calibration at 99.99, with weights
// rounded adaptively.
func DefaultCalibration() CalibrationOptions {
	return CalibrationOptions{Method: "percentile", Percentile: 99.99, Rounding: RoundAdaptive}
}

// Validate checks the options.
func (o CalibrationOptions) Validate() error {
	switch o.Rounding {
	case "", RoundNearest, RoundAdaptive:
	default:
		return fmt.Errorf("%w: rounding %q (want %s or %s)", ErrQuant, o.Rounding, RoundNearest, RoundAdaptive)
	}
	switch {
	case o.Method == "minmax":
	case o.Method == "percentile" && o.Percentile > 50 && o.Percentile <= 100:
	default:
		return fmt.Errorf("%w: calibration %q at %v (want minmax, or percentile in (50, 100])", ErrQuant, o.Method, o.Percentile)
	}
	return nil
}

// String is the method ("minmax" or "percentile:P"), followed by
// ",rounding:adaptive" when the weights were not rounded to their nearest
// levels.
func (o CalibrationOptions) String() string {
	s := "minmax"
	if o.Method != "minmax" {
		s = "percentile:" + strconv.FormatFloat(o.Percentile, 'g', -1, 64)
	}
	if o.adaptive() {
		s += ",rounding:" + RoundAdaptive
	}
	return s
}

// adaptive reports whether weights are rounded adaptively (the zero
// Rounding included).
func (o CalibrationOptions) adaptive() bool {
	return o.Rounding == "" || o.Rounding == RoundAdaptive
}

// stat is the calibration statistic of magnitudes v (sorted in place).
func (o CalibrationOptions) stat(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if o.Method == "minmax" {
		return v[len(v)-1]
	}
	i := int(math.Ceil(o.Percentile/100*float64(len(v)))) - 1
	return v[max(0, min(i, len(v)-1))]
}

// scaleOf turns a calibration statistic into the scale of a quantized
// range with levels steps (stat / levels), with a floor so an always-zero
// tensor still has a usable scale. Scales are rounded to float32: the
// artifact stores float32, and values are quantized against exactly the
// stored scale.
// ConstantFeatureRange is the least input range, in standard deviations
// of the model's training data, of a feature constant in calibration.
const ConstantFeatureRange = 4

func scaleOf(stat, levels float64) float64 {
	return float64(float32(math.Max(stat, 1e-6) / levels))
}

// Quantize makes the int8 artifact of m's scorer (QuantScheme),
// calibrated on raw feature rows (k rows of policy.NumFeatures, flat)
// gathered from simulator states (CollectRows):
//
//   - inputs: int8, one scale per feature (calibration statistic of the
//     normalised feature's magnitude / 127);
//   - activations after each ReLU: unsigned 8-bit, one scale per channel
//     (calibration statistic of the channel's positive values / 255);
//   - weights: symmetric int8 per output channel (largest magnitude / 127),
//     after folding the layer's input scales into them;
//   - biases: int32 at the scale of their channel's accumulator.
//
// The critic is not part of the int8 artifact (the scheduler never runs
// it). info.Parent defaults to the float model's artifact ID.
func Quantize(m *policy.FloatModel, rows []float32, opt CalibrationOptions, info Info) (*Artifact, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	ref, err := newReference(m)
	if err != nil {
		return nil, err
	}
	F, H1, H2 := ref.f, ref.h1, ref.h2
	k := len(rows) / F
	if k < 1 || len(rows) != k*F {
		return nil, fmt.Errorf("%w: %d calibration values are not rows of %d features", ErrQuant, len(rows), F)
	}
	xs := make([][]float64, F)
	a1s, a2s := make([][]float64, H1), make([][]float64, H2)
	for i := range k {
		ref.score(rows[i*F : (i+1)*F])
		for j := range F {
			xs[j] = append(xs[j], math.Abs(ref.xn[j]))
		}
		for c, v := range ref.a1 {
			if v > 0 {
				a1s[c] = append(a1s[c], v)
			}
		}
		for c, v := range ref.a2 {
			if v > 0 {
				a2s[c] = append(a2s[c], v)
			}
		}
	}
	// A channel never positive in calibration (a dead ReLU) gets the
	// layer's largest scale rather than a degenerate one.
	stats := func(vs [][]float64, levels float64) []float64 {
		out := make([]float64, len(vs))
		var top float64
		for i, v := range vs {
			if st := opt.stat(v); st > 0 {
				out[i] = scaleOf(st, levels)
				top = math.Max(top, out[i])
			}
		}
		for i := range out {
			if out[i] == 0 {
				out[i] = math.Max(top, scaleOf(0, levels))
			}
		}
		return out
	}
	inScale, sA1, sA2 := stats(xs, MaxInput), stats(a1s, MaxActivation), stats(a2s, MaxActivation)
	// A feature that takes one value on every calibration row (openb
	// states have no dependencies; openb default names no GPU models)
	// would get a scale fitted to that value, and the int8 model would
	// clamp every other value near it. Such a feature keeps at least
	// ConstantFeatureRange standard deviations of the training data
	// (the schema's normalisation) on either side of its mean.
	for j, v := range xs {
		if len(v) > 0 && slices.Min(v) == slices.Max(v) {
			inScale[j] = math.Max(inScale[j], scaleOf(ConstantFeatureRange, MaxInput))
		}
	}

	// Every layer folds its input scales into its weights (output-major).
	fold := func(w []float64, fanIn, outs int, in []float64) []float64 {
		out := make([]float64, fanIn*outs)
		for j := range fanIn {
			for c := range outs {
				out[c*fanIn+j] = in[j] * w[j*outs+c]
			}
		}
		return out
	}
	l1, err := quantizeLayer(fold(ref.w1, F, H1, inScale), ref.b1, F)
	if err != nil {
		return nil, fmt.Errorf("layer 1: %w", err)
	}
	l2, err := quantizeLayer(fold(ref.w2, H1, H2, sA1), ref.b2, H1)
	if err != nil {
		return nil, fmt.Errorf("layer 2: %w", err)
	}
	l3, err := quantizeLayer(fold(ref.w3, H2, 1, sA2), []float64{ref.b3}, H2)
	if err != nil {
		return nil, fmt.Errorf("layer 3: %w", err)
	}
	if opt.adaptive() {
		adaptiveRound(ref, rows, inScale, sA1, sA2, [3]*qlayer{l1, l2, l3})
	}
	if info.Parent == "" {
		if fa, err := FromModel(m, Info{}); err == nil {
			if _, err := fa.Encode(nil); err == nil {
				info.Parent = fa.Header.ModelID
			}
		}
	}
	a := &Artifact{Header: newHeader(m, Int8, info)}
	a.Header.Quant = &QuantParams{Scheme: QuantScheme, Calibration: opt.String(), Samples: k}
	a.Tensors = []Tensor{
		{Name: "in_scale", DType: Float32, Shape: []int{F}, F32: f32s(inScale)},
		{Name: "w1", DType: Int8, Shape: []int{H1, F}, I8: l1.q}, {Name: "w1_scale", DType: Float32, Shape: []int{H1}, F32: f32s(l1.scale)},
		{Name: "b1", DType: Int32, Shape: []int{H1}, I32: l1.b}, {Name: "a1_scale", DType: Float32, Shape: []int{H1}, F32: f32s(sA1)},
		{Name: "w2", DType: Int8, Shape: []int{H2, H1}, I8: l2.q}, {Name: "w2_scale", DType: Float32, Shape: []int{H2}, F32: f32s(l2.scale)},
		{Name: "b2", DType: Int32, Shape: []int{H2}, I32: l2.b}, {Name: "a2_scale", DType: Float32, Shape: []int{H2}, F32: f32s(sA2)},
		{Name: "w3", DType: Int8, Shape: []int{1, H2}, I8: l3.q}, {Name: "w3_scale", DType: Float32, Shape: []int{1}, F32: f32s(l3.scale)},
		{Name: "b3", DType: Int32, Shape: []int{1}, I32: l3.b},
	}
	if _, err := a.Requantization(); err != nil { // the multipliers must exist
		return nil, err
	}
	if err := a.addSage(m); err != nil {
		return nil, err
	}
	return a, nil
}

// quantizeLayer quantizes weights w (outputs x fanIn, output-major, input
// scales folded in) per output channel, each to its nearest level, and
// the biases at the scale of their channel's accumulator.
func quantizeLayer(w, b []float64, fanIn int) (*qlayer, error) {
	outs := len(b)
	l := &qlayer{q: make([]int8, len(w)), scale: make([]float64, outs), b: make([]int32, outs),
		levels: make([]float64, len(w)), fanIn: fanIn}
	for c := range outs {
		var mx float64
		for _, v := range w[c*fanIn : (c+1)*fanIn] {
			mx = math.Max(mx, math.Abs(v))
		}
		s := scaleOf(mx, MaxInput)
		l.scale[c] = s
		for j := c * fanIn; j < (c+1)*fanIn; j++ {
			l.levels[j] = w[j] / s
			l.q[j] = int8(max(-127, min(127, math.RoundToEven(l.levels[j]))))
		}
		bv := math.RoundToEven(b[c] / s)
		if math.Abs(bv) > 1<<28 {
			return nil, fmt.Errorf("%w: bias %d (%v) is %v accumulator units, beyond int32 headroom", ErrQuant, c, b[c], bv)
		}
		l.b[c] = int32(bv)
	}
	return l, nil
}

func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
