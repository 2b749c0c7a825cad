package policy_test

import (
	"math/rand/v2"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
)

// TestLearnedCacheFollowsTelemetry: a cached learned score follows a
// change of telemetry step when the network reads telemetry, and the
// cache ignores it when the network leaves telemetry out.
func TestLearnedCacheFollowsTelemetry(t *testing.T) {
	env := policy.TestEnv(t)
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
