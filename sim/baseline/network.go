package baseline

import (
	"math"
	"slices"

	"github.com/edgesched/edgesched/sim"
)

// Names of the dependency-aware baselines.
const (
	// NetworkOverhead is scheduler-plugins' network-aware profile.
	NetworkOverhead = "network-overhead"
	// DepLoad is edgesched's own dependency- and load-aware heuristic.
	DepLoad = "dep-load"
)

// NetworkOverheadWeight is the weight of the NetworkOverhead score plugin
// against BalancedAllocation's 1 in scheduler-plugins' documented profile.
const NetworkOverheadWeight = 5

// networkOverhead is scheduler-plugins' network-aware scheduling profile
// (plugins/networkaware, its documented KubeSchedulerConfiguration):
// NetworkOverhead with weight 5 plus NodeResourcesBalancedAllocation with
// weight 1, NodeResourcesFit disabled. NetworkOverhead's score is the
// accumulated network cost from the node to every running replica of the
// pod's dependencies (the services it calls, as an AppGroup lists them):
// 1 per replica in the node's zone, the zones' network cost (here the
// round-trip time in ms now) per replica elsewhere; candidates are then
// normalised so that the lowest cost scores 100 and the highest 0 (all
// equal: all 0). Differences from the plugin: a replica on the same node
// costs 1 (the simulator counts replicas per zone), there is no Filter
// (scenarios carry no maxNetworkCost) and no TopologicalSort queue (pods
// arrive in trace order).
type networkOverhead struct{ cost, zone []float64 }

func (*networkOverhead) Name() string { return NetworkOverhead }

func (o *networkOverhead) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	o.cost, o.zone = dependencyCosts(st, p, nodes, o.cost, o.zone)
	normaliseLowBest(o.cost)
	for i, n := range nodes {
		nd := &st.Nodes[n]
		var balanced int64
		if p.CPU != 0 || p.Mem != 0 {
			balanced = BalancedScore(nd.CPU-nd.CPUFree+p.CPU, nd.CPU, nd.Mem-nd.MemFree+p.Mem, nd.Mem)
		}
		scores[i] = NetworkOverheadWeight*math.Floor(o.cost[i]) + float64(balanced)
	}
}

// dependencyCosts fills dst with NetworkOverhead's accumulated cost of
// each candidate node for pod p (0 for a pod of no service). The cost
// depends on the node's zone alone, so it is summed once per zone (in
// zc) and read per candidate.
func dependencyCosts(st *sim.State, p *sim.Pod, nodes []int32, dst, zc []float64) ([]float64, []float64) {
	dst = zeroed(dst, len(nodes))
	if p.Service < 0 {
		return dst, zc
	}
	env := st.Env
	zc = zeroed(zc, len(env.Zones))
	for zn := range zc {
		var c float64
		for _, ei := range env.OutEdges[p.Service] {
			t := int(env.Edges[ei].To)
			for z := range env.Zones {
				k := st.ServiceZoneCount(t, z)
				if k == 0 {
					continue
				}
				if z == zn {
					c += float64(k)
				} else {
					c += float64(k) * st.RTT(zn, z)
				}
			}
		}
		zc[zn] = c
	}
	for i, n := range nodes {
		dst[i] = zc[st.Nodes[n].Zone]
	}
	return dst, zc
}

// zeroed returns buf resized to n zeros, reusing its storage.
func zeroed(buf []float64, n int) []float64 {
	buf = slices.Grow(buf[:0], n)[:n]
	clear(buf)
	return buf
}

// normaliseLowBest maps costs to [0, MaxNodeScore] with the lowest 100 and
// the highest 0; all equal become 0.
func normaliseLowBest(c []float64) {
	if len(c) == 0 {
		return
	}
	lo, hi := c[0], c[0]
	for _, v := range c {
		lo, hi = min(lo, v), max(hi, v)
	}
	for i, v := range c {
		if hi == lo {
			c[i] = 0
		} else {
			c[i] = MaxNodeScore * (hi - v) / (hi - lo)
		}
	}
}

// DepLoadWeight is the weight of DepLoad's dependency term against its
// measured-load term.
const DepLoadWeight = 1

// depLoad is edgesched's own heuristic for loaded edge fleets (not a
// published baseline): Weight times the call rate the pod would exchange
// within the node's zone — calls to its callees and from its callers,
// spread evenly over their running replicas — normalised over the
// candidates to [0, 100], plus TargetLoadPacking's score of the node's
// measured CPU. It is the teacher of the loaded-fleet model
// (configs/train-edge-loaded.yaml).
type depLoad struct {
	tlp    targetLoadPacking
	weight float64
	gain   []float64
	zone   []float64
	in     [][]int32
}

// NewDepLoad returns DepLoad with dependency weight w (0: DepLoadWeight).
func NewDepLoad(env *sim.Env, w float64) sim.Policy {
	if w == 0 {
		w = DepLoadWeight
	}
	in := make([][]int32, len(env.Services))
	for i, e := range env.Edges {
		in[e.To] = append(in[e.To], int32(i))
	}
	return &depLoad{tlp: targetLoadPacking{args: DefaultTLPArgs()}, weight: w, in: in}
}

func (*depLoad) Name() string { return DepLoad }

func (d *depLoad) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	d.tlp.Score(st, p, nodes, scores)
	if p.Service < 0 {
		return
	}
	env := st.Env
	local := func(peer int, rate float64, zn int) float64 {
		k := st.ServiceCount(peer)
		if k == 0 || rate == 0 {
			return 0
		}
		return rate * float64(st.ServiceZoneCount(peer, zn)) / float64(k)
	}
	// the gain depends on the node's zone alone: summed once per zone
	d.zone = zeroed(d.zone, len(env.Zones))
	for zn := range d.zone {
		var g float64
		for _, ei := range env.OutEdges[p.Service] {
			e := env.Edges[ei]
			g += local(int(e.To), e.Rate, zn)
		}
		for _, ei := range d.in[p.Service] {
			e := env.Edges[ei]
			g += local(int(e.From), e.Rate, zn)
		}
		d.zone[zn] = -g
	}
	d.gain = zeroed(d.gain, len(nodes))
	for i, n := range nodes {
		d.gain[i] = d.zone[st.Nodes[n].Zone]
	}
	normaliseLowBest(d.gain)
	for i := range scores {
		scores[i] += d.weight * d.gain[i]
	}
}
