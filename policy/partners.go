package policy

import (
	"cmp"
	"fmt"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
)

// PartnersOf resolves published embeddings' partners (kubefmt, version
// 2) to services (an Env's Services, in order): the result's [s] lists
// service s's partners that are among services, with their
// probabilities (sim.Env.Partners). Services without an entry, and
// partners that are not among services (no pod of theirs can be
// placed), are left out. nil when e is nil or lists no partners.
func PartnersOf(e *kubefmt.Embeddings, services []string) [][]sim.Partner {
	if e == nil {
		return nil
	}
	idx := make(map[string]int32, len(services))
	for i, s := range services {
		idx[s] = int32(i)
	}
	var out [][]sim.Partner
	for i := range e.Services {
		s := &e.Services[i]
		a, ok := idx[s.Name]
		if !ok || len(s.Partners) == 0 {
			continue
		}
		var ps []sim.Partner
		for _, p := range s.Partners {
			if b, ok := idx[p.Service]; ok {
				ps = append(ps, sim.Partner{Service: b, P: p.PartnerProbability()})
			}
		}
		if len(ps) == 0 {
			continue
		}
		if out == nil {
			out = make([][]sim.Partner, len(services))
		}
		out[a] = ps
	}
	return out
}

// CheckPartners reports an error when sc, if it reads dep_affinity (a
// scorer that is not an InputReader reads every input), would run on env
// without the partners the feature is defined on: env has calls but no
// partners (policy/sage's Annotate computes them), or partners of
// another encoder than the model's: encoder, the ID of the GraphSAGE
// weights the model carries ("": none of its own, so AffinityEncoder,
// the shipped ones). The plugin checks the same when it takes the site
// leader's partners.
func CheckPartners(env *sim.Env, sc Scorer, encoder string) error {
	if r, ok := sc.(InputReader); ok && !r.ReadsInput(AffinityFeature) || len(env.Edges) == 0 {
		return nil
	}
	switch {
	case env.Partners == nil:
		return fmt.Errorf("%w: the model reads dep_affinity and the environment has service calls but no partners from their embeddings (policy/sage.Annotate)", ErrSchema)
	case env.PartnersEncoder != cmp.Or(encoder, AffinityEncoder):
		return fmt.Errorf("%w: the model reads dep_affinity of encoder %s, the environment's partners come from %q", ErrSchema, cmp.Or(encoder, AffinityEncoder), env.PartnersEncoder)
	}
	return nil
}
