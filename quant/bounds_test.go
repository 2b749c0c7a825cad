package quant

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
)

// boundedModel is a random 32 -> 32 model whose input bounds are each
// feature's mean less an eighth of its std to the mean plus two stds
// (asymmetric: calibrated on rows held within them, the int8 scale is
// set by the upper side, so the lower bound lies well inside the int8
// range and the kernels' per-feature clamp is what holds it), and k
// rows, most of whose values lie beyond them, with the same rows held
// within them.
func boundedModel(t testing.TB, k int) (m *nn.Model, rows, held []float32) {
	t.Helper()
	m = randomModel(t, 32, 32, 41)
	F := policy.NumFeatures
	m.Schema.Lo, m.Schema.Hi = make([]float32, F), make([]float32, F)
	for j := range F {
		m.Schema.Lo[j], m.Schema.Hi[j] = m.Schema.Mean[j]-m.Schema.Std[j]/8, m.Schema.Mean[j]+2*m.Schema.Std[j]
	}
	rows = benchRows(k, 42)
	for i := range rows {
		rows[i] *= 3
	}
	held = slices.Clone(rows)
	for i := range k {
		m.Schema.Clamp(held[i*F : (i+1)*F])
	}
	return m, rows, held
}

// TestArtifactBounds: a model's input bounds travel in both its artifacts
// (format 3), the model ID covers them, a float32 artifact gives them back
// to the model (nn.FromArtifact, whose float scorer clamps), and every
// int8 kernel holds its inputs within them: a row beyond the bounds
// scores exactly as the row held at them, which it does not when the
// artifact's bounds are taken away, and a row within them scores as it
// does without them.
func TestArtifactBounds(t *testing.T) {
	s, keys := testSigner(t, 1)
	const k = 100
	m, rows, held := boundedModel(t, k)
	scores := func(sc policy.Scorer, x []float32) []float32 {
		t.Helper()
		out := make([]float32, k)
		if err := sc.Scores(x, k, out); err != nil {
			t.Fatal(err)
		}
		return out
	}

	fa, err := FromModel(m.Float(), Info{})
	if err != nil {
		t.Fatal(err)
	}
	fb, got := signedRoundTrip(t, fa, s, keys)
	if fb[4] != FormatBounds || !slices.Equal(got.Schema().Lo, m.Schema.Lo) || !slices.Equal(got.Schema().Hi, m.Schema.Hi) {
		t.Fatalf("format %d, bounds %v..., want format %d and the model's", fb[4], got.Schema().Lo[:3], FormatBounds)
	}
	unbounded, _ := FromModel(m.WithoutBounds().Float(), Info{})
	ub, _ := unbounded.Encode(s)
	nudged := m.Clone()
	nudged.Schema.Hi = slices.Clone(m.Schema.Hi)
	nudged.Schema.Hi[7] = math.Nextafter32(nudged.Schema.Hi[7], float32(math.Inf(1)))
	na, _ := FromModel(nudged.Float(), Info{})
	if _, err := na.Encode(s); err != nil {
		t.Fatal(err)
	}
	if ub[4] != FormatVersion || unbounded.Header.ModelID == fa.Header.ModelID || na.Header.ModelID == fa.Header.ModelID {
		t.Fatalf("format %d without bounds; IDs %s (bounds), %s (none), %s (one bound a ulp higher): want format %d and three IDs",
			ub[4], ShortID(fa.Header.ModelID), ShortID(unbounded.Header.ModelID), ShortID(na.Header.ModelID), FormatVersion)
	}
	back, err := nn.FromArtifact(got)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := nn.NewFloatScorer(back)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := scores(fs, rows), scores(fs, held); !slices.Equal(a, b) {
		t.Fatalf("float scorer of the artifact's model: a row beyond the bounds scores %v, held at them %v", a[0], b[0])
	}

	qa, err := Quantize(m.Float(), benchRows(5000, 43), DefaultCalibration(), Info{})
	if err != nil {
		t.Fatal(err)
	}
	qb, qgot := signedRoundTrip(t, qa, s, keys)
	if qb[4] != FormatBounds || !slices.Equal(qgot.Schema().Lo, m.Schema.Lo) {
		t.Fatalf("int8 artifact: format %d, want %d with the model's bounds", qb[4], FormatBounds)
	}
	n, err := NewInt8Net(qgot)
	if err != nil {
		t.Fatal(err)
	}
	for _, kernel := range Kernels() {
		sc, err := n.ScorerWith(kernel)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := scores(sc, rows), scores(sc, held); !slices.Equal(a, b) {
			t.Errorf("int8 kernel %s: rows beyond the bounds score %v..., held at them %v...", kernel, a[:3], b[:3])
		}
	}
	open := *qgot
	open.Header.Schema.Lo, open.Header.Schema.Hi = nil, nil
	un, err := NewInt8Net(&open)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := scores(un.Scorer(), rows), scores(un.Scorer(), held); slices.Equal(a, b) {
		t.Error("without its bounds the int8 net scores rows beyond them as rows held at them: the test rows do not test the clamp")
	}
	// an input scale so small its multiplier is infinite is refused, not
	// left to each kernel's arithmetic of infinities
	tiny := *qgot
	tiny.Tensors = slices.Clone(qgot.Tensors)
	for i := range tiny.Tensors {
		if t := &tiny.Tensors[i]; t.Name == "in_scale" {
			t.F32 = slices.Clone(t.F32)
			t.F32[policy.NumPodFeatures] = math.SmallestNonzeroFloat32
		}
	}
	if _, err := NewInt8Net(&tiny); !errors.Is(err, ErrArtifact) || !strings.Contains(err.Error(), "no finite input quantization") {
		t.Errorf("an infinite input multiplier: %v, want ErrArtifact", err)
	}
	// a row within the bounds is not moved by them
	if a, b := scores(n.Scorer(), held), scores(un.Scorer(), held); !slices.Equal(a, b) {
		t.Errorf("rows within the bounds score %v... with the bounds, %v... without", a[:3], b[:3])
	}

	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"bounds in format 1", func() []byte {
			c := append([]byte(nil), fb...)
			c[4] = FormatVersion
			return resign(t, c, s, func(h map[string]any) { h["format"] = FormatVersion }, nil)
		}(), "input bounds (header schema.lo, schema.hi) in format 1, want 3"},
		{"format 3 without them", func() []byte {
			c := append([]byte(nil), ub...)
			c[4] = FormatBounds
			return resign(t, c, s, func(h map[string]any) { h["format"] = FormatBounds }, nil)
		}(), "format 3 without input bounds"},
		{"lower bounds only", resign(t, fb, s, func(h map[string]any) { delete(h["schema"].(map[string]any), "hi") }, nil), "bounds of"},
		{"a lower bound above its upper", resign(t, fb, s, func(h map[string]any) {
			h["schema"].(map[string]any)["lo"].([]any)[3] = 1e9
		}, nil), "has bounds"},
		{"bounds changed under the old ID", resign(t, fb, s, func(h map[string]any) {
			h["schema"].(map[string]any)["lo"].([]any)[3], h["model_id"] = -1e9, "keep"
		}, nil), "model ID"},
	} {
		if _, err := Decode(tc.b, DecodeOptions{Keys: keys}); !errors.Is(err, ErrArtifact) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrArtifact naming %q", tc.name, err, tc.want)
		}
	}
}
