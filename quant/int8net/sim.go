package int8net

import (
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/sim"
)

// Factory returns a simulator factory that scores with the int8 network
// (the same feature extraction and score cache as the float policy).
func Factory(name string, n *Net) sim.Factory {
	return sim.Factory{Name: name, New: func(env *sim.Env) (sim.Policy, error) {
		sc := n.Scorer()
		if err := policy.CheckPartners(env, sc, n.AffinityEncoder); err != nil {
			return nil, err
		}
		return policy.NewLearnedScorer(name, sc, n.Decision, env), nil
	}}
}
