package sage

import (
	"fmt"
	"math"
	"sync"

	"github.com/edgesched/edgesched/policy"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
	"github.com/edgesched/edgesched/sim/scenario"
	"github.com/edgesched/edgesched/sim/scenario/apps"
)

// AffinityLoad names the experimental simulator policy of AffinityFactory.
const AffinityLoad = "sage-load"

// AffinityWeight is AffinityLoad's weight of the embedding affinity
// against dep-load's score (its dependency term has weight 1).
const AffinityWeight = 1

// FromEnv is a simulator environment's call graph: its services, with the
// number of the workload's pods of each as replicas and their mean CPU
// request, and its calls; nothing placed.
func FromEnv(env *sim.Env) *Graph {
	g := &Graph{Zones: len(env.Zones)}
	cpu := make([]int64, len(env.Services))
	for _, n := range env.Services {
		g.Services = append(g.Services, Service{Name: n})
	}
	for i := range env.Pods {
		if s := env.Pods[i].Service; s >= 0 {
			g.Services[s].Replicas++
			cpu[s] += env.Pods[i].CPU
		}
	}
	for s := range g.Services {
		if r := g.Services[s].Replicas; r > 0 {
			g.Services[s].CPUMilli = cpu[s] / int64(r)
		}
	}
	for _, e := range env.Edges {
		g.Calls = append(g.Calls, Call{From: env.Services[e.From], To: env.Services[e.To], Rate: e.Rate})
	}
	return g
}

// TrainingGraphs are the call graphs of the library apps training may use
// (apps.HeldOut), in name order.
func TrainingGraphs() ([]*Graph, error) {
	var out []*Graph
	for _, n := range apps.Names() {
		if apps.HeldOut(n) {
			continue
		}
		src, err := apps.Source(n)
		if err != nil {
			return nil, err
		}
		a, err := scenario.ParseApp(src, n)
		if err != nil {
			return nil, err
		}
		out = append(out, FromApp(a))
	}
	return out, nil
}

// Default is the encoder and decoder DefaultPretrainConfig trains on
// TrainingGraphs, as shipped (policy.DefaultSage, ID
// policy.AffinityEncoder). It is read, not retrained, so every program on
// every architecture runs the same weights (a compiler may fuse
// multiply-adds on some targets, and pretraining there would end a few
// bits away, under another ID); TestDefaultIsPretrained retrains it on
// amd64 and checks the file bit for bit. Every caller shares one
// (decoded once per process): do not change its weights.
func Default() (*Pretrained, error) { return defaultPretrained() }

var defaultPretrained = sync.OnceValues(func() (*Pretrained, error) { return FromWeights(policy.DefaultSage()) })

// AffinityFactory is an experimental simulator policy for measuring what
// the embeddings tell a placement beyond one hop: dep-load (the call rate
// the pod would exchange inside the node's zone, then TargetLoadPacking)
// plus weight times the pod's affinity to each zone, normalised over the
// candidates to [0, 100]. The affinity of zone z is the sum over the
// services u within two calls of the pod's service (either direction)
// that have running pods, of the predicted probability that the two call
// each other (the decoder's score through the sigmoid Pretrain used)
// times the share of u's pods in z. Embeddings and those probabilities
// are computed once per environment from its graph (FromEnv).
func AffinityFactory(name string, p *Pretrained, weight float64) sim.Factory {
	return sim.Factory{Name: name, New: func(env *sim.Env) (sim.Policy, error) {
		if len(env.Services) == 0 {
			return &affinityLoad{name: name, base: baseline.NewDepLoad(env, 0)}, nil
		}
		m, err := p.Encoder.Embed(FromEnv(env))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", AffinityLoad, err)
		}
		c, err := compile(FromEnv(env))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", AffinityLoad, err)
		}
		near := make([][]partner, len(env.Services))
		d := m.Dim
		for a := range near {
			// the services within two calls of a (either direction)
			seen := map[int32]bool{int32(a): true}
			for _, e := range c.nbr[a] {
				for _, u := range append([]neighbour{e}, c.nbr[e.idx]...) {
					if !seen[u.idx] {
						seen[u.idx] = true
						b := int(u.idx)
						pr := p.Decoder.Probability(m.Values[a*d:(a+1)*d], m.Values[b*d:(b+1)*d])
						near[a] = append(near[a], partner{u.idx, float32(pr)})
					}
				}
			}
		}
		return &affinityLoad{name: name, base: baseline.NewDepLoad(env, 0), near: near, weight: weight}, nil
	}}
}

// partner is a service within two calls and the predicted probability
// that the two call each other.
type partner struct {
	svc  int32
	prob float32
}

type affinityLoad struct {
	name   string
	base   sim.Policy
	near   [][]partner // per service
	weight float64
	zone   []float64
	aff    []float64
}

func (a *affinityLoad) Name() string { return a.name }

func (a *affinityLoad) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	a.base.Score(st, p, nodes, scores)
	if p.Service < 0 || a.near == nil {
		return
	}
	Z := len(st.Env.Zones)
	if cap(a.zone) < Z {
		a.zone = make([]float64, Z)
	}
	a.zone = a.zone[:Z]
	clear(a.zone)
	for _, q := range a.near[p.Service] {
		u := int(q.svc)
		k := st.ServiceCount(u)
		if k == 0 {
			continue
		}
		for z := range Z {
			if c := st.ServiceZoneCount(u, z); c > 0 {
				a.zone[z] += float64(q.prob) * float64(c) / float64(k)
			}
		}
	}
	if cap(a.aff) < len(nodes) {
		a.aff = make([]float64, len(nodes))
	}
	a.aff = a.aff[:len(nodes)]
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, n := range nodes {
		v := a.zone[st.Nodes[n].Zone]
		a.aff[i] = v
		lo, hi = min(lo, v), max(hi, v)
	}
	if hi == lo {
		return
	}
	for i := range scores {
		scores[i] += a.weight * baseline.MaxNodeScore * (a.aff[i] - lo) / (hi - lo)
	}
}
