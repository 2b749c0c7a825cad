package int8net

import (
	"errors"
	"slices"
	"testing"

	"github.com/edgesched/edgesched/internal/testutil/modeltest"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant"
)

// readBack encodes a unsigned and decodes it: what a loader gets.
func readBack(t testing.TB, a *quant.Artifact) *quant.Artifact {
	t.Helper()
	b, err := a.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := quant.Decode(b, quant.DecodeOptions{AllowUnsigned: true})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestNewReadsArtifact: a Net takes its decision rule and the ID of the
// GraphSAGE weights its dep_affinity reads from the artifact it is read
// back from, and its Scorer names that ID; New refuses a float32
// artifact.
func TestNewReadsArtifact(t *testing.T) {
	w := policy.DefaultSage()
	w.Decoder[3] += 0.25 // weights of the model's own, not the shipped ones
	m := randomModel(t, 16, 8, 5)
	m.Decision, m.Sage = policy.Decision{Band: 4}, w
	a, err := quant.Quantize(m.Float(), benchRows(2000, 5), quant.DefaultCalibration(), quant.Info{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(readBack(t, a))
	if err != nil || n.Decision != m.Decision || n.AffinityEncoder != w.ID() || n.Scorer().AffinityEncoder() != w.ID() || w.ID() == policy.AffinityEncoder {
		t.Fatalf("int8 net: %v, decision %+v, affinity encoder %q, want %+v and %s", err, n.Decision, n.AffinityEncoder, m.Decision, w.ID())
	}
	fa, err := quant.FromModel(m.Float(), quant.Info{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(fa); !errors.Is(err, quant.ErrArtifact) {
		t.Fatalf("New of a float32 artifact: %v, want ErrArtifact", err)
	}
}

// TestKernelsHonourBounds: every int8 kernel holds its inputs within the
// input bounds of the artifact it is read back from (quant's
// TestArtifactBounds has them travel): a row beyond the bounds scores
// exactly as the row held at them, which it does not when the artifact's
// bounds are taken away, and a row within them scores as it does without
// them.
func TestKernelsHonourBounds(t *testing.T) {
	const k = 100
	m, rows, held := modeltest.Bounded(t, k)
	scores := func(sc policy.Scorer, x []float32) []float32 { t.Helper(); return modeltest.Scores(t, sc, x) }
	qa, err := quant.Quantize(m.Float(), benchRows(5000, 43), quant.DefaultCalibration(), quant.Info{})
	if err != nil {
		t.Fatal(err)
	}
	qgot := readBack(t, qa)
	if !slices.Equal(qgot.Schema().Lo, m.Schema.Lo) {
		t.Fatal("the artifact read back lost the model's bounds")
	}
	n, err := New(qgot)
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
	un, err := New(&open)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := scores(un.Scorer(), rows), scores(un.Scorer(), held); slices.Equal(a, b) {
		t.Error("without its bounds the int8 net scores rows beyond them as rows held at them: the test rows do not test the clamp")
	}
	// a row within the bounds is not moved by them
	if a, b := scores(n.Scorer(), held), scores(un.Scorer(), held); !slices.Equal(a, b) {
		t.Errorf("rows within the bounds score %v... with the bounds, %v... without", a[:3], b[:3])
	}
}
