package sage

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/sim"
)

// Probability is the predicted probability that the services of
// embeddings a and b call each other: the sigmoid of Scale times the
// decoder's score (what Pretrain trained it on).
func (dec *Decoder) Probability(a, b []float32) float64 {
	return sigmoid(dec.Scale * dec.Score(a, b))
}

// MaxPartnerCandidates bounds the services within two calls Partners
// scores for one service (its direct neighbours first), so a hub's
// leaves cost at most that many scores each, not the hub's degree. The
// library's apps and the scenario families stay below it (55 at most).
const MaxPartnerCandidates = 256

// Partners lists, for every service of g (the graph m embeds), the
// services within two calls of it (either direction) with the predicted
// probability that the two call each other (dec.Probability, in the
// published steps of 1/255), at most kubefmt.MaxPartners of them: the
// most probable, ties by name, among at most MaxPartnerCandidates.
func (m *Embeddings) Partners(g *Graph, dec *Decoder) (map[string][]kubefmt.Partner, error) {
	c, err := compile(g)
	if err != nil {
		return nil, err
	}
	if len(m.Names) != len(c.g.Services) || dec == nil || dec.D != m.Dim {
		return nil, fmt.Errorf("%w: embeddings of %d services (dim %d) for a graph of %d and a decoder of dim %v", ErrConfig, len(m.Names), m.Dim, len(c.g.Services), dec)
	}
	d := m.Dim
	// S b of every service once: Probability's work but the dot products
	// (the same sums in the same order, so the same bits)
	sb := make([]float32, len(m.Values))
	for b := range m.Names {
		dec.apply(sb[b*d:(b+1)*d], m.Values[b*d:(b+1)*d])
	}
	out := make(map[string][]kubefmt.Partner, len(m.Names))
	seen := make([]int, len(m.Names)) // stamp+1 of the service last listed
	var ps []kubefmt.Partner
	for a := range c.nbr {
		seen[a] = a + 1
		ps = ps[:0]
		add := func(b int) {
			if seen[b] == a+1 || len(ps) == MaxPartnerCandidates {
				return
			}
			seen[b] = a + 1
			var dot float64
			for j, x := range m.Values[a*d : (a+1)*d] {
				dot += float64(x) * float64(sb[b*d+j])
			}
			pr := sigmoid(dec.Scale * dot)
			ps = append(ps, kubefmt.Partner{Service: m.Names[b], P: kubefmt.QuantizeProbability(pr)})
		}
		// the direct neighbours first: past MaxPartnerCandidates (a hub's
		// leaf), two-hop candidates are cut, not callers or callees
		for _, e := range c.nbr[a] {
			add(int(e.idx))
		}
		for _, e := range c.nbr[a] {
			for _, u := range c.nbr[e.idx] {
				add(int(u.idx))
			}
		}
		slices.SortFunc(ps, func(x, y kubefmt.Partner) int {
			return cmp.Or(cmp.Compare(y.P, x.P), cmp.Compare(x.Service, y.Service))
		})
		if len(ps) > kubefmt.MaxPartners {
			ps = ps[:kubefmt.MaxPartners]
		}
		if len(ps) > 0 {
			out[m.Names[a]] = slices.Clone(ps)
		}
	}
	return out, nil
}

// Publish embeds g with enc and returns the published format under id
// (enc's ID): every service's int8 embedding (Quantized) and, with a
// decoder, its partners. The site leader writes it; Annotate computes
// the simulator's through it.
func Publish(enc *Encoder, dec *Decoder, id string, g *Graph, updated time.Time) (*kubefmt.Embeddings, error) {
	m, err := enc.Embed(g)
	if err != nil {
		return nil, err
	}
	var parts map[string][]kubefmt.Partner
	if dec != nil {
		if parts, err = m.Partners(g, dec); err != nil {
			return nil, err
		}
	}
	return m.Quantized(id, g, updated, parts), nil
}

// Annotate sets env.Partners and env.PartnersEncoder from Default's
// encoder and decoder over env's calls as the site leader sees them (the
// calls alone, FromDependencies: no replicas, requests or placement), in
// the format and steps the leader publishes and through the same
// resolution the scheduler plugin uses (policy.PartnersOf), so the
// simulator's dep_affinity is the scheduler's. An env without calls is
// left as it is. Call it before any run on env starts.
func Annotate(env *sim.Env) error { return AnnotateWith(env, nil) }

// AnnotateWith is Annotate with the GraphSAGE weights w (a model's own,
// nn.Model.Sage; nil: Default's).
func AnnotateWith(env *sim.Env, w *policy.SageWeights) error {
	if len(env.Edges) == 0 {
		return nil
	}
	p, err := Default()
	if w != nil {
		p, err = FromWeights(w)
	}
	if err != nil {
		return fmt.Errorf("service partners: %w", err)
	}
	if p.Decoder == nil {
		return fmt.Errorf("service partners: %w: the GraphSAGE weights %s have no decoder", ErrConfig, p.ID())
	}
	id := p.ID()
	pub, err := Publish(p.Encoder, p.Decoder, id, CallsOf(env), time.Time{})
	if err != nil {
		return fmt.Errorf("service partners: %w", err)
	}
	env.Partners, env.PartnersEncoder = policy.PartnersOf(pub, env.Services), id
	return nil
}

// CallsOf is the graph of env's calls as the site leader sees them
// (FromDependencies: the calls alone).
func CallsOf(env *sim.Env) *Graph {
	edges := make([]kubefmt.DependencyEdge, len(env.Edges))
	for i, e := range env.Edges {
		edges[i] = kubefmt.DependencyEdge{From: env.Services[e.From], To: env.Services[e.To], CallsPerSecond: e.Rate}
	}
	return FromDependencies(edges)
}

// NewEnv is sim.NewEnv (default options) and Annotate: the environment
// of a cluster and a workload with its services' partners.
func NewEnv(c *sim.Cluster, w *sim.Workload) (*sim.Env, error) { return NewEnvWith(c, w, nil) }

// NewEnvWith is NewEnv with partners from the GraphSAGE weights sw (nil:
// Default's; AnnotateWith).
func NewEnvWith(c *sim.Cluster, w *sim.Workload, sw *policy.SageWeights) (*sim.Env, error) {
	env, err := sim.NewEnv(c, w, sim.EnvOptions{})
	if err != nil {
		return nil, err
	}
	if err := AnnotateWith(env, sw); err != nil {
		return nil, err
	}
	return env, nil
}
