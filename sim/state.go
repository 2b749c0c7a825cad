package sim

import (
	"errors"
	"fmt"

	"github.com/edgesched/edgesched/sim/nodeload"
)

// ErrPlacement reports a binding that would over-commit a node or break a
// constraint; State never applies such a binding.
var ErrPlacement = errors.New("sim: invalid placement")

// Node is a node's static description plus its changing allocation.
type Node struct {
	NodeInfo
	CPUFree, MemFree int64
	// GPUFree holds each device's free share in milli-GPU.
	GPUFree []int64
	// FullFree counts devices with all 1000 milli-GPU free, MaxFree is the
	// largest free share of any device and GPUFreeTotal their sum.
	FullFree     int32
	MaxFree      int64
	GPUFreeTotal int64
	// CPUUsed and MemUsed are the resources actually used by the node's
	// pods (requests times usage), in milli-CPU and MiB.
	CPUUsed, MemUsed float64
	// NZCPU and NZMem are the requests as the kube-scheduler counts them
	// for scoring: a pod without a CPU (memory) request counts 100 milli-CPU
	// (200 MiB).
	NZCPU, NZMem int64
	Pods         int32
	// Version changes whenever the node's allocation changes, so policies
	// can cache per-node results. Versions come from the state's clock, so
	// a node never reuses one, and clones draw from disjoint ranges.
	Version uint64
	// FragGPU and FragCPU are the node's fragmentation (see TargetWorkload).
	FragGPU, FragCPU float64
}

// Kubernetes' defaults for pods without requests, used in scoring only.
const (
	DefaultNonZeroMilliCPU = 100
	DefaultNonZeroMemMiB   = 200
)

// Placement records where a pod runs.
type Placement struct {
	Node int32 // -1 when not running
	GPUs []int16
}

// State is the changing state of one run: node allocations, where each pod
// runs, and running totals the measures need. A State belongs to one run
// and one goroutine.
type State struct {
	Env   *Env
	Nodes []Node
	// Pods are the run's pods, indexed by Pod.ID.
	Pods []Pod
	// Placements[i] is where pod i runs.
	Placements []Placement
	// Now is the simulated time in seconds.
	Now int64

	// Alloc sums the requests of running pods; UsedCPU and UsedMem their
	// actual use.
	Alloc            Resources
	UsedCPU, UsedMem float64
	// FragGPU and FragCPU sum the nodes' fragmentation.
	FragGPU, FragCPU float64
	// PowerByCarbonZone is the power (W) of placed work per carbon zone.
	PowerByCarbonZone []float64
	// ModelFree[g] is the free GPU (milli-GPU) of the nodes of model g.
	ModelFree []int64
	// ArchFree[a] is the free CPU (milli-CPU) of the nodes of architecture
	// a, down nodes included (as ModelFree); ArchPinned[a] the CPU
	// requests of running pods that need a (ArchPinned[ArchAny]: of those
	// that run anywhere).
	ArchFree, ArchPinned [NumArch]int64
	// Versions[n] is Nodes[n].Version, packed so that a policy's scan of
	// its per-node caches stays in cache (read only).
	Versions []uint64
	// ServiceVersion changes whenever a pod of a service is bound or
	// unbound, so caches of dependency-dependent values know when to go.
	ServiceVersion uint64
	// LoadModel is the node response behind Telemetry and the latency
	// proxy (the run engine, sim/engine, sets its MaxUtil from the run's
	// config); NoiseSeed seeds the load profiles' bursts (the engine sets
	// the run's seed).
	LoadModel nodeload.Model
	NoiseSeed uint64
	// clock issues node versions (see Node.Version).
	clock uint64

	agg      []loadAgg // per node and load profile
	down     []bool    // per node
	flap     []bool    // per zone
	measured []measured

	running []int32
	runPos  []int32
	// svcZone[s*Z+z] counts service s's running replicas in zone z.
	svcZone  []int32
	svcCount []int32
	fit      []nodeFit
	tags     []int32 // per node, per GPU-affinity tag
	tagKinds []int32 // per node, number of distinct tags present

	memo map[fragKey]float64
}

// NewState returns the empty cluster of env.
func NewState(env *Env) *State {
	st := &State{
		Env:               env,
		Nodes:             make([]Node, len(env.Nodes)),
		fit:               make([]nodeFit, len(env.Nodes)),
		PowerByCarbonZone: make([]float64, len(env.CarbonZones)),
		svcZone:           make([]int32, len(env.Services)*len(env.Zones)),
		svcCount:          make([]int32, len(env.Services)),
		tags:              make([]int32, len(env.Nodes)*NumGPUTags),
		tagKinds:          make([]int32, len(env.Nodes)),
		memo:              map[fragKey]float64{},
		ModelFree:         make([]int64, len(env.Models)),
		Versions:          make([]uint64, len(env.Nodes)),
		LoadModel:         nodeload.DefaultModel(),
		agg:               make([]loadAgg, len(env.Nodes)*len(env.Profiles)),
		down:              make([]bool, len(env.Nodes)),
		flap:              make([]bool, len(env.Zones)),
	}
	var gpus int
	for i := range env.Nodes {
		gpus += int(env.Nodes[i].GPUs)
	}
	backing := make([]int64, gpus)
	for i := range env.Nodes {
		ni := &env.Nodes[i]
		n := &st.Nodes[i]
		n.NodeInfo = *ni
		n.CPUFree, n.MemFree = ni.CPU, ni.Mem
		st.ArchFree[ni.Arch] += ni.CPU
		n.GPUFree, backing = backing[:ni.GPUs:ni.GPUs], backing[ni.GPUs:]
		for g := range n.GPUFree {
			n.GPUFree[g] = MilliGPU
		}
		n.FullFree = ni.GPUs
		n.GPUFreeTotal = int64(ni.GPUs) * MilliGPU
		if ni.Model >= 0 {
			st.ModelFree[ni.Model] += n.GPUFreeTotal
		}
		if ni.GPUs > 0 {
			n.MaxFree = MilliGPU
		}
		st.refreshFrag(i)
		st.refreshFit(i)
	}
	return st
}

// AddPod appends a pod to the run and returns its ID. The pod need not be
// one of the workload's (tests and twins add their own), but its service
// must be -1 or an index of Env.Services, and a constrained pod's Template
// must index Env.Pods.
func (st *State) AddPod(p Pod) (int32, error) {
	switch {
	case p.Service < -1 || int(p.Service) >= len(st.Env.Services):
		return -1, fmt.Errorf("%w: pod service %d (have %d services; -1 for none)", ErrInvalid, p.Service, len(st.Env.Services))
	case p.Constrained && (p.Template < 0 || int(p.Template) >= len(st.Env.Pods)):
		return -1, fmt.Errorf("%w: constrained pod with template %d", ErrInvalid, p.Template)
	case p.GPUs < 0 || p.CPU < 0 || p.Mem < 0 || (p.GPUs > 0 && (p.GPUMilli <= 0 || p.GPUMilli > MilliGPU)):
		return -1, fmt.Errorf("%w: pod requests cpu %d mem %d gpus %d x %d", ErrInvalid, p.CPU, p.Mem, p.GPUs, p.GPUMilli)
	}
	p.ID = int32(len(st.Pods))
	st.Pods = append(st.Pods, p)
	st.Placements = append(st.Placements, Placement{Node: -1})
	st.runPos = append(st.runPos, -1)
	return p.ID, nil
}

// Running returns the IDs of running pods (do not modify).
func (st *State) Running() []int32 { return st.running }

// Feasible reports whether pod p fits on node n now: CPU, memory, GPU count
// and share, GPU model, architecture, node selector and taints.
func (st *State) Feasible(n int, p *Pod) bool {
	f := &st.fit[n]
	if f.cpuFree < p.CPU || f.memFree < p.Mem {
		return false
	}
	if p.Arch != ArchAny && p.Arch != f.arch {
		return false
	}
	if p.GPUs > 0 {
		if f.model < 0 || (p.GPUMask != 0 && p.GPUMask&(1<<uint(f.model)) == 0) {
			return false
		}
		switch {
		case p.GPUMilli >= MilliGPU:
			if f.fullFree < p.GPUs {
				return false
			}
		case p.GPUs == 1:
			if f.maxFree < p.GPUMilli {
				return false
			}
		default:
			var fits int32
			for _, g := range st.Nodes[n].GPUFree {
				if g >= p.GPUMilli {
					fits++
				}
			}
			if fits < p.GPUs {
				return false
			}
		}
	}
	if f.restricted || p.Constrained {
		return st.constraintsOK(&st.Nodes[n], p)
	}
	return true
}

// RoomFor reports whether the nodes that could take pod p apart from their
// free resources (architecture, GPU model, node selector and taints; up)
// have, summed, the free CPU, memory and GPU share p requests, and there
// is at least one. A pod that fits no node while RoomFor holds failed for
// fragmentation: its eligible nodes had the room, split among them. When
// RoomFor is false no placement of p alone could have helped then. A
// run's node filter (sim.NodeFilter: the language policy's required
// rules) is not consulted: its Admit is only asked about nodes that fit.
func (st *State) RoomFor(p *Pod) bool {
	var cpu, mem, gpu int64
	eligible := false
	for n := range st.Nodes {
		f := &st.fit[n]
		if st.down[n] || (p.Arch != ArchAny && p.Arch != f.arch) {
			continue
		}
		if p.GPUs > 0 && (f.model < 0 || (p.GPUMask != 0 && p.GPUMask&(1<<uint(f.model)) == 0)) {
			continue
		}
		if (f.restricted || p.Constrained) && !st.constraintsOK(&st.Nodes[n], p) {
			continue
		}
		nd := &st.Nodes[n]
		cpu += nd.CPUFree
		mem += nd.MemFree
		gpu += nd.GPUFreeTotal
		eligible = true
	}
	return eligible && cpu >= p.CPU && mem >= p.Mem && gpu >= p.GPUDemand()
}

// nodeFit is the part of a node the filter reads, packed so the filter's
// scan over every node stays in cache (40 bytes a node instead of the
// full Node).
type nodeFit struct {
	cpuFree, memFree, maxFree int64
	fullFree, model           int32
	arch                      Arch
	restricted                bool
}

func (st *State) refreshFit(n int) {
	nd := &st.Nodes[n]
	st.fit[n] = nodeFit{cpuFree: nd.CPUFree, memFree: nd.MemFree, maxFree: nd.MaxFree, fullFree: nd.FullFree, model: nd.Model, arch: nd.Arch, restricted: nd.Restricted}
	if st.down[n] {
		st.fit[n].cpuFree = -1 // below every request: a failed node fits nothing
	}
}

func (st *State) constraintsOK(nd *Node, p *Pod) bool {
	spec := st.Env.Spec(p)
	for k, v := range spec.NodeSelector {
		if nd.Labels[k] != v {
			return false
		}
	}
	for _, t := range nd.Taints {
		if t.Effect == EffectPreferNoSchedule {
			continue
		}
		tolerated := false
		for _, tol := range spec.Tolerations {
			if tol.Tolerates(t) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return false
		}
	}
	return true
}

// BestFitGPUs picks devices for p on node n the way a GPU-sharing device
// plugin does by default: for a shared GPU, the device with the least free
// share that still fits (lowest index on ties); for whole GPUs, the
// lowest-indexed fully free devices. It appends to dst and returns it.
func (st *State) BestFitGPUs(n int, p *Pod, dst []int) []int {
	dst = dst[:0]
	if p.GPUs == 0 {
		return dst
	}
	nd := &st.Nodes[n]
	if p.GPUMilli >= MilliGPU {
		for g, f := range nd.GPUFree {
			if f == MilliGPU {
				dst = append(dst, g)
				if int32(len(dst)) == p.GPUs {
					break
				}
			}
		}
		return dst
	}
	for range p.GPUs {
		best := -1
		for g, f := range nd.GPUFree {
			if f < p.GPUMilli || containsInt(dst, g) {
				continue
			}
			if best < 0 || f < nd.GPUFree[best] {
				best = g
			}
		}
		if best < 0 {
			break
		}
		dst = append(dst, best)
	}
	return dst
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Bind binds pod id to node n using the given devices. It refuses (with
// ErrPlacement and no change) anything that does not fit.
func (st *State) Bind(id int32, n int, gpus []int) error {
	if id < 0 || int(id) >= len(st.Pods) {
		return fmt.Errorf("%w: no pod %d", ErrPlacement, id)
	}
	if n < 0 || n >= len(st.Nodes) {
		return fmt.Errorf("%w: no node %d", ErrPlacement, n)
	}
	p := &st.Pods[id]
	if st.Placements[id].Node >= 0 {
		return fmt.Errorf("%w: pod %d already runs on node %d", ErrPlacement, id, st.Placements[id].Node)
	}
	if !st.Feasible(n, p) {
		return fmt.Errorf("%w: pod %d does not fit on node %s", ErrPlacement, id, st.Nodes[n].Name)
	}
	nd := &st.Nodes[n]
	if int32(len(gpus)) != p.GPUs {
		return fmt.Errorf("%w: pod %d needs %d gpus, got %d device ids", ErrPlacement, id, p.GPUs, len(gpus))
	}
	for i, g := range gpus {
		if g < 0 || g >= len(nd.GPUFree) || nd.GPUFree[g] < p.GPUMilli || containsInt(gpus[:i], g) {
			return fmt.Errorf("%w: pod %d: device %d on node %s cannot take %d milli-GPU", ErrPlacement, id, g, nd.Name, p.GPUMilli)
		}
	}
	var ids []int16
	if len(gpus) > 0 {
		ids = make([]int16, len(gpus))
		for i, g := range gpus {
			ids[i] = int16(g)
		}
	}
	st.Placements[id] = Placement{Node: int32(n), GPUs: ids}
	st.apply(p, n, ids, +1)
	st.runPos[id] = int32(len(st.running))
	st.running = append(st.running, id)
	return nil
}

// Unbind unbinds a running pod and frees its resources.
func (st *State) Unbind(id int32) error {
	if id < 0 || int(id) >= len(st.Pods) || st.Placements[id].Node < 0 {
		return fmt.Errorf("%w: pod %d is not running", ErrPlacement, id)
	}
	pl := st.Placements[id]
	st.apply(&st.Pods[id], int(pl.Node), pl.GPUs, -1)
	st.Placements[id] = Placement{Node: -1}
	pos := st.runPos[id]
	last := st.running[len(st.running)-1]
	st.running[pos] = last
	st.runPos[last] = pos
	st.running = st.running[:len(st.running)-1]
	st.runPos[id] = -1
	return nil
}

// apply adds (sign=+1) or removes (sign=-1) a pod's use of node n.
func (st *State) apply(p *Pod, n int, gpus []int16, sign int64) {
	nd := &st.Nodes[n]
	nd.CPUFree -= sign * p.CPU
	nd.MemFree -= sign * p.Mem
	nzc, nzm := p.CPU, p.Mem
	if nzc == 0 {
		nzc = DefaultNonZeroMilliCPU
	}
	if nzm == 0 {
		nzm = DefaultNonZeroMemMiB
	}
	nd.NZCPU += sign * nzc
	nd.NZMem += sign * nzm
	usedCPU := float64(p.CPU) * p.Usage
	usedMem := float64(p.Mem) * p.MemUsage
	nd.CPUUsed += float64(sign) * usedCPU
	nd.MemUsed += float64(sign) * usedMem
	nd.Pods += int32(sign)
	a := &st.agg[n*len(st.Env.Profiles)+int(p.Profile)]
	a.cpu += float64(sign) * usedCPU
	a.contention += float64(sign) * usedCPU * p.Interference
	a.net += float64(sign) * p.NetMbps
	for _, g := range gpus {
		nd.GPUFree[g] -= sign * p.GPUMilli
	}
	if len(gpus) > 0 && nd.Model >= 0 {
		st.ModelFree[nd.Model] -= sign * int64(len(gpus)) * p.GPUMilli
	}
	if len(gpus) > 0 {
		nd.FullFree, nd.MaxFree, nd.GPUFreeTotal = 0, 0, 0
		for _, f := range nd.GPUFree {
			if f == MilliGPU {
				nd.FullFree++
			}
			nd.MaxFree = max(nd.MaxFree, f)
			nd.GPUFreeTotal += f
		}
		tag := GPUTag(p)
		k := n*NumGPUTags + tag
		before := st.tags[k]
		st.tags[k] += int32(sign)
		if before == 0 && st.tags[k] > 0 {
			st.tagKinds[n]++
		} else if before > 0 && st.tags[k] == 0 {
			st.tagKinds[n]--
		}
	}
	st.touch(n)

	st.Alloc.CPU += sign * p.CPU
	st.Alloc.Mem += sign * p.Mem
	st.ArchFree[nd.Arch] -= sign * p.CPU
	st.ArchPinned[p.Arch] += sign * p.CPU
	st.Alloc.GPU += sign * p.GPUDemand()
	st.UsedCPU += float64(sign) * usedCPU
	st.UsedMem += float64(sign) * usedMem
	st.PowerByCarbonZone[nd.CarbonZone] += float64(sign) * podWatts(nd, p)
	if p.Service >= 0 {
		st.svcZone[int(p.Service)*len(st.Env.Zones)+int(nd.Zone)] += int32(sign)
		st.svcCount[p.Service] += int32(sign)
		st.ServiceVersion++
	}
	st.refreshFrag(n)
	st.refreshFit(n)
}

func podWatts(nd *Node, p *Pod) float64 {
	return float64(p.CPU)*p.Usage/1000*nd.WattsPerCore + float64(p.GPUDemand())/MilliGPU*nd.WattsPerGPU
}

// RequestWatts is the power node nd would draw for pod p's requests: what
// a scheduler knows (requested cores and GPUs), not the pod's use, which
// the emissions the simulator reports follow.
func RequestWatts(nd *NodeInfo, p *Pod) float64 {
	return float64(p.CPU)/1000*nd.WattsPerCore + float64(p.GPUDemand())/MilliGPU*nd.WattsPerGPU
}

// NumGPUTags is the number of GPU-affinity tags: tag 0 is "shares one
// GPU", tag k >= 1 is "takes k whole GPUs".
const NumGPUTags = MaxGPUsPerNode + 1

// GPUTag returns the pod's GPU-affinity tag (-1 for a pod without GPUs),
// as used by the GPU Clustering baseline.
func GPUTag(p *Pod) int {
	switch {
	case p.GPUs == 0:
		return -1
	case p.GPUMilli < MilliGPU:
		return 0
	}
	return int(p.GPUs)
}

// TagCount returns how many running pods on node n have the given tag, and
// TagKinds how many distinct tags are present there.
func (st *State) TagCount(n, tag int) int32 { return st.tags[n*NumGPUTags+tag] }

// TagKinds returns the number of distinct GPU-affinity tags on node n.
func (st *State) TagKinds(n int) int32 { return st.tagKinds[n] }

// ServiceZoneCount returns how many replicas of service s run in zone z.
func (st *State) ServiceZoneCount(s, z int) int32 { return st.svcZone[s*len(st.Env.Zones)+z] }

// ServiceCount returns how many replicas of service s run.
func (st *State) ServiceCount(s int) int32 { return st.svcCount[s] }

// touch gives node n a new version (Node.Version and its packed copy in
// Versions): every change of what a node's scores read goes through it.
func (st *State) touch(n int) {
	st.clock++
	st.Nodes[n].Version = st.clock
	st.Versions[n] = st.clock
}

// fragKey identifies a node state for the GPU fragmentation memo.
type fragKey struct {
	cpuLevel int64
	model    int32
	n        int32
	g        [8]int16
	fit      bool
}

// refreshFrag recomputes node n's fragmentation and the cluster totals.
func (st *State) refreshFrag(n int) {
	nd := &st.Nodes[n]
	st.FragGPU -= nd.FragGPU
	st.FragCPU -= nd.FragCPU
	nd.FragGPU = st.GPUFragOf(nd.CPUFree, nd.Model, nd.GPUFree)
	nd.FragCPU = st.Env.Target.CPUFrag(nd.CPUFree, nd.MemFree)
	st.FragGPU += nd.FragGPU
	st.FragCPU += nd.FragCPU
}

// GPUFragOf returns TargetWorkload.GPUFrag for a node state, memoised on
// the state (free CPU level, model, sorted device shares); nodes with more
// than 8 devices are computed directly.
func (st *State) GPUFragOf(cpuFree int64, model int32, gpuFree []int64) float64 {
	return st.gpuFragOf(cpuFree, model, gpuFree, false)
}

// GPUFragFitOf is GPUFragOf for TargetWorkload.GPUFragFit.
func (st *State) GPUFragFitOf(cpuFree int64, model int32, gpuFree []int64) float64 {
	return st.gpuFragOf(cpuFree, model, gpuFree, true)
}

func (st *State) gpuFragOf(cpuFree int64, model int32, gpuFree []int64, fit bool) float64 {
	t := st.Env.Target
	// Direct calls, not a method value: a bound method value is a closure
	// the compiler puts on the heap, once per call (10% of a learned
	// sweep's CPU went to those allocations).
	frag := func(cpuFree int64, model int32, g []int64) float64 {
		if fit {
			return t.GPUFragFit(cpuFree, model, g)
		}
		return t.GPUFrag(cpuFree, model, g)
	}
	if len(gpuFree) == 0 {
		return 0
	}
	if len(gpuFree) > 8 {
		return frag(cpuFree, model, gpuFree)
	}
	k := fragKey{cpuLevel: t.cpuLevel(cpuFree), model: model, n: int32(len(gpuFree)), fit: fit}
	for i, g := range gpuFree {
		// insertion sort, descending
		j := i
		for j > 0 && k.g[j-1] < int16(g) {
			k.g[j] = k.g[j-1]
			j--
		}
		k.g[j] = int16(g)
	}
	if v, ok := st.memo[k]; ok {
		return v
	}
	var buf [8]int64
	for i := range k.n {
		buf[i] = int64(k.g[i])
	}
	v := frag(t.levelCPU(k.cpuLevel), model, buf[:k.n])
	st.memo[k] = v
	return v
}

// GPUFragAfter returns node n's GPU fragmentation if pod p were placed on
// the given devices (without placing it).
func (st *State) GPUFragAfter(n int, p *Pod, gpus []int) float64 {
	return st.gpuFragAfter(n, p, gpus, false)
}

// GPUFragFitAfter is GPUFragAfter for TargetWorkload.GPUFragFit.
func (st *State) GPUFragFitAfter(n int, p *Pod, gpus []int) float64 {
	return st.gpuFragAfter(n, p, gpus, true)
}

func (st *State) gpuFragAfter(n int, p *Pod, gpus []int, fit bool) float64 {
	nd := &st.Nodes[n]
	if len(nd.GPUFree) == 0 {
		return 0
	}
	var buf [MaxGPUsPerNode]int64
	after := buf[:len(nd.GPUFree)]
	copy(after, nd.GPUFree)
	for _, g := range gpus {
		after[g] -= p.GPUMilli
	}
	return st.gpuFragOf(nd.CPUFree-p.CPU, nd.Model, after, fit)
}

// Clone returns an independent copy of the state for what-if evaluation
// (lookahead, twins). The copy shares the fragmentation memo, which only
// caches pure values, so the copy and the original must stay in one
// goroutine. Unchanged nodes keep their versions, so per-node caches keyed
// by version stay valid for them; nodes the copy changes take versions
// from versionBase up, which must be above every version the original
// and other live copies will issue (e.g. k << 40 for the k-th copy).
func (st *State) Clone(versionBase uint64) *State {
	c := *st
	c.Nodes = make([]Node, len(st.Nodes))
	var gpus int
	for i := range st.Nodes {
		gpus += len(st.Nodes[i].GPUFree)
	}
	backing := make([]int64, 0, gpus)
	for i := range st.Nodes {
		c.Nodes[i] = st.Nodes[i]
		start := len(backing)
		backing = append(backing, st.Nodes[i].GPUFree...)
		c.Nodes[i].GPUFree = backing[start:len(backing):len(backing)]
	}
	c.clock = versionBase
	c.Pods = append([]Pod(nil), st.Pods...)
	c.Placements = make([]Placement, len(st.Placements))
	for i, p := range st.Placements {
		c.Placements[i] = Placement{Node: p.Node, GPUs: append([]int16(nil), p.GPUs...)}
	}
	c.PowerByCarbonZone = append([]float64(nil), st.PowerByCarbonZone...)
	c.ModelFree = append([]int64(nil), st.ModelFree...)
	c.Versions = append([]uint64(nil), st.Versions...)
	c.running = append([]int32(nil), st.running...)
	c.runPos = append([]int32(nil), st.runPos...)
	c.svcZone = append([]int32(nil), st.svcZone...)
	c.svcCount = append([]int32(nil), st.svcCount...)
	c.fit = append([]nodeFit(nil), st.fit...)
	c.tags = append([]int32(nil), st.tags...)
	c.tagKinds = append([]int32(nil), st.tagKinds...)
	c.agg = append([]loadAgg(nil), st.agg...)
	c.down = append([]bool(nil), st.down...)
	c.flap = append([]bool(nil), st.flap...)
	if st.measured != nil {
		c.measured = append([]measured(nil), st.measured...)
	}
	return &c
}

// CrossZoneShare is the share of dependency call rate that crosses zones
// now. A service's calls spread evenly over the callee's replicas, so edge
// (A, B) crosses zones with probability 1 - sum_z (a_z/A)(b_z/B); edges
// weigh by call rate. ok is false when no edge has replicas at both ends.
func (st *State) CrossZoneShare() (share float64, ok bool) {
	var total, crossing float64
	for _, e := range st.Env.Edges {
		a, b := st.ServiceCount(int(e.From)), st.ServiceCount(int(e.To))
		if a == 0 || b == 0 || e.Rate == 0 {
			continue
		}
		var same float64
		for z := range st.Env.Zones {
			same += float64(st.ServiceZoneCount(int(e.From), z)) * float64(st.ServiceZoneCount(int(e.To), z))
		}
		total += e.Rate
		crossing += e.Rate * (1 - same/(float64(a)*float64(b)))
	}
	if total == 0 {
		return 0, false
	}
	return crossing / total, true
}

// PodCrossZoneShare is the share of one replica's dependency call rate
// that crosses zones when that replica of service s runs in zone z: the
// edges from s to its callees and from its callers to s, each weighed by
// its call rate, and each crossing with the share of the other end's
// running replicas outside z (calls spread evenly over replicas). Edges
// whose other end has no running replica do not count; ok is false when
// none counts. A self-edge counts the replicas as they are (the replica
// itself included once it runs).
func (st *State) PodCrossZoneShare(s, z int) (share float64, ok bool) {
	var total, crossing float64
	for _, e := range st.Env.Edges {
		var other int
		switch {
		case e.Rate == 0:
			continue
		case int(e.From) == s:
			other = int(e.To)
		case int(e.To) == s:
			other = int(e.From)
		default:
			continue
		}
		b := st.ServiceCount(other)
		if b == 0 {
			continue
		}
		total += e.Rate
		crossing += e.Rate * (1 - float64(st.ServiceZoneCount(other, z))/float64(b))
	}
	if total == 0 {
		return 0, false
	}
	return crossing / total, true
}

// DependencyRTT is the call-rate weighted mean round-trip time (ms) from
// zone z to the replicas of service s's callees, calls spread evenly over
// each callee's replicas (RTTs as State.RTT gives them now); 0 when no
// callee runs.
func (st *State) DependencyRTT(s, z int) float64 {
	env := st.Env
	var w, rtt float64
	for _, ei := range env.OutEdges[s] {
		e := env.Edges[ei]
		b := st.ServiceCount(int(e.To))
		if b == 0 || e.Rate == 0 {
			continue
		}
		var exp float64
		for z2 := range env.Zones {
			exp += float64(st.ServiceZoneCount(int(e.To), z2)) * st.RTT(z, z2)
		}
		w += e.Rate
		rtt += e.Rate * exp / float64(b)
	}
	if w == 0 {
		return 0
	}
	return rtt / w
}

// CheckInvariants verifies that no node is over-committed and that the
// running totals match the nodes (sim/engine calls it after every binding
// when its RunConfig.Check is set). It is O(nodes + running pods).
func (st *State) CheckInvariants() error {
	var alloc Resources
	var archFree, archPinned [NumArch]int64
	modelFree := make([]int64, len(st.ModelFree))
	for i := range st.Nodes {
		nd := &st.Nodes[i]
		if nd.Model >= 0 {
			modelFree[nd.Model] += nd.GPUFreeTotal
		}
		archFree[nd.Arch] += nd.CPUFree
		if nd.CPUFree < 0 || nd.MemFree < 0 || nd.CPUFree > nd.CPU || nd.MemFree > nd.Mem {
			return fmt.Errorf("%w: node %s cpu free %d/%d mem free %d/%d", ErrPlacement, nd.Name, nd.CPUFree, nd.CPU, nd.MemFree, nd.Mem)
		}
		for g, f := range nd.GPUFree {
			if f < 0 || f > MilliGPU {
				return fmt.Errorf("%w: node %s gpu %d free %d", ErrPlacement, nd.Name, g, f)
			}
		}
		alloc.CPU += nd.CPU - nd.CPUFree
		alloc.Mem += nd.Mem - nd.MemFree
		alloc.GPU += int64(nd.GPUs)*MilliGPU - nd.GPUFreeTotal
	}
	if alloc != st.Alloc {
		return fmt.Errorf("%w: node allocations %+v do not match totals %+v", ErrPlacement, alloc, st.Alloc)
	}
	for g, f := range modelFree {
		if f != st.ModelFree[g] {
			return fmt.Errorf("%w: nodes of gpu model %d have %d milli-GPU free, the total says %d", ErrPlacement, g, f, st.ModelFree[g])
		}
	}
	var pods Resources
	for _, id := range st.running {
		p := &st.Pods[id]
		pods.CPU += p.CPU
		pods.Mem += p.Mem
		pods.GPU += p.GPUDemand()
		archPinned[p.Arch] += p.CPU
	}
	if pods != st.Alloc {
		return fmt.Errorf("%w: running pods %+v do not match totals %+v", ErrPlacement, pods, st.Alloc)
	}
	if archFree != st.ArchFree || archPinned != st.ArchPinned {
		return fmt.Errorf("%w: free cpu by architecture %v and pinned requests %v do not match totals %v, %v", ErrPlacement, archFree, archPinned, st.ArchFree, st.ArchPinned)
	}
	return nil
}
