package baseline

import "github.com/edgesched/edgesched/sim"

// CarbonLoad is edgesched's carbon-aware heuristic for loaded edge fleets.
const CarbonLoad = "carbon-load"

// CarbonLoadWeight is the weight of CarbonLoad's emission term against
// DepLoad's score (dependency and measured load), chosen on the training
// families' selection workloads (docs/training.md, "Carbon on loaded fleets").
const CarbonLoadWeight = 2

// carbonLoad is DepLoad plus Weight times the emission rate the pod would
// add on the node, low best, normalised over the candidates to [0, 100]:
// the grid's carbon intensity at the node now times the node's power for
// the pod's requests (WattsPerCore per requested core, WattsPerGPU per
// requested GPU). A pod without GPUs sees every node with GPUs as the
// worst emitter, so efficient GPU boards are kept for the pods that need
// them. It is not a published baseline, and it knows what the scheduler
// would know: requests, not the pod's eventual use.
type carbonLoad struct {
	dep    sim.Policy
	weight float64
	rate   []float64
}

// NewCarbonLoad returns CarbonLoad with emission weight w (0:
// CarbonLoadWeight).
func NewCarbonLoad(env *sim.Env, w float64) sim.Policy {
	if w == 0 {
		w = CarbonLoadWeight
	}
	return &carbonLoad{dep: NewDepLoad(env, 0), weight: w}
}

func (*carbonLoad) Name() string { return CarbonLoad }

func (c *carbonLoad) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	c.dep.Score(st, p, nodes, scores)
	c.rate = zeroed(c.rate, len(nodes))
	worst := 0.0
	for i, n := range nodes {
		nd := &st.Nodes[n]
		c.rate[i] = st.Env.CarbonAt(nd.CarbonZone, st.Now) * sim.RequestWatts(&nd.NodeInfo, p)
		worst = max(worst, c.rate[i])
	}
	if p.GPUDemand() == 0 {
		for i, n := range nodes {
			if st.Nodes[n].GPUs > 0 {
				c.rate[i] = worst
			}
		}
	}
	normaliseLowBest(c.rate)
	for i := range scores {
		scores[i] += c.weight * c.rate[i]
	}
}
