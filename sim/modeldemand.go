package sim

import "math"

// ModelDemand says how the target workload's GPU demand falls on the
// cluster's GPU models: which models it can use at all, which it can use
// only, and how much of the demand of pods that name GPU models is
// directed at each. Slices are indexed by model (Env.Models); every share
// is of the target workload's expected GPU demand (sum over classes of
// popularity times GPUs times milli-GPU), so the values do not depend on
// the cluster's size.
type ModelDemand struct {
	// Capacity[g] is the cluster's GPU capacity of model g (milli-GPU).
	Capacity []float64
	// Accept[g] is the share of GPU demand that can run on model g.
	Accept []float64
	// Exclusive[g] is the share that can run on model g and no other
	// model the cluster has.
	Exclusive []float64
	// Need[g] is the share of GPU demand from classes that name models,
	// directed at g: each such class's demand split over the models it
	// accepts in proportion to their capacity in the cluster.
	Need []float64
}

// NewModelDemand computes the model demand of target workload t on nodes.
// Classes whose accepted models the cluster does not have are left out
// (no placement can serve them).
func NewModelDemand(t *TargetWorkload, nodes []NodeInfo, models int) ModelDemand {
	d := ModelDemand{Capacity: make([]float64, models), Accept: make([]float64, models), Exclusive: make([]float64, models), Need: make([]float64, models)}
	for i := range nodes {
		if g := nodes[i].Model; g >= 0 && int(g) < models {
			d.Capacity[g] += float64(nodes[i].GPUs) * MilliGPU
		}
	}
	var total float64
	for _, c := range t.Classes {
		total += c.P * float64(c.GPUs) * float64(c.GPUMilli)
	}
	if total == 0 {
		return d
	}
	for _, c := range t.Classes {
		w := c.P * float64(c.GPUs) * float64(c.GPUMilli) / total
		if w == 0 {
			continue
		}
		var supply float64
		only := -1
		for g := range models {
			if d.Capacity[g] > 0 && c.accepts(g) {
				supply += d.Capacity[g]
				if only == -1 {
					only = g
				} else {
					only = -2
				}
			}
		}
		if supply == 0 {
			continue
		}
		for g := range models {
			if d.Capacity[g] == 0 || !c.accepts(g) {
				continue
			}
			d.Accept[g] += w
			if c.GPUMask != 0 {
				d.Need[g] += w * d.Capacity[g] / supply
			}
		}
		if only >= 0 {
			d.Exclusive[only] += w
		}
	}
	return d
}

func (c *TargetClass) accepts(g int) bool { return c.GPUMask == 0 || c.GPUMask&(1<<uint(g)) != 0 }

// Pressure is how hard pods naming GPU models will press on model g given
// what is free now: Need[g] divided by model g's share of the cluster's
// free GPU. 1 means the named demand alone would take all of g's share;
// a model with nothing free reports MaxPressure, one nobody names 0.
func (d ModelDemand) Pressure(st *State, g int32) float64 {
	if g < 0 || int(g) >= len(d.Need) || d.Need[g] == 0 {
		return 0
	}
	free := float64(st.ModelFree[g])
	total := float64(st.Env.Capacity.GPU - st.Alloc.GPU)
	if free <= 0 || total <= 0 {
		return MaxPressure
	}
	return math.Min(MaxPressure, d.Need[g]*total/free)
}

// Pressures writes Pressure(st, g) of every model g into dst (len
// Need) and returns it.
func (d ModelDemand) Pressures(st *State, dst []float64) []float64 {
	for g := range d.Need {
		dst[g] = d.Pressure(st, int32(g))
	}
	return dst
}

// MaxPressure caps ModelDemand.Pressure.
const MaxPressure = 16

// ArchShares returns, for architecture a, the share of the running pods'
// CPU requests that need a (pinned) and a's share of the cluster's free
// CPU (free): what ModelDemand's accept and pressure say of GPU models,
// with the running pods standing for the workload (the scheduler sees
// them, not the pods to come). Each is 0 for ArchAny and when nothing
// runs, or nothing is free.
func (st *State) ArchShares(a Arch) (pinned, free float64) {
	if a == ArchAny || int(a) >= NumArch {
		return 0, 0
	}
	// the totals over every architecture are Alloc.CPU and what the
	// capacity leaves of it
	if alloc := st.Alloc.CPU; alloc > 0 {
		pinned = float64(st.ArchPinned[a]) / float64(alloc)
	}
	if total := st.Env.Capacity.CPU - st.Alloc.CPU; total > 0 {
		free = float64(st.ArchFree[a]) / float64(total)
	}
	return pinned, free
}

// GPUFragFit is GPUFrag measured against the part of the target workload
// that accepts the node's GPU model (classes naming other models are left
// out and the rest renormalised): the fragmentation as seen by the pods
// that could use this node. Without such classes it is 0.
func (t *TargetWorkload) GPUFragFit(cpuFree int64, model int32, gpuFree []int64) float64 {
	var p float64
	for i := range t.Classes {
		if c := &t.Classes[i]; c.GPUs == 0 || (model >= 0 && c.accepts(int(model))) {
			p += c.P
		}
	}
	if p == 0 {
		return 0
	}
	return t.gpuFrag(cpuFree, model, gpuFree, true) / p
}
