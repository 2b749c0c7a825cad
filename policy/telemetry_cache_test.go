package policy_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/sage"
)

// TestLearnedCacheFollowsTelemetry: a cached learned score follows a
// change of telemetry step when the network reads telemetry, and the
// cache ignores it when the network leaves telemetry out.
func TestLearnedCacheFollowsTelemetry(t *testing.T) {
	env := policy.TestEnv(t)
	if err := sage.Annotate(env); err != nil {
		t.Fatal(err)
	}
	for _, reads := range []bool{true, false} {
		net, err := nn.NewNet(policy.NumFeatures, 8, 8, 8, rand.New(rand.NewPCG(3, 3)))
		if err != nil {
			t.Fatal(err)
		}
		if !reads {
			mask, _ := policy.ExcludeMask([]string{"telemetry"})
			net.MaskInputs(mask)
		}
		l, err := nn.NewLearned("t", &nn.Model{Schema: policy.NewSchema(), Net: net}, env)
		if err != nil {
			t.Fatal(err)
		}
		st := policy.NewTestState(t, env)
		lm := st.LoadModel
		nodes, s0, s1 := []int32{2}, make([]float64, 1), make([]float64, 1)
		quiet := lm.FromMeasured(0.1, 0.3, 0.2, 30, 0)
		st.SetMeasured(2, &quiet)
		l.NetworkScores(st, &st.Pods[2], nodes, s0)
		// 83% busy, 95% memory, 12 ms run queue, 30 retransmits/s
		tel := lm.FromMeasured(0.83, 0.95, 3, 12_000, 30)
		st.SetMeasured(2, &tel)
		l.NetworkScores(st, &st.Pods[2], nodes, s1)
		if changed := s0[0] != s1[0]; changed != reads {
			t.Errorf("network reads telemetry %v: score %v -> %v after the node's telemetry changed", reads, s0[0], s1[0])
		}
	}
}

// TestLearnedCacheRowGenerations: a pod whose tag differs from the last
// one of its shape starts a new generation of the shape's cache row, and
// the 16-bit generation wraps after 65,536 of them. A node left out of
// the candidates all that time keeps an entry of generation 1; when the
// generation comes round to 1 again under another key, that entry must
// miss (the row is emptied at the wrap), and the score must be the one a
// policy without a cache computes.
func TestLearnedCacheRowGenerations(t *testing.T) {
	env := policy.TestEnv(t)
	if err := sage.Annotate(env); err != nil {
		t.Fatal(err)
	}
	m := randomModel(t, 11)
	l, err := nn.NewLearned("cached", m, env)
	if err != nil {
		t.Fatal(err)
	}
	st := policy.NewTestState(t, env)
	all, one := []int32{0, 1, 2}, []int32{0}
	scores := make([]float64, len(all))
	pod := st.Pods[1] // api-0, a CPU pod every node fits
	score := func(priority int32, nodes []int32) []float64 {
		p := pod
		p.Priority = priority
		l.NetworkScores(st, &p, nodes, scores[:len(nodes)])
		return scores[:len(nodes)]
	}
	first := slices.Clone(score(1, all)) // generation 1
	for pr := int32(2); pr <= 1<<16; pr++ {
		score(pr, one) // generations 2 ... 65535, 0
	}
	got := slices.Clone(score(1<<16+1, all)) // generation 1 again, another key
	fresh, err := nn.NewLearned("fresh", m, env)
	if err != nil {
		t.Fatal(err)
	}
	p := pod
	p.Priority = 1<<16 + 1
	want := make([]float64, len(all))
	fresh.NetworkScores(st, &p, all, want)
	if !slices.Equal(got, want) {
		t.Fatalf("after the generation wrapped: cached scores %v, uncached %v (first generation's: %v)", got, want, first)
	}
	if slices.Equal(first, want) {
		t.Fatalf("priority does not change the scores (%v): the test cannot see a stale entry", want)
	}
}
