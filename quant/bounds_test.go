package quant

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/internal/testutil/modeltest"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
)

// TestArtifactBounds: a model's input bounds travel in both its artifacts
// (format 3), the model ID covers them, a float32 artifact gives them back
// to the model (nn.FromArtifact, whose float scorer clamps), and an int8
// artifact whose input scales leave no finite quantization is refused
// (quant/int8net's TestKernelsHonourBounds: every int8 kernel holds its
// inputs within the bounds).
func TestArtifactBounds(t *testing.T) {
	s, keys := testSigner(t, 1)
	const k = 100
	m, rows, held := boundedModel(t, k)
	scores := func(sc policy.Scorer, x []float32) []float32 { t.Helper(); return modeltest.Scores(t, sc, x) }

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
	if _, err := qgot.Requantization(); err != nil {
		t.Fatal(err)
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
	if _, err := tiny.Requantization(); !errors.Is(err, ErrArtifact) || !strings.Contains(err.Error(), "no finite input quantization") {
		t.Errorf("an infinite input multiplier: %v, want ErrArtifact", err)
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
