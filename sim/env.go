package sim

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"

	"github.com/edgesched/edgesched/sim/disrupt"
	"github.com/edgesched/edgesched/sim/nodeload"
)

// Env is a compiled, immutable cluster and workload: names resolved to
// indices, GPU specs to bit masks, pods grouped into shapes. One Env is
// shared by every run of a comparison; runs never modify it, so it is safe
// for concurrent use.
type Env struct {
	Cluster  *Cluster
	Workload *Workload

	Zones       []string
	CarbonZones []CarbonZone
	// RTT[a][b] is the round-trip time between zones a and b in ms.
	RTT    [][]float64
	Models []GPUModel
	Nodes  []NodeInfo
	// Pods are the workload's pods, compiled; Pod.Template is the index.
	Pods     []Pod
	Services []string
	Edges    []Edge
	// OutEdges[s] lists indices into Edges leaving service s.
	OutEdges [][]int32
	// Partners[s] are the services within two calls of service s, each
	// with the predicted probability that the two call each other, from
	// the services' GraphSAGE embeddings (policy/sage's Annotate in the
	// simulator, the site leader's published embeddings in the
	// scheduler); nil without embeddings, when the dep_affinity feature
	// is 0. Set once, before any run starts.
	Partners [][]Partner
	// PartnersEncoder identifies the GraphSAGE weights whose embeddings
	// and decoder computed Partners (policy.SageWeights.ID).
	PartnersEncoder string
	// PreviousPartners are the partners of the weights published before
	// PartnersEncoder's, and PreviousEncoder those weights' ID ("" for
	// none): the scheduler keeps them through a switch of weights, so a
	// model still running the old ones reads its partners until its
	// successor is installed (edge-plugin/sources.DepGraph.Previous).
	// The simulator leaves them empty. Read them with PartnersOf.
	PreviousPartners [][]Partner
	PreviousEncoder  string
	// Shapes is the number of distinct pod shapes (see Pod.Shape).
	Shapes int
	// Target is the workload's typical-pod distribution, used by the
	// fragmentation measure and by FGD.
	Target *TargetWorkload
	// Capacity sums the cluster's resources; MaxNode is the per-resource
	// maximum over nodes (GPU in milli-GPU).
	Capacity, MaxNode Resources
	// HasTimes reports whether pods carry creation times (replay needs them).
	HasTimes bool
	// GPUPrimary is set when the cluster has GPUs and the typical pod of
	// the workload needs one (GPU classes hold at least half of the target
	// workload's popularity): fragmentation is then measured on GPUs, and on
	// CPUs otherwise.
	GPUPrimary bool
	// Profiles are the load profiles; Pod.Profile indexes them and index
	// 0 is steady use (the Cluster's LoadProfiles follow).
	Profiles []nodeload.Profile
	// Uplinks[z] is zone z's uplink; Disruptions enables node failures.
	Uplinks     []disrupt.Uplink
	Disruptions disrupt.Config
	// Dynamic is set when the load model has anything to do beyond steady
	// use (profiles, interference, network, lossy or flapping uplinks,
	// background load);
	// otherwise measures are computed exactly as before it existed.
	Dynamic bool

	zoneIdx    map[string]int
	modelIdx   map[string]int
	serviceIdx map[string]int
}

// Partner is a service near another in the call graph and the predicted
// probability, in [0, 1], that the two call each other.
type Partner struct {
	Service int32
	P       float32
}

// Resources is an amount of CPU (milli), memory (MiB) and GPU (milli-GPU).
type Resources struct {
	CPU, Mem, GPU int64
}

// NodeInfo is the static, compiled part of a node.
type NodeInfo struct {
	Name       string
	Zone       int32
	CarbonZone int32
	Model      int32 // -1 without GPUs
	Arch       Arch
	GPUs       int32
	CPU, Mem   int64
	Labels     map[string]string
	Taints     []Taint
	// Restricted is set when the node has NoSchedule/NoExecute taints, so
	// the filter's fast path can skip the taint check otherwise.
	Restricted  bool
	FailureRate float64
	// WattsPerCore and WattsPerGPU give the power of placed work.
	WattsPerCore, WattsPerGPU, IdleWatts float64
	// NICMbps is the node's network interface (0: the load model's default).
	NICMbps float64
	// Background is the milli-CPU busy outside Kubernetes
	// (NodeSpec.Background times the node's CPU).
	Background float64
}

// Edge is a compiled service dependency.
type Edge struct {
	From, To int32
	Rate     float64
}

// Pod is a compiled pod. Runs copy it (inflate mode samples templates), so
// it holds values, not pointers, except for the rarely used selectors.
type Pod struct {
	// ID is the pod's index in the run; Template indexes Env.Pods.
	ID, Template int32
	// Shape groups pods with identical requests and constraints: two pods
	// of one shape are interchangeable for every baseline policy.
	Shape    int32
	CPU, Mem int64
	GPUs     int32
	GPUMilli int64
	// GPUMask has bit m set for each accepted model m; 0 accepts any.
	GPUMask  uint64
	Arch     Arch
	QoS      QoS
	Priority int32
	Create   int64
	Delete   int64
	Service  int32 // -1 without a service
	// Usage is the CPU actually used as a share of the request, MemUsage
	// the memory's (see PodSpec).
	Usage, MemUsage float64
	CPULimit        int64
	// Profile indexes Env.Profiles (0: steady); Interference and NetMbps
	// are as in PodSpec.
	Profile      int32
	Interference float64
	NetMbps      float64
	// Constrained is set when the pod has a node selector or tolerations.
	Constrained bool
}

// GPUDemand is the pod's GPU request in milli-GPU.
func (p *Pod) GPUDemand() int64 { return int64(p.GPUs) * p.GPUMilli }

// Spec returns the pod's source spec.
func (e *Env) Spec(p *Pod) *PodSpec { return &e.Workload.Pods[p.Template] }

// PartnersOf returns the partners computed with the GraphSAGE weights of
// ID encoder: Partners, else PreviousPartners, else nil.
func (e *Env) PartnersOf(encoder string) [][]Partner {
	switch {
	case e.Partners != nil && e.PartnersEncoder == encoder:
		return e.Partners
	case e.PreviousPartners != nil && e.PreviousEncoder == encoder:
		return e.PreviousPartners
	}
	return nil
}

// EnvOptions tune compilation. The zero value is ready to use.
type EnvOptions struct {
	// TargetThreshold is the popularity share of the typical pods kept in
	// the target workload (FGD's "podPopularityThreshold"); 0 means 0.95.
	TargetThreshold float64
}

// NewEnv validates and compiles a cluster and a workload. Every reference
// (zones, carbon zones, GPU models, services) must resolve; errors name the
// object and the field.
func NewEnv(c *Cluster, w *Workload, opt EnvOptions) (*Env, error) {
	if c == nil || w == nil {
		return nil, fmt.Errorf("%w: nil cluster or workload", ErrInvalid)
	}
	if len(c.Nodes) == 0 {
		return nil, fmt.Errorf("%w: cluster %q has no nodes", ErrInvalid, c.Name)
	}
	if opt.TargetThreshold == 0 {
		opt.TargetThreshold = 0.95
	}
	if !(opt.TargetThreshold > 0 && opt.TargetThreshold <= 1) {
		return nil, fmt.Errorf("%w: target threshold must be in (0, 1], got %v", ErrInvalid, opt.TargetThreshold)
	}
	e := &Env{Cluster: c, Workload: w, zoneIdx: map[string]int{}, modelIdx: map[string]int{}, serviceIdx: map[string]int{}}
	if err := e.compileCluster(c); err != nil {
		return nil, err
	}
	if err := e.compileWorkload(w); err != nil {
		return nil, err
	}
	e.Target = NewTargetWorkload(e.Pods, opt.TargetThreshold)
	var gpuShare float64
	for _, c := range e.Target.Classes {
		if c.GPUs > 0 {
			gpuShare += c.P
		}
	}
	e.GPUPrimary = e.Capacity.GPU > 0 && gpuShare >= 0.5
	return e, nil
}

func (e *Env) compileCluster(c *Cluster) error {
	carbonIdx := map[string]int{}
	for i, cz := range c.CarbonZones {
		if cz.Name == "" {
			return fmt.Errorf("%w: carbon zone #%d has no name", ErrInvalid, i)
		}
		if _, dup := carbonIdx[cz.Name]; dup {
			return fmt.Errorf("carbon zone %s: %w", cz.Name, ErrDuplicate)
		}
		if len(cz.Curve) == 0 {
			return fmt.Errorf("carbon zone %s: %w: empty curve", cz.Name, ErrInvalid)
		}
		for h, v := range cz.Curve {
			if !inRange(v, MaxCarbon) {
				return fmt.Errorf("carbon zone %s: %w: curve[%d] = %v must be a finite number in [0, %g]", cz.Name, ErrInvalid, h, v, float64(MaxCarbon))
			}
		}
		carbonIdx[cz.Name] = i
		e.CarbonZones = append(e.CarbonZones, cz)
	}
	zones := c.Zones
	if len(zones) == 0 {
		zones = []Zone{{Name: "default"}}
	}
	zoneCarbon := make([]int32, 0, len(zones))
	for i, z := range zones {
		if z.Name == "" {
			return fmt.Errorf("%w: zone #%d has no name", ErrInvalid, i)
		}
		if err := z.Uplink.Validate(); err != nil {
			return fmt.Errorf("zone %s: uplink: %w: %w", z.Name, ErrInvalid, err)
		}
		e.Uplinks = append(e.Uplinks, z.Uplink)
		e.Dynamic = e.Dynamic || z.Uplink != (disrupt.Uplink{})
		if _, dup := e.zoneIdx[z.Name]; dup {
			return fmt.Errorf("zone %s: %w", z.Name, ErrDuplicate)
		}
		e.zoneIdx[z.Name] = len(e.Zones)
		e.Zones = append(e.Zones, z.Name)
		cz := z.CarbonZone
		if cz == "" {
			cz = z.Name
		}
		idx, ok := carbonIdx[cz]
		if !ok {
			if z.CarbonZone != "" {
				return fmt.Errorf("zone %s: %w: carbon zone %q", z.Name, ErrUnknownRef, z.CarbonZone)
			}
			// A zone without a declared curve gets a flat world-average one.
			idx = len(e.CarbonZones)
			carbonIdx[cz] = idx
			e.CarbonZones = append(e.CarbonZones, CarbonZone{Name: cz, Curve: []float64{DefaultCarbonIntensity}})
		}
		zoneCarbon = append(zoneCarbon, int32(idx))
	}
	if err := e.compileNetwork(c.Network); err != nil {
		return err
	}
	if err := c.Disruptions.Validate(); err != nil {
		return fmt.Errorf("disruptions: %w: %w", ErrInvalid, err)
	}
	e.Disruptions = c.Disruptions
	e.Profiles = append([]nodeload.Profile{{Name: ""}}, c.LoadProfiles...)
	for i := range c.LoadProfiles {
		p := &c.LoadProfiles[i]
		if err := p.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if p.Name == "" || slices.ContainsFunc(c.LoadProfiles[:i], func(q nodeload.Profile) bool { return q.Name == p.Name }) {
			return fmt.Errorf("load profile #%d %q: %w", i, p.Name, ErrDuplicate)
		}
	}
	models := c.GPUModels
	if len(models) == 0 {
		models = KnownGPUModels()
	}
	if len(models) > 64 {
		return fmt.Errorf("%w: at most 64 GPU models, got %d", ErrInvalid, len(models))
	}
	for i, m := range models {
		if m.Name == "" {
			return fmt.Errorf("%w: gpu model #%d has no name", ErrInvalid, i)
		}
		if _, dup := e.modelIdx[m.Name]; dup {
			return fmt.Errorf("gpu model %s: %w", m.Name, ErrDuplicate)
		}
		if !inRange(m.Watts, MaxWatts) || m.MemoryMiB < 0 || m.MemoryMiB > MaxQuantity {
			return fmt.Errorf("gpu model %s: %w: watts and memory must be finite, >= 0 and bounded", m.Name, ErrInvalid)
		}
		if m.Watts == 0 {
			m.Watts = DefaultGPUWatts
		}
		e.modelIdx[m.Name] = len(e.Models)
		e.Models = append(e.Models, m)
	}
	names := make(map[string]struct{}, len(c.Nodes))
	e.Nodes = make([]NodeInfo, len(c.Nodes))
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if err := n.Validate(); err != nil {
			return err
		}
		if _, dup := names[n.Name]; dup {
			return fmt.Errorf("node %s: %w", n.Name, ErrDuplicate)
		}
		names[n.Name] = struct{}{}
		zname := n.Zone
		if zname == "" {
			zname = zones[0].Name
		}
		z, ok := e.zoneIdx[zname]
		if !ok {
			return fmt.Errorf("node %s: %w: zone %q", n.Name, ErrUnknownRef, n.Zone)
		}
		cz := zoneCarbon[z]
		if n.CarbonZone != "" {
			idx, ok := carbonIdx[n.CarbonZone]
			if !ok {
				return fmt.Errorf("node %s: %w: carbon zone %q", n.Name, ErrUnknownRef, n.CarbonZone)
			}
			cz = int32(idx)
		}
		model := int32(-1)
		if n.GPUs > 0 {
			m, ok := e.modelIdx[n.GPUModel]
			if !ok {
				return fmt.Errorf("node %s: %w %q", n.Name, ErrUnknownModel, n.GPUModel)
			}
			model = int32(m)
		}
		pw := DefaultPower(n.Arch)
		if n.Power != nil {
			pw = *n.Power
		}
		gpuW := pw.WattsPerGPU
		if gpuW == 0 && model >= 0 {
			gpuW = e.Models[model].Watts
		}
		restricted := false
		for _, t := range n.Taints {
			if t.Effect != EffectPreferNoSchedule {
				restricted = true
			}
		}
		e.Nodes[i] = NodeInfo{
			Name: n.Name, Zone: int32(z), CarbonZone: cz, Model: model, Arch: n.Arch,
			GPUs: int32(n.GPUs), CPU: n.CPU, Mem: n.Memory, Labels: n.Labels, Taints: n.Taints,
			Restricted: restricted, FailureRate: n.FailureRate,
			WattsPerCore: pw.WattsPerCore, WattsPerGPU: gpuW, IdleWatts: pw.IdleWatts, NICMbps: n.NICMbps,
			Background: n.Background * float64(n.CPU),
		}
		e.Dynamic = e.Dynamic || n.Background > 0
		e.Capacity.CPU += n.CPU
		e.Capacity.Mem += n.Memory
		e.Capacity.GPU += int64(n.GPUs) * MilliGPU
		e.MaxNode.CPU = max(e.MaxNode.CPU, n.CPU)
		e.MaxNode.Mem = max(e.MaxNode.Mem, n.Memory)
		e.MaxNode.GPU = max(e.MaxNode.GPU, int64(n.GPUs)*MilliGPU)
	}
	return nil
}

// DefaultCarbonIntensity is the flat curve (gCO2/kWh) given to zones
// without one: roughly the world-average grid intensity.
const DefaultCarbonIntensity = 475

func (e *Env) compileNetwork(given *Network) error {
	nw := DefaultNetwork()
	if given != nil {
		nw = *given
	}
	if !inRange(nw.IntraZoneMs, MaxRTTMs) || !inRange(nw.InterZoneMs, MaxRTTMs) {
		return fmt.Errorf("network: %w: RTTs must be finite and in [0, %g] ms", ErrInvalid, float64(MaxRTTMs))
	}
	n := len(e.Zones)
	e.RTT = make([][]float64, n)
	for a := range n {
		e.RTT[a] = make([]float64, n)
		for b := range n {
			if a == b {
				e.RTT[a][b] = nw.IntraZoneMs
			} else {
				e.RTT[a][b] = nw.InterZoneMs
			}
		}
	}
	for _, p := range nw.Pairs {
		a, okA := e.zoneIdx[p.A]
		b, okB := e.zoneIdx[p.B]
		if !okA || !okB {
			return fmt.Errorf("network: %w: zone pair %q-%q", ErrUnknownRef, p.A, p.B)
		}
		if !inRange(p.Ms, MaxRTTMs) {
			return fmt.Errorf("network: %w: RTT %q-%q must be finite and in [0, %g], got %v", ErrInvalid, p.A, p.B, float64(MaxRTTMs), p.Ms)
		}
		e.RTT[a][b], e.RTT[b][a] = p.Ms, p.Ms
	}
	return nil
}

type shapeKey struct {
	cpu, mem, milli int64
	gpus            int32
	mask            uint64
	arch            Arch
	template        int32 // set only for constrained pods
}

func (e *Env) compileWorkload(w *Workload) error {
	for _, s := range w.Services {
		if err := e.addService(s); err != nil {
			return err
		}
	}
	names := make(map[string]struct{}, len(w.Pods))
	shapes := map[shapeKey]int32{}
	e.Pods = make([]Pod, len(w.Pods))
	e.HasTimes = len(w.Pods) > 0 && !w.Untimed
	for i := range w.Pods {
		ps := &w.Pods[i]
		if err := ps.Validate(); err != nil {
			return err
		}
		if _, dup := names[ps.Name]; dup {
			return fmt.Errorf("pod %s: %w", ps.Name, ErrDuplicate)
		}
		names[ps.Name] = struct{}{}
		var mask uint64
		for _, m := range ps.GPUSpec {
			idx, ok := e.modelIdx[m]
			if !ok {
				return fmt.Errorf("pod %s: gpu_spec: %w %q", ps.Name, ErrUnknownModel, m)
			}
			mask |= 1 << uint(idx)
		}
		svc := int32(-1)
		if ps.Service != "" {
			if _, ok := e.serviceIdx[ps.Service]; !ok {
				if err := e.addService(ps.Service); err != nil {
					return err
				}
			}
			svc = int32(e.serviceIdx[ps.Service])
		}
		usage := ps.CPUUsage
		if usage == 0 {
			usage = DefaultUsage(ps.Name)
		}
		memUsage := ps.MemUsage
		if memUsage == 0 {
			memUsage = usage
		}
		prof := int32(0)
		if ps.Profile != "" {
			k := slices.IndexFunc(e.Profiles, func(q nodeload.Profile) bool { return q.Name == ps.Profile })
			if k <= 0 {
				return fmt.Errorf("pod %s: %w: load profile %q", ps.Name, ErrUnknownRef, ps.Profile)
			}
			prof = int32(k)
		}
		p := Pod{
			ID: int32(i), Template: int32(i),
			CPU: ps.CPU, Mem: ps.Memory, GPUs: int32(ps.GPUs), GPUMilli: ps.GPUMilli, GPUMask: mask,
			Arch: ps.Arch, QoS: ps.QoS, Priority: ps.Priority, Create: ps.Create, Delete: ps.Delete,
			Service: svc, Usage: usage, MemUsage: memUsage, CPULimit: ps.CPULimit,
			Profile: prof, Interference: ps.Interference, NetMbps: ps.NetMbps,
			Constrained: len(ps.NodeSelector) > 0 || len(ps.Tolerations) > 0,
		}
		e.Dynamic = e.Dynamic || prof > 0 || p.Interference > 0 || p.NetMbps > 0
		k := shapeKey{cpu: p.CPU, mem: p.Mem, milli: p.GPUMilli, gpus: p.GPUs, mask: p.GPUMask, arch: p.Arch, template: -1}
		if p.Constrained {
			k.template = int32(i)
		}
		s, ok := shapes[k]
		if !ok {
			s = int32(len(shapes))
			shapes[k] = s
		}
		p.Shape = s
		e.Pods[i] = p
	}
	e.Shapes = len(shapes)
	for _, d := range w.Dependencies {
		f, okF := e.serviceIdx[d.From]
		t, okT := e.serviceIdx[d.To]
		switch {
		case !okF:
			return fmt.Errorf("dependency %s->%s: %w: service %q", d.From, d.To, ErrUnknownRef, d.From)
		case !okT:
			return fmt.Errorf("dependency %s->%s: %w: service %q", d.From, d.To, ErrUnknownRef, d.To)
		case !inRange(d.CallsPerSecond, MaxCallRate):
			return fmt.Errorf("dependency %s->%s: %w: calls per second must be finite and in [0, %g], got %v", d.From, d.To, ErrInvalid, float64(MaxCallRate), d.CallsPerSecond)
		}
		e.Edges = append(e.Edges, Edge{From: int32(f), To: int32(t), Rate: d.CallsPerSecond})
	}
	e.OutEdges = make([][]int32, len(e.Services))
	for i, ed := range e.Edges {
		e.OutEdges[ed.From] = append(e.OutEdges[ed.From], int32(i))
	}
	return nil
}

func (e *Env) addService(name string) error {
	if name == "" {
		return fmt.Errorf("%w: service without a name", ErrInvalid)
	}
	if _, dup := e.serviceIdx[name]; dup {
		return nil
	}
	e.serviceIdx[name] = len(e.Services)
	e.Services = append(e.Services, name)
	return nil
}

// DefaultUsage is the usage model for pods whose trace has no usage data:
// a share of the request in [0.25, 0.85), fixed per pod name (FNV-1a hash),
// so every run and every seed sees the same usage for the same pod.
func DefaultUsage(name string) float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return 0.25 + 0.6*float64(h.Sum64()>>11)/float64(1<<53)
}

// ZoneIndex returns the index of a zone name.
func (e *Env) ZoneIndex(name string) (int, bool) { i, ok := e.zoneIdx[name]; return i, ok }

// ModelIndex returns the index of a GPU model name.
func (e *Env) ModelIndex(name string) (int, bool) { i, ok := e.modelIdx[name]; return i, ok }

// ServiceIndex returns the index of a service name.
func (e *Env) ServiceIndex(name string) (int, bool) { i, ok := e.serviceIdx[name]; return i, ok }

// CarbonAt returns the carbon intensity (gCO2/kWh) of a carbon zone at a
// time in seconds from the start of the run.
func (e *Env) CarbonAt(cz int32, t int64) float64 {
	c := e.CarbonZones[cz].Curve
	h := t / 3600
	if h < 0 {
		h = 0
	}
	return c[h%int64(len(c))]
}

// CarbonIntegral is the integral of a carbon zone's intensity over [a, b)
// seconds, in (g/kWh)·s, computed per hour segment with whole cycles of the
// curve in closed form (the run engine's carbon_g).
func (e *Env) CarbonIntegral(cz int32, a, b int64) float64 {
	c := e.CarbonZones[cz].Curve
	if b <= a {
		return 0
	}
	a, b = max(a, 0), max(b, 0)
	var cycle float64
	for _, v := range c {
		cycle += v
	}
	hourOf := func(t int64) int64 { return t / 3600 }
	ha, hb := hourOf(a), hourOf(b)
	if ha == hb {
		return float64(b-a) * c[ha%int64(len(c))]
	}
	// partial first hour, whole hours in between, partial last hour
	total := float64((ha+1)*3600-a) * c[ha%int64(len(c))]
	total += float64(b-hb*3600) * c[hb%int64(len(c))]
	first, n := ha+1, hb-(ha+1) // whole hours [first, first+n)
	cycles := n / int64(len(c))
	total += float64(cycles) * cycle * 3600
	for h := first + cycles*int64(len(c)); h < first+n; h++ {
		total += c[h%int64(len(c))] * 3600
	}
	return total
}

// CarbonMean is the mean of a carbon zone's curve.
func (e *Env) CarbonMean(cz int32) float64 {
	var s float64
	for _, v := range e.CarbonZones[cz].Curve {
		s += v
	}
	return s / float64(len(e.CarbonZones[cz].Curve))
}

// TargetClass is one typical pod of the target workload.
type TargetClass struct {
	CPU, Mem int64
	GPUs     int32
	GPUMilli int64
	GPUMask  uint64
	// P is the class's popularity; the classes' P sum to 1.
	P float64
}

// TargetWorkload is the distribution of typical pods a fragmentation
// measure is taken against: the most popular pod classes of the workload
// (by count) up to a cumulative share, renormalised. This is the "target
// workload M" of the FGD paper; CPU-only pods are included, as in the
// paper's artifact (isInvolvedCpuPods: true, podPopularityThreshold: 95).
type TargetWorkload struct {
	Classes []TargetClass
	// cpuLevels are the distinct class CPU requests, ascending: a node's
	// fragmentation depends on its free CPU only through how many of them
	// it reaches, which keeps the memo small.
	cpuLevels []int64
	gpuClass  bool
}

// NewTargetWorkload builds the target workload from pods. Classes are keyed
// by (cpu, gpus, gpu milli, gpu model mask), as in FGD; memory only enters
// the CPU fragmentation measure through each class's mean memory request.
func NewTargetWorkload(pods []Pod, threshold float64) *TargetWorkload {
	type key struct {
		cpu, milli int64
		gpus       int32
		mask       uint64
	}
	type acc struct {
		key
		n   int
		mem int64
	}
	counts := map[key]*acc{}
	for i := range pods {
		p := &pods[i]
		k := key{cpu: p.CPU, milli: p.GPUMilli, gpus: p.GPUs, mask: p.GPUMask}
		a := counts[k]
		if a == nil {
			a = &acc{key: k}
			counts[k] = a
		}
		a.n++
		a.mem += p.Mem
	}
	list := make([]*acc, 0, len(counts))
	for _, a := range counts {
		list = append(list, a)
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.n != b.n {
			return a.n > b.n
		}
		if a.cpu != b.cpu {
			return a.cpu < b.cpu
		}
		if a.milli != b.milli {
			return a.milli < b.milli
		}
		if a.gpus != b.gpus {
			return a.gpus < b.gpus
		}
		return a.mask < b.mask
	})
	t := &TargetWorkload{}
	total := len(pods)
	if total == 0 {
		return t
	}
	var cum int
	for _, a := range list {
		if float64(cum) >= threshold*float64(total) {
			break
		}
		cum += a.n
		t.Classes = append(t.Classes, TargetClass{CPU: a.cpu, Mem: a.mem / int64(a.n), GPUs: a.gpus, GPUMilli: a.milli, GPUMask: a.mask, P: float64(a.n)})
	}
	for i := range t.Classes {
		t.Classes[i].P /= float64(cum)
		if t.Classes[i].GPUs > 0 {
			t.gpuClass = true
		}
		t.cpuLevels = append(t.cpuLevels, t.Classes[i].CPU)
	}
	slices.Sort(t.cpuLevels)
	t.cpuLevels = slices.Compact(t.cpuLevels)
	return t
}

// GPUFrag is FGD's fragmentation of one node with respect to the target
// workload, in milli-GPU: the expected amount of the node's free GPU that a
// task drawn from the workload could not use. For each typical task m:
//   - m needs no GPU, or the node's GPU model is not acceptable to m: all
//     free GPU is fragmented for m;
//   - the node can host m (enough CPU and enough GPUs with >= m's share
//     free): only the GPUs with less than m's share free are fragments;
//   - otherwise (short of CPU or of GPUs): all free GPU is fragmented.
//
// GPUFrag = sum over m of p_m * fragment(m). Memory is not considered, as
// in the FGD paper.
func (t *TargetWorkload) GPUFrag(cpuFree int64, model int32, gpuFree []int64) float64 {
	return t.gpuFrag(cpuFree, model, gpuFree, false)
}

// gpuFrag is GPUFrag; with fit, classes that do not accept model are left
// out instead of counting all free GPU as their fragment.
func (t *TargetWorkload) gpuFrag(cpuFree int64, model int32, gpuFree []int64, fit bool) float64 {
	var total int64
	for _, g := range gpuFree {
		total += g
	}
	if total == 0 {
		return 0
	}
	var f float64
	for i := range t.Classes {
		m := &t.Classes[i]
		if fit && m.GPUs > 0 && (model < 0 || !m.accepts(int(model))) {
			continue
		}
		if m.GPUs == 0 || model < 0 || (m.GPUMask != 0 && m.GPUMask&(1<<uint(model)) == 0) {
			f += m.P * float64(total)
			continue
		}
		var fits int32
		var frag int64
		for _, g := range gpuFree {
			if g >= m.GPUMilli {
				fits++
			} else {
				frag += g
			}
		}
		if fits >= m.GPUs && cpuFree >= m.CPU {
			f += m.P * float64(frag)
		} else {
			f += m.P * float64(total)
		}
	}
	return f
}

// CPUFrag is the CPU counterpart used on clusters without GPUs: the
// expected free CPU (milli) of a node that a typical task cannot use
// because the node lacks CPU or memory for it. GPUs are ignored.
func (t *TargetWorkload) CPUFrag(cpuFree, memFree int64) float64 {
	if cpuFree <= 0 {
		return 0
	}
	var f float64
	for i := range t.Classes {
		m := &t.Classes[i]
		if cpuFree < m.CPU || memFree < m.Mem {
			f += m.P * float64(cpuFree)
		}
	}
	return f
}

// cpuLevel maps free CPU to the number of class CPU requests it reaches.
func (t *TargetWorkload) cpuLevel(cpuFree int64) int64 {
	n, _ := slices.BinarySearch(t.cpuLevels, cpuFree+1)
	return int64(n)
}

// levelCPU returns a free-CPU value with the given level (for the memo).
func (t *TargetWorkload) levelCPU(level int64) int64 {
	if level == 0 {
		return math.MinInt64 / 2
	}
	return t.cpuLevels[level-1]
}
