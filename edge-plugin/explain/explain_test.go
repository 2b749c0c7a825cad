package explain

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/policy"
)

func TestFeatureGroupsPartition(t *testing.T) {
	gs := FeatureGroups()
	if len(gs) == 0 || len(gs) > 8 {
		t.Fatalf("%d groups, want 1..8 (2^G forward passes per explanation)", len(gs))
	}
	seen := make([]string, policy.NumFeatures)
	names := policy.FeatureList()
	for _, g := range gs {
		if len(g.index) != len(g.Features) || len(g.Features) == 0 {
			t.Fatalf("group %s: features %v resolve to %v (names not in the schema?)", g.Name, g.Features, g.index)
		}
		for k, j := range g.index {
			if seen[j] != "" {
				t.Fatalf("feature %s in groups %s and %s", names[j].Name, seen[j], g.Name)
			}
			seen[j] = g.Name
			if names[j].Name != g.Features[k] {
				t.Fatalf("group %s: index %d is %s, not %s", g.Name, j, names[j].Name, g.Features[k])
			}
		}
	}
	for j, g := range seen {
		if g == "" {
			t.Errorf("feature %s is in no group", names[j].Name)
		}
	}
	// the pod group is exactly the pod features (equal on every
	// candidate): the leading ones and pod_arch_pinned (added in v5 after
	// the others)
	pod := make([]int, policy.NumPodFeatures)
	for i := range pod {
		pod[i] = i
	}
	pod = append(pod, policy.ArchPinnedFeature)
	if !slices.Equal(gs[0].index, pod) {
		t.Fatalf("pod group %v", gs[0].index)
	}
}

// funcScorer is a policy.Scorer over a float function of one row.
type funcScorer struct {
	f     func(x []float32) float64
	width int
}

func (s funcScorer) Scores(raw []float32, k int, out []float32) error {
	for i := range k {
		out[i] = float32(s.f(raw[i*s.width : (i+1)*s.width]))
	}
	return nil
}

func TestShapleyMatchesPermutations(t *testing.T) {
	f := func(x []float32) float64 {
		a := make([]float64, len(x))
		for i, v := range x {
			a[i] = float64(v)
		}
		return a[0]*a[2] + math.Sin(a[3]+a[1]) + a[4]*a[4]*a[5] + math.Max(a[0], a[5])
	}
	sc := funcScorer{f: f, width: 6}
	groups := [][]int{{0, 1}, {2}, {3, 4}, {5}}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 20 {
		x, base := make([]float32, 6), make([]float32, 6)
		for i := range x {
			x[i], base[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		phi, full, empty, err := ShapleyGroups(sc, x, base, groups)
		if err != nil {
			t.Fatal(err)
		}
		ref := plugintest.PermutationShapley(t, sc, x, base, groups)
		var sum float64
		for i := range phi {
			sum += phi[i]
			if math.Abs(phi[i]-ref[i]) > 1e-6 {
				t.Fatalf("phi %v, permutations %v", phi, ref)
			}
		}
		if math.Abs(sum-(full-empty)) > 1e-6 {
			t.Fatalf("efficiency: sum %v, v(N)-v(0) %v", sum, full-empty)
		}
	}
}

func TestShapleySymmetryAndDummy(t *testing.T) {
	// f = x0 + x1 + x0 x1: groups 0 and 1 are symmetric, group 2 a dummy
	sc := funcScorer{f: func(x []float32) float64 { return float64(x[0] + x[1] + x[0]*x[1]) }, width: 3}
	phi, full, empty, err := ShapleyGroups(sc, []float32{1, 1, 5}, []float32{0, 0, 0}, [][]int{{0}, {1}, {2}})
	if err != nil {
		t.Fatal(err)
	}
	if full != 3 || empty != 0 || phi[0] != 1.5 || phi[1] != 1.5 || phi[2] != 0 {
		t.Fatalf("phi %v, v(N) %v, v(0) %v; want [1.5 1.5 0], 3, 0", phi, full, empty)
	}
	// errors
	if _, _, _, err := ShapleyGroups(sc, []float32{1, 1, 5}, []float32{0, 0}, [][]int{{0}}); err == nil {
		t.Error("short baseline accepted")
	}
	if _, _, _, err := ShapleyGroups(sc, []float32{1, 1, 5}, []float32{0, 0, 0}, [][]int{{3}}); err == nil {
		t.Error("feature index out of range accepted")
	}
	if _, _, _, err := ShapleyGroups(sc, []float32{1, 1, 5}, []float32{0, 0, 0}, make([][]int, maxExplainGroups+1)); err == nil {
		t.Error("too many groups accepted")
	}
}
