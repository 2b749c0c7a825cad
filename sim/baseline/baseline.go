package baseline

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/edgesched/edgesched/sim"
)

// ErrUnknownPolicy is returned by Lookup for a name no baseline has.
var ErrUnknownPolicy = errors.New("baseline: unknown policy")

// Canonical policy names.
const (
	RandomFit     = "random-fit"
	BestFit       = "best-fit"
	DotProduct    = "dot-product"
	GPUPacking    = "gpu-packing"
	GPUClustering = "gpu-clustering"
	FGD           = "fgd"
	K8sDefault    = "k8s-default"
	TLP           = "trimaran-tlp"
)

// All returns a factory for every baseline, in the order tables show them.
func All() []sim.Factory {
	return []sim.Factory{
		{Name: RandomFit, New: func(*sim.Env) (sim.Policy, error) { return &randomFit{}, nil }},
		{Name: BestFit, New: func(*sim.Env) (sim.Policy, error) { return bestFit{}, nil }},
		{Name: DotProduct, New: func(*sim.Env) (sim.Policy, error) { return dotProduct{}, nil }},
		{Name: GPUPacking, New: func(*sim.Env) (sim.Policy, error) { return gpuPacking{}, nil }},
		{Name: GPUClustering, New: func(*sim.Env) (sim.Policy, error) { return gpuClustering{}, nil }},
		{Name: FGD, New: func(env *sim.Env) (sim.Policy, error) { return NewFGD(env), nil }},
		{Name: K8sDefault, New: func(*sim.Env) (sim.Policy, error) { return k8sDefault{}, nil }},
		{Name: TLP, New: func(*sim.Env) (sim.Policy, error) { return NewTargetLoadPacking(DefaultTLPArgs()) }},
	}
}

var aliases = map[string]string{
	"random": RandomFit, "randomfit": RandomFit,
	"bestfit": BestFit, "best": BestFit,
	"dotprod": DotProduct, "dotproduct": DotProduct, "dot": DotProduct,
	"gpupacking": GPUPacking, "packing": GPUPacking,
	"gpuclustering": GPUClustering, "clustering": GPUClustering,
	"k8s": K8sDefault, "default": K8sDefault, "kube-scheduler": K8sDefault,
	"tlp": TLP, "trimaran": TLP, "targetloadpacking": TLP,
}

// Lookup returns the baseline with a canonical name or an alias.
func Lookup(name string) (sim.Factory, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if a, ok := aliases[n]; ok {
		n = a
	}
	for _, f := range append(All(), Extras()...) {
		if f.Name == n {
			return f, nil
		}
	}
	var extras []string
	for _, f := range Extras() {
		extras = append(extras, f.Name)
	}
	return sim.Factory{}, fmt.Errorf("%w %q (have %s, and %s)", ErrUnknownPolicy, name, strings.Join(Names(), ", "), strings.Join(extras, ", "))
}

// Names lists the canonical names.
func Names() []string {
	var out []string
	for _, f := range All() {
		out = append(out, f.Name)
	}
	return out
}

// MaxNodeScore is the kube-scheduler's score range upper bound.
const MaxNodeScore = 100

// randomFit places a pod on a uniformly random feasible node: every node
// gets an independent uniform score from the policy's seeded stream (as the
// artifact's RandomScore plugin), so the choice stays random whatever the
// engine's tie rule; devices are drawn at random among those that fit.
type randomFit struct{ rng *rand.Rand }

func (*randomFit) Name() string { return RandomFit }

func (r *randomFit) Start(_ *sim.State, rng *rand.Rand) error { r.rng = rng; return nil }

func (r *randomFit) Score(_ *sim.State, _ *sim.Pod, _ []int32, scores []float64) {
	for i := range scores {
		scores[i] = r.rng.Float64()
	}
}

// PickGPUs draws the devices uniformly among those that fit.
func (r *randomFit) PickGPUs(st *sim.State, p *sim.Pod, n int, dst []int) []int {
	dst = dst[:0]
	var fit []int
	for g, f := range st.Nodes[n].GPUFree {
		if f >= p.GPUMilli {
			fit = append(fit, g)
		}
	}
	r.rng.Shuffle(len(fit), func(i, j int) { fit[i], fit[j] = fit[j], fit[i] })
	return append(dst, fit[:min(len(fit), int(p.GPUs))]...)
}

// bestFit is the FGD paper's Best-fit: the node with the least remaining
// resources after placement, measured as sum_i w_i (free_i - req_i) /
// maxSpec_i over CPU and GPU with w = 0.5 each, where maxSpec is the
// largest node's capacity. Lower remaining is better, so the score is 1
// minus that sum.
type bestFit struct{}

func (bestFit) Name() string { return BestFit }

func (bestFit) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	mx := st.Env.MaxNode
	for i, n := range nodes {
		nd := &st.Nodes[n]
		rem := 0.5 * float64(nd.CPUFree-p.CPU) / float64(mx.CPU)
		if mx.GPU > 0 {
			rem += 0.5 * float64(nd.GPUFreeTotal-p.GPUDemand()) / float64(mx.GPU)
		}
		scores[i] = 1 - rem
	}
}

// dotProduct is the FGD paper's DotProd (after Tetris), with the artifact's
// settings "merge" and "max": node free and pod request vectors over (CPU,
// total GPU), each divided by the largest node's capacity; the node with
// the smallest dot product wins, so score = 1 - dot/2.
type dotProduct struct{}

func (dotProduct) Name() string { return DotProduct }

func (dotProduct) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	mx := st.Env.MaxNode
	cpuReq := float64(p.CPU) / float64(mx.CPU)
	var gpuReq float64
	if mx.GPU > 0 {
		gpuReq = float64(p.GPUDemand()) / float64(mx.GPU)
	}
	for i, n := range nodes {
		nd := &st.Nodes[n]
		dot := float64(nd.CPUFree) / float64(mx.CPU) * cpuReq
		if mx.GPU > 0 {
			dot += float64(nd.GPUFreeTotal) / float64(mx.GPU) * gpuReq
		}
		scores[i] = 1 - dot/2
	}
}

// gpuPacking is the FGD paper's GPU Packing: prefer, in order, (1) GPUs
// already shared, (2) fully free GPUs on a node already in use, (3) an idle
// node. CPU-only pods get the same score everywhere (random placement).
// Scores follow the artifact's integer rule:
//
//	case 1: 100 - (sum of free share, in %, of the devices used)/10, >= 50
//	case 2: 50 - (fully free devices used), >= 33
//	case 3: max(33 - free devices, free devices)
type gpuPacking struct{}

func (gpuPacking) Name() string { return GPUPacking }

func (gpuPacking) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	var gpus []int
	for i, n := range nodes {
		scores[i] = float64(packingScore(st, p, int(n), &gpus))
	}
}

func packingScore(st *sim.State, p *sim.Pod, n int, buf *[]int) int64 {
	if p.GPUs == 0 {
		return 0
	}
	nd := &st.Nodes[n]
	full := int64(nd.FullFree)
	if nd.FullFree == nd.GPUs {
		return max(MaxNodeScore/3-full, full)
	}
	*buf = st.BestFitGPUs(n, p, (*buf)[:0])
	var fullUsed, freePct int64
	for _, g := range *buf {
		if nd.GPUFree[g] == sim.MilliGPU {
			fullUsed++
		}
		freePct += nd.GPUFree[g] * 100 / sim.MilliGPU
	}
	if fullUsed > 0 {
		return max(MaxNodeScore/2-fullUsed, MaxNodeScore/3)
	}
	return max(MaxNodeScore-freePct/10, MaxNodeScore/2)
}

// gpuClustering is the FGD paper's GPU Clustering: pods with the same GPU
// demand type (shared GPU, or k whole GPUs) go together. From the
// artifact, in four bands, each raised by how full the node's GPUs are,
// 25 * (maxGPU - free) / maxGPU:
//
//	(75, 100] node hosts only this pod's type; (50, 75] it hosts it among
//	others; (25, 50] idle node; (0, 25] node hosts only other types.
//
// CPU-only pods score 0 everywhere (random placement).
type gpuClustering struct{}

func (gpuClustering) Name() string { return GPUClustering }

func (gpuClustering) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	tag := sim.GPUTag(p)
	maxGPU := max(st.Env.MaxNode.GPU, sim.MilliGPU)
	for i, n := range nodes {
		scores[i] = float64(clusteringScore(st, tag, int(n), maxGPU))
	}
}

func clusteringScore(st *sim.State, tag, n int, maxGPU int64) int64 {
	if tag < 0 {
		return 0
	}
	nd := &st.Nodes[n]
	fill := MaxNodeScore / 4 * (maxGPU - nd.GPUFreeTotal) / maxGPU
	kinds := st.TagKinds(n)
	switch {
	case st.TagCount(n, tag) > 0 && kinds == 1:
		return fill + MaxNodeScore*3/4
	case st.TagCount(n, tag) > 0:
		return fill + MaxNodeScore*2/4
	case kinds == 0:
		return fill + MaxNodeScore/4
	}
	return fill
}

// k8sDefault is the kube-scheduler's default resource scoring (v1.37):
// NodeResourcesFit with the LeastAllocated strategy over cpu and memory
// (weights 1, 1; requests counted non-zero) plus
// NodeResourcesBalancedAllocation over cpu and memory, each plugin with
// weight 1, all in the upstream integer arithmetic:
//
//	least    = (sum_r w_r * ((cap_r - req_r) * 100 / cap_r)) / sum_r w_r
//	balanced = int((1 - |f_cpu - f_mem| / 2) * 100), f = min(1, req/cap)
//
// where req includes the incoming pod. BalancedAllocation skips pods
// without requests (best effort), contributing nothing.
type k8sDefault struct{}

func (k8sDefault) Name() string { return K8sDefault }

func (k8sDefault) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	nzc, nzm := p.CPU, p.Mem
	if nzc == 0 {
		nzc = sim.DefaultNonZeroMilliCPU
	}
	if nzm == 0 {
		nzm = sim.DefaultNonZeroMemMiB
	}
	bestEffort := p.CPU == 0 && p.Mem == 0
	for i, n := range nodes {
		nd := &st.Nodes[n]
		least := (LeastRequestedScore(nd.NZCPU+nzc, nd.CPU) + LeastRequestedScore(nd.NZMem+nzm, nd.Mem)) / 2
		var balanced int64
		if !bestEffort {
			balanced = BalancedScore(nd.CPU-nd.CPUFree+p.CPU, nd.CPU, nd.Mem-nd.MemFree+p.Mem, nd.Mem)
		}
		scores[i] = float64(least + balanced)
	}
}

// LeastRequestedScore is the upstream leastRequestedScore.
func LeastRequestedScore(requested, capacity int64) int64 {
	if capacity == 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * MaxNodeScore / capacity
}

// BalancedScore is the upstream balancedResourceScorer for cpu and memory:
// resources with zero capacity are skipped, fractions are capped at 1, and
// with two fractions std = |f1 - f2| / 2 (with one, std = 0).
func BalancedScore(reqCPU, capCPU, reqMem, capMem int64) int64 {
	if capCPU == 0 || capMem == 0 {
		return MaxNodeScore
	}
	fc := min(1, float64(reqCPU)/float64(capCPU))
	fm := min(1, float64(reqMem)/float64(capMem))
	std := math.Abs((fc - fm) / 2)
	return int64((1 - std) * MaxNodeScore)
}

// TLPArgs are Trimaran TargetLoadPacking's arguments.
type TLPArgs struct {
	// TargetUtilization is the CPU utilisation (percent) to pack up to.
	TargetUtilization int64
	// DefaultRequestsMilli is the predicted use of a pod without CPU
	// request or limit.
	DefaultRequestsMilli int64
	// RequestsMultiplier predicts a pod with a request but no limit.
	RequestsMultiplier float64
}

// DefaultTLPArgs are the plugin's defaults: 40%, 1 core, 1.5.
func DefaultTLPArgs() TLPArgs {
	return TLPArgs{TargetUtilization: 40, DefaultRequestsMilli: 1000, RequestsMultiplier: 1.5}
}

// Validate checks the arguments.
func (a TLPArgs) Validate() error {
	switch {
	case a.TargetUtilization <= 0 || a.TargetUtilization >= 100:
		return fmt.Errorf("trimaran-tlp: target utilization must be in (0, 100), got %d", a.TargetUtilization)
	case a.DefaultRequestsMilli <= 0:
		return fmt.Errorf("trimaran-tlp: default requests must be > 0, got %d", a.DefaultRequestsMilli)
	case !(a.RequestsMultiplier >= 1) || math.IsInf(a.RequestsMultiplier, 0):
		return fmt.Errorf("trimaran-tlp: requests multiplier must be >= 1, got %v", a.RequestsMultiplier)
	}
	return nil
}

// targetLoadPacking is Trimaran's TargetLoadPacking (scheduler-plugins):
// pack nodes up to a target CPU utilisation of *measured* use, then
// spread. With U the predicted utilisation in percent (node's used CPU
// plus the pod's predicted use, over capacity) and T the target:
//
//	U <= T:       round((100 - T) * U / T + T)
//	T < U <= 100: round(T * (100 - U) / (100 - T))
//	U > 100:      0
//
// The pod's predicted use is its CPU limit, else request * multiplier,
// else the default. A node's used CPU is what it measures
// (sim.State.Telemetry: bursts and all) when the scenario has a load
// model, else its pods' steady use. The simulator's node metrics are
// instantaneous, so
// the plugin's correction for pods bound since the last metrics window is
// not needed.
type targetLoadPacking struct{ args TLPArgs }

// NewTargetLoadPacking validates args and returns the policy.
func NewTargetLoadPacking(args TLPArgs) (sim.Policy, error) {
	if err := args.Validate(); err != nil {
		return nil, err
	}
	return targetLoadPacking{args: args}, nil
}

func (targetLoadPacking) Name() string { return TLP }

func (t targetLoadPacking) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	pred := t.args.DefaultRequestsMilli
	switch {
	case p.CPULimit > 0:
		pred = p.CPULimit
	case p.CPU > 0:
		pred = int64(math.Round(float64(p.CPU) * t.args.RequestsMultiplier))
	}
	for i, n := range nodes {
		nd := &st.Nodes[n]
		used := nd.CPUUsed
		if st.Env.Dynamic { // the load watcher's measured use (sim.State.Telemetry)
			used = st.Telemetry(int(n)).CPU * float64(nd.CPU)
		}
		scores[i] = float64(TLPScore(used, float64(pred), float64(nd.CPU), t.args.TargetUtilization))
	}
}

// TLPScore is TargetLoadPacking's score for a node with used and capacity
// milli-CPU and a pod predicted to use pred milli-CPU.
func TLPScore(used, pred, capacity float64, target int64) int64 {
	if capacity == 0 {
		return 0
	}
	u := 100 * (used + pred) / capacity
	tg := float64(target)
	if u > tg {
		if u > 100 {
			return 0
		}
		return int64(math.Round(tg * (100 - u) / (100 - tg)))
	}
	return int64(math.Round((100-tg)*u/tg + tg))
}
