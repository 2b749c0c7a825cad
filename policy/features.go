package policy

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
)

// SchemaID names the feature schema version. Artifacts carry it with
// Schema.Hash; a model is only ever fed features of the schema it was
// trained on.
const SchemaID = "edgesched.features/v6"

// Errors of the schema.
var (
	ErrSchema = errors.New("policy: feature schema mismatch")
)

// Feature describes one input of the scorer.
type Feature struct {
	Name, Description string
}

// Features is the schema's input list, in order. Every value is computed
// for a (pod, feasible node) pair "as if the pod were placed there"; pod
// features repeat on every node so the network can learn interactions.
// The first NumPodFeatures describe the pod and the workload alone (equal
// on every candidate row of a decision).
var featureList = [NumFeatures]Feature{
	// pod
	{"pod_cpu", "pod CPU request / largest node's CPU"},
	{"pod_mem", "pod memory request / largest node's memory"},
	{"pod_gpu", "pod GPU demand (milli-GPU) / largest node's GPU capacity"},
	{"pod_share", "1 when the pod shares one GPU (gpu_milli < 1000)"},
	{"pod_qos_ls", "1 for a latency-sensitive (LS) pod"},
	{"pod_qos_be", "1 for a best-effort (BE) pod"},
	{"pod_priority", "tanh(priority / 1000)"},
	{"pod_gpu_spec", "1 when the pod names the GPU models it accepts"},
	{"pod_model_choice", "share of the cluster's GPU capacity on models the pod accepts (1 for pods accepting any)"},
	// the target workload (the same for every pod of a run)
	{"wl_cpu", "target workload: popularity of the classes without GPUs"},
	{"wl_share", "target workload: popularity of the classes sharing one GPU"},
	{"wl_multi", "target workload: popularity of the classes asking for 2+ GPUs"},
	{"wl_spec", "target workload: share of the GPU demand from classes naming GPU models"},
	// node after placement, relative to the node
	{"cpu_free_after", "node's free CPU after placement / node's CPU"},
	{"mem_free_after", "node's free memory after placement / node's memory"},
	{"gpu_free_after", "node's free GPU after placement / node's GPU capacity (0 without GPUs)"},
	// node after placement, on the cluster's scale
	{"cpu_free_after_abs", "node's free CPU after placement / largest node's CPU"},
	{"gpu_free_after_abs", "node's free GPU after placement / largest node's GPU capacity"},
	{"full_gpus_after", "fully free devices after placement / 8"},
	// GPU fit and fragmentation
	{"device_leftover", "shared pods: free share left on the device FGD would use, / 1000 (0 otherwise)"},
	{"fgd_delta", "increase of the node's FGD fragmentation (milli-GPU) / 1000"},
	{"fgd_score", "FGD's integer score of that increase, int(100 sigmoid(-delta/1000)) / 100"},
	{"frag_after", "node's FGD fragmentation after placement / largest node's GPU capacity"},
	{"fgd_fit_delta", "increase of the node's fragmentation measured against the target classes that accept its GPU model (milli-GPU) / 1000"},
	{"gpu_node_cpu_pod", "1 when a pod without GPUs would land on a node with GPUs"},
	{"balance_after", "cpu_free_after - gpu_free_after on GPU nodes (0 otherwise)"},
	// the node's GPU model against the target workload
	{"model_pressure", "log(1 + pressure of the node's GPU model) in steps of 1/2: target GPU demand naming models, directed at it, / its share of the cluster's free GPU (sim.ModelDemand.Pressure; 0 without GPUs)"},
	{"model_accept", "share of the target workload's GPU demand that can run on the node's GPU model (0 without GPUs)"},
	{"model_exclusive", "share of the target workload's GPU demand that can run only on the node's GPU model"},
	// node attributes and load
	{"arch_arm64", "1 for an arm64 node"},
	{"load", "node's used CPU (measured) / node's CPU"},
	{"pod_cpu_rel", "pod CPU request / node's CPU"},
	{"failure_rate", "log(1 + node failures per day)"},
	{"carbon", "grid carbon intensity at the node now, gCO2/kWh / 1000"},
	// dependencies
	{"dep_zone_colocation", "call-rate weighted share of the pod's dependency neighbours' replicas in the node's zone"},
	{"dep_rtt", "call-rate weighted mean RTT (ms) from the node's zone to the neighbours' replicas / 100"},
	// telemetry: what the node's edge agent measures (the simulator's node
	// response model, sim/nodeload, where no agent reports), in steps
	{"cpu_busy", "node's CPU busy share as measured (the agent's cpu), in steps of 1/20"},
	{"runq_p99", "log(1 + run-queue latency p99 / 1 ms), in steps of 1/4 (the agent's eBPF runqP99Us)"},
	{"mem_pressure", "memory pressure: share of time stalled on memory, 0 below the knee (from the agent's mem), in steps of 1/8"},
	{"retrans", "log(1 + TCP retransmitted segments per second), in steps of 1/2 (the agent's retransPerS)"},
	// the service embeddings (GraphSAGE, policy/sage): beyond one hop
	{"dep_affinity", "share of the pod's partners' replicas in the node's zone, weighted by the predicted probability that each partner and the pod's service call each other (sim.Env.Partners: the services within two calls, from the embeddings of the model's GraphSAGE weights, AffinityEncoder unless it carries its own; 0 without them)"},
	// the node's architecture against the running work
	{"pod_arch_pinned", "1 when the pod needs one CPU architecture (a kubernetes.io/arch node selector: a single-arch image)"},
	{"arch_pinned_share", "share of the running pods' CPU requests that need the node's architecture, in steps of 1/20 (sim.State.ArchShares)"},
	{"arch_free_share", "the node's architecture's share of the cluster's free CPU, in steps of 1/20 (sim.State.ArchShares)"},
	// the node's power for the pod
	{"emission", "log(1 + the pod's emission rate on the node now, gCO2/h), in steps of 1/8: the grid's intensity at the node times the node's power for the pod's requests (watts per requested core, and per requested GPU; sim.NodeInfo, in a cluster the node's power annotations)"},
}

// NumFeatures is the length of a feature vector.
const NumFeatures = 45

// FeatureGroups name sets of features a training configuration can leave
// out of a network's inputs (ppo.NetConfig.Exclude, for ablations and for
// models of workloads that do not have them): the telemetry features, the
// one-hop dependency features, the carbon feature, the embeddings'
// affinity, the architecture features, the node's power for the pod.
var FeatureGroups = map[string][]string{
	"telemetry":    {"cpu_busy", "runq_p99", "mem_pressure", "retrans"},
	"dependencies": {"dep_zone_colocation", "dep_rtt"},
	"carbon":       {"carbon"},
	"affinity":     {"dep_affinity"},
	"arch":         {"pod_arch_pinned", "arch_pinned_share", "arch_free_share"},
	"emission":     {"emission"},
}

// FirstTelemetryFeature is the index of the first telemetry feature; the
// NumTelemetryFeatures telemetry features follow one another.
const (
	FirstTelemetryFeature = 36
	NumTelemetryFeatures  = 4
)

// AffinityFeature is the index of dep_affinity.
const AffinityFeature = 40

// Indices of the architecture features.
const (
	ArchPinnedFeature      = 41 // pod_arch_pinned
	ArchPinnedShareFeature = 42 // arch_pinned_share
	ArchFreeShareFeature   = 43 // arch_free_share
)

// EmissionFeature is the index of emission, and emissionSteps its steps
// per unit of log(1 + gCO2/h).
const (
	EmissionFeature = 44
	emissionSteps   = 8
)

// AffinityEncoder identifies the shipped GraphSAGE encoder and decoder
// (DefaultSage, SageWeights.ID; policy/sage's Default): a model of this
// schema that carries no GraphSAGE weights of its own reads partners of
// these. A model that carries weights (FloatModel.Sage, signed in its
// artifact) reads partners of their ID instead (nn.Model.AffinityEncoder,
// quant.Artifact.AffinityEncoder). policy/sage's test checks pretraining
// against the shipped weights.
const AffinityEncoder = "sage-11de4ec523f5d9ba"

// FeatureIndex returns the index of the named feature, or -1.
func FeatureIndex(name string) int {
	for i, f := range featureList {
		if f.Name == name {
			return i
		}
	}
	return -1
}

// ExcludeMask resolves feature and group names to a mask over the
// features (true: left out). An unknown name is an error listing the
// valid ones.
func ExcludeMask(names []string) ([]bool, error) {
	if len(names) == 0 {
		return nil, nil
	}
	mask := make([]bool, NumFeatures)
	for _, n := range names {
		if g, ok := FeatureGroups[n]; ok {
			for _, f := range g {
				mask[FeatureIndex(f)] = true
			}
			continue
		}
		i := FeatureIndex(n)
		if i < 0 {
			return nil, fmt.Errorf("%w: unknown feature or group %q (groups: affinity, arch, carbon, dependencies, emission, telemetry; features: the names of docs/policy.md)", ErrSchema, n)
		}
		mask[i] = true
	}
	return mask, nil
}

// FeatureList returns the schema's features, in order.
func FeatureList() []Feature { return append([]Feature(nil), featureList[:]...) }

// Schema is the feature schema a model was trained on: its ID, the feature
// names, and the normalisation statistics applied to raw features
// (x - Mean) / Std. The statistics are part of the schema: a model never
// sees unnormalised or differently normalised inputs.
type Schema struct {
	ID    string
	Names []string
	Mean  []float32
	Std   []float32
	// Lo and Hi, when set, are the least and greatest raw value of each
	// feature in the rows the model's training collected; the float
	// scorer holds every input within them (Clamp), so a network is not
	// read beyond the inputs it was trained on (a fleet whose RTTs, pod
	// sizes or grids lie outside the training families'). Training itself
	// never clamps (but for a federated round's local training, which
	// keeps its start's bounds). Both artifacts carry them (format 3), and
	// the int8 kernels hold their inputs within them too. nil: no bounds
	// (models and artifacts written before 5 December 2026). Not part of
	// Hash.
	Lo, Hi []float32
}

// Clamp holds the raw feature row x within [Lo, Hi], when the schema has
// bounds. A NaN stays NaN.
func (s *Schema) Clamp(x []float32) {
	if s.Lo == nil {
		return
	}
	for i := range x {
		x[i] = s.Bound(i, x[i])
	}
}

// Bound is raw value v of feature i held within [Lo[i], Hi[i]] (v itself
// without bounds; a NaN stays NaN).
func (s *Schema) Bound(i int, v float32) float32 {
	if s.Lo != nil {
		v = min(max(v, s.Lo[i]), s.Hi[i])
	}
	return v
}

// Range is the least and greatest value of each raw feature over the
// rows observed (NaNs skipped). The zero Range has observed nothing.
// Not safe for concurrent use.
type Range struct {
	Lo, Hi []float32
}

// Observe widens r to cover row x (NumFeatures values).
func (r *Range) Observe(x []float32) {
	if r.Lo == nil {
		r.Lo, r.Hi = make([]float32, len(x)), make([]float32, len(x))
		for i := range x {
			r.Lo[i], r.Hi[i] = float32(math.Inf(1)), float32(math.Inf(-1))
		}
	}
	for i, v := range x {
		if v < r.Lo[i] {
			r.Lo[i] = v
		}
		if v > r.Hi[i] {
			r.Hi[i] = v
		}
	}
}

// Merge widens r to cover o (a feature o never observed leaves r's as
// it is).
func (r *Range) Merge(o Range) {
	if o.Lo == nil {
		return
	}
	if r.Lo == nil {
		r.Lo, r.Hi = slices.Clone(o.Lo), slices.Clone(o.Hi)
		return
	}
	for i := range o.Lo {
		if o.Lo[i] <= o.Hi[i] {
			r.Lo[i], r.Hi[i] = min(r.Lo[i], o.Lo[i]), max(r.Hi[i], o.Hi[i])
		}
	}
}

// Bounds returns r as schema bounds (Schema.Lo, Schema.Hi): a feature
// never observed is unbounded, and an infinity observed is none on its
// side (±math.MaxFloat32). nil, nil when r has observed nothing.
func (r Range) Bounds() (lo, hi []float32) {
	if r.Lo == nil {
		return nil, nil
	}
	lo, hi = make([]float32, len(r.Lo)), make([]float32, len(r.Hi))
	for i := range r.Lo {
		lo[i], hi[i] = -math.MaxFloat32, math.MaxFloat32
		if r.Lo[i] <= r.Hi[i] { // observed
			lo[i], hi[i] = max(r.Lo[i], -math.MaxFloat32), min(r.Hi[i], math.MaxFloat32)
		}
	}
	return lo, hi
}

// NewSchema returns the current schema with identity normalisation.
func NewSchema() Schema {
	s := Schema{ID: SchemaID, Mean: make([]float32, NumFeatures), Std: make([]float32, NumFeatures)}
	for i, f := range featureList {
		s.Names = append(s.Names, f.Name)
		s.Std[i] = 1
	}
	return s
}

// Validate checks that s is the schema this build computes, with sane
// statistics.
func (s Schema) Validate() error {
	if s.ID != SchemaID {
		hint := ""
		switch s.ID {
		case "edgesched.features/v1":
			hint = " (v1 models were trained before the GPU-model features; retrain with 'edgectl train' or use an edgectl of that release)"
		case "edgesched.features/v2":
			hint = " (v2 models were trained before the telemetry features; retrain with 'edgectl train' or use an edgectl of that release)"
		case "edgesched.features/v3":
			hint = " (v3 models were trained before the embeddings' dep_affinity feature; retrain with 'edgectl train' or use an edgectl of that release)"
		case "edgesched.features/v4":
			hint = " (v4 models were trained before the architecture features pod_arch_pinned, arch_pinned_share and arch_free_share; retrain with 'edgectl train' or use an edgectl of that release)"
		}
		return fmt.Errorf("%w: schema %q, this build computes %q%s", ErrSchema, s.ID, SchemaID, hint)
	}
	if len(s.Names) != NumFeatures || len(s.Mean) != NumFeatures || len(s.Std) != NumFeatures {
		return fmt.Errorf("%w: %d names, %d means, %d stds; want %d each", ErrSchema, len(s.Names), len(s.Mean), len(s.Std), NumFeatures)
	}
	for i, f := range featureList {
		if s.Names[i] != f.Name {
			return fmt.Errorf("%w: feature %d is %q, this build computes %q", ErrSchema, i, s.Names[i], f.Name)
		}
		if m, d := float64(s.Mean[i]), float64(s.Std[i]); math.IsNaN(m) || math.IsInf(m, 0) || !(d > 0) || math.IsInf(d, 0) {
			return fmt.Errorf("%w: feature %s has mean %v, std %v", ErrSchema, f.Name, m, d)
		}
	}
	if s.Lo == nil && s.Hi == nil {
		return nil
	}
	if len(s.Lo) != NumFeatures || len(s.Hi) != NumFeatures {
		return fmt.Errorf("%w: bounds of %d and %d features; want %d each, or none", ErrSchema, len(s.Lo), len(s.Hi), NumFeatures)
	}
	for i, f := range featureList {
		if l, h := float64(s.Lo[i]), float64(s.Hi[i]); math.IsNaN(l) || math.IsNaN(h) || math.IsInf(l, 0) || math.IsInf(h, 0) || l > h {
			return fmt.Errorf("%w: feature %s has bounds [%v, %v]", ErrSchema, f.Name, l, h)
		}
	}
	return nil
}

// Hash is a SHA-256 over the schema's ID, names and statistics (not the
// bounds, which are the model's: Lo, Hi).
func (s Schema) Hash() string {
	h := sha256.New()
	h.Write([]byte(s.ID))
	for i := range s.Names {
		h.Write([]byte{0})
		h.Write([]byte(s.Names[i]))
		var b [8]byte
		binary.LittleEndian.PutUint32(b[:4], math.Float32bits(s.Mean[i]))
		binary.LittleEndian.PutUint32(b[4:], math.Float32bits(s.Std[i]))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Normalize applies the schema's statistics to a raw vector in place.
func (s Schema) Normalize(x []float32) {
	for i := range x {
		x[i] = (x[i] - s.Mean[i]) / s.Std[i]
	}
}

// MinStd is the least standard deviation Schema.Fit records: an input that
// did not vary in the data it was fitted on gets MinStd, so any other value
// of it normalises to hundreds of standard deviations. Trainers do not let a
// network read such an input (policy/ppo).
const MinStd = 1e-3

// Fit sets the statistics from raw samples: mean and standard deviation
// per feature, with the deviation floored at MinStd (a constant feature
// stays finite and carries no signal).
func (s *Schema) Fit(samples [][]float32) {
	n := float64(len(samples))
	if n == 0 {
		return
	}
	for i := range NumFeatures {
		var sum, sq float64
		for _, x := range samples {
			sum += float64(x[i])
		}
		mean := sum / n
		for _, x := range samples {
			d := float64(x[i]) - mean
			sq += d * d
		}
		s.Mean[i] = float32(mean)
		s.Std[i] = float32(math.Max(math.Sqrt(sq/n), MinStd))
	}
}

// PickGPUs chooses devices the way the features assume (FGD's choice for a
// shared GPU, the lowest free devices otherwise).
func (x *Extractor) PickGPUs(st *sim.State, p *sim.Pod, n int, dst []int) []int {
	return x.fgd.PickGPUs(st, p, n, dst)
}

// Extractor computes raw feature vectors from a simulator state. It keeps
// per-run caches (FGD deltas) and per-decision scratch: one Extractor per
// run, used from one goroutine.
type Extractor struct {
	env *sim.Env
	fgd *baseline.FGDPolicy
	md  sim.ModelDemand
	// strand measures the GPU a placement strands (Decision.StrandWeight)
	strand sim.Strand
	// capShare[g]: model g's share of the cluster's GPU capacity;
	// wl: the workload features, fixed for the run
	capShare []float64
	wl       [4]float32
	// pressure[g]: the model's pressure bucket for the current decision;
	// model[n]: node n's GPU model (-1 without)
	pressure []uint16
	model    []int32
	// arch[a]: architecture a's steps of arch_pinned_share (bits 0-4)
	// and arch_free_share (bits 5-9) for the current decision;
	// nodeArch[n]: node n's architecture; useArch: Context includes them
	arch     [sim.NumArch]uint16
	nodeArch []sim.Arch
	useArch  bool
	// skipEmission: Extract writes 0 for emission (UseEmission)
	skipEmission bool
	// per-decision dependency context, by zone
	coloc, rtt []float32
	hasDeps    bool
	// aff: dep_affinity by zone (hasAff: computed for this pod);
	// affEncoder: the encoder whose partners it reads ("": AffinityEncoder)
	aff        []float32
	hasAff     bool
	affEncoder string
	maxCPU     float64
	maxMem     float64
	maxGPU     float64
	buf        []int
	// exact[g]: model g's pressure (BeginPod's, Decide's); keys, over:
	// Decide's
	keys  []float64
	over  []bool
	exact []float64
	n1    [1]int32
	s1    [1]float64
	// useTel: Context includes the telemetry steps (the scorer reads the
	// telemetry features); skipTel: Extract writes 0 for them; tel[n]: node n's steps, valid when
	// telStamp[n] == stamp (one per BeginPod)
	useTel   bool
	skipTel  bool
	stamp    uint32
	tel      []uint64
	telStamp []uint32
	// fit[n]: node n's fragmentation against the classes that accept its
	// GPU model (GPUFragFitOf), at node version fitVer[n]-1 (0: none)
	fit    []float64
	fitVer []uint64
}

// NewExtractor returns an extractor for env.
func NewExtractor(env *sim.Env) *Extractor {
	x := &Extractor{
		env: env, fgd: baseline.NewFGD(env),
		md:       sim.NewModelDemand(env.Target, env.Nodes, len(env.Models)),
		strand:   sim.NewStrand(env.Target),
		capShare: make([]float64, len(env.Models)),
		pressure: make([]uint16, len(env.Models)),
		exact:    make([]float64, len(env.Models)),
		coloc:    make([]float32, len(env.Zones)), rtt: make([]float32, len(env.Zones)),
		aff:    make([]float32, len(env.Zones)),
		maxCPU: float64(env.MaxNode.CPU), maxMem: float64(env.MaxNode.Mem), maxGPU: math.Max(float64(env.MaxNode.GPU), sim.MilliGPU),
	}
	x.model = make([]int32, len(env.Nodes))
	x.nodeArch = make([]sim.Arch, len(env.Nodes))
	x.fit, x.fitVer = make([]float64, len(env.Nodes)), make([]uint64, len(env.Nodes))
	x.tel, x.telStamp = make([]uint64, len(env.Nodes)), make([]uint32, len(env.Nodes))
	x.stamp = 1 // a zero telStamp is never a memo, even for an Extract before any BeginPod
	for i := range env.Nodes {
		x.model[i] = env.Nodes[i].Model
		x.nodeArch[i] = env.Nodes[i].Arch
	}
	if env.Capacity.GPU > 0 {
		for g, c := range x.md.Capacity {
			x.capShare[g] = c / float64(env.Capacity.GPU)
		}
	}
	var dem, spec float64
	for _, c := range env.Target.Classes {
		switch {
		case c.GPUs == 0:
			x.wl[0] += float32(c.P)
		case c.GPUs == 1 && c.GPUMilli < sim.MilliGPU:
			x.wl[1] += float32(c.P)
		case c.GPUs > 1:
			x.wl[2] += float32(c.P)
		}
		d := c.P * float64(c.GPUs) * float64(c.GPUMilli)
		dem += d
		if c.GPUMask != 0 {
			spec += d
		}
	}
	if dem > 0 {
		x.wl[3] = float32(spec / dem)
	}
	return x
}

// pressureSteps is the resolution of the model_pressure feature: log(1 +
// pressure) in steps of 1/pressureSteps (finer steps cost more than they
// help: 8 per unit made the learned sweep of a workload naming GPU models
// twice as slow, through cache invalidations, for no better selection
// score). Rounding makes the feature, and so
// a node's score, change only when the pressure moves by a step, so
// scores can be cached per node (Context).
const pressureSteps = 2

// Telemetry steps: the telemetry features move in steps (cpu_busy 1/20,
// runq_p99 1/4, mem_pressure 1/8, retrans 1/2), so a node's score changes
// only when its measurements move by a step and scores can be cached
// (Context); so do the architecture shares (1/20).
const (
	archSteps    = 20 // arch_pinned_share, arch_free_share
	cpuSteps     = 20
	runqSteps    = 4
	memSteps     = 8
	retransSteps = 2
)

// telemetrySteps returns node n's telemetry features in steps (cpu_busy,
// runq_p99, mem_pressure, retrans), packed 16 bits each; memoised per
// BeginPod.
func (x *Extractor) telemetrySteps(st *sim.State, n int) uint64 {
	if x.telStamp[n] == x.stamp {
		return x.tel[n]
	}
	t := st.Telemetry(n)
	step := func(v float64, k float64) uint64 { return uint64(min(math.Round(max(v, 0)*k), 0xffff)) }
	v := step(t.CPU, cpuSteps) | step(math.Log1p(t.RunQueueP99Us/1000), runqSteps)<<16 |
		step(t.MemPressure, memSteps)<<32 | step(math.Log1p(t.RetransPerS), retransSteps)<<48
	x.tel[n], x.telStamp[n] = v, x.stamp
	return v
}

// UseTelemetry says whether the scorer reads the telemetry features: on,
// Context includes the node's telemetry steps; off, Extract writes 0 for
// them (a network that leaves them out, Net.ReadsInput, scores the same
// whatever they are, and they cost an evaluation of the node response
// model per row). Without a call, Extract computes them and Context
// leaves them out: what training rollouts record.
func (x *Extractor) UseTelemetry(on bool) { x.useTel, x.skipTel = on, !on }

// UseArch says whether the scorer reads the architecture shares
// (arch_pinned_share, arch_free_share): on, Context includes their steps;
// off (and without a call), it leaves them out, so the cached scores of a
// network that does not read them (Net.ReadsInput) stay valid when the
// cluster's shares move a step. Extract computes them either way.
func (x *Extractor) UseArch(on bool) { x.useArch = on }

// UseEmission says whether the scorer reads emission: off, Extract
// writes 0 for it (a network that leaves it out scores the same whatever
// it is, and it costs a logarithm per row). Without a call, Extract
// computes it: what training rollouts record, and the plugin's view.
func (x *Extractor) UseEmission(on bool) { x.skipEmission = !on }

// UsePartnersOf makes dep_affinity read the environment's partners only
// when they come from the GraphSAGE weights of ID encoder (the model's
// own; "": AffinityEncoder, the shipped ones), and be 0 otherwise.
func (x *Extractor) UsePartnersOf(encoder string) { x.affEncoder = encoder }

// NodeContext is what a node's features read beyond the node's requests
// and placements: the pressure step of its GPU model (bits 0-3: at most
// round(log(1 + MaxPressure) * pressureSteps) = 6), with UseArch the
// steps of its architecture's shares (bits 4-8 and 9-13: at most
// archSteps = 20) and, with UseTelemetry, its telemetry steps.
// Comparable.
type NodeContext struct {
	pressure uint16
	tel      uint64
}

// Context is node n's NodeContext now (valid after BeginPod): a cached
// score of the node is current while its Context is unchanged.
func (x *Extractor) Context(st *sim.State, n int) NodeContext {
	var out [1]NodeContext
	x.Contexts(st, []int32{int32(n)}, out[:])
	return out[0]
}

// Contexts writes the Context of each of nodes into out (as long as
// nodes): one call for a cycle's candidates instead of one per node.
func (x *Extractor) Contexts(st *sim.State, nodes []int32, out []NodeContext) {
	out = out[:len(nodes)]
	for j, n := range nodes {
		var c NodeContext
		if g := x.model[n]; g >= 0 {
			c.pressure = x.pressure[g]
		}
		if x.useArch {
			c.pressure |= x.arch[x.nodeArch[n]] << 4
		}
		if x.useTel {
			c.tel = x.telemetrySteps(st, int(n))
		}
		out[j] = c
	}
}

// Same reports whether c and d are equal, as == does, without the
// generated equality function's call (inlined in a loop over nodes).
func (c NodeContext) Same(d NodeContext) bool { return c.pressure == d.pressure && c.tel == d.tel }

// modelChoice is the share of the cluster's GPU capacity on models pod p
// accepts.
func (x *Extractor) modelChoice(p *sim.Pod) float32 {
	if p.GPUMask == 0 {
		return 1
	}
	var s float64
	for g, c := range x.capShare {
		if p.GPUMask&(1<<uint(g)) != 0 {
			s += c
		}
	}
	return float32(s)
}

// Decide rewrites the scores of pod p on candidate nodes by decision rule
// d. With a CPU cap (Decision.CPUCap), the candidates on which p's CPU
// request would bring the node's requests above d.CPUCap of its CPU rank
// below the others, for every pod; with a busy cap (Decision.BusyCap),
// the candidates whose measured CPU is at or above it rank below the
// others on their side of the CPU cap (capCPU). The busy cap reads the
// telemetry memo of the last BeginPod, so Decide must follow BeginPod
// for p on the same State, with no SetMeasured between (as every caller
// does: NetworkScores, then Decide). With a band (Decision.Apply), the
// candidates within it are keyed by FGD's score of each placement (its
// fragmentation bucket plus its packing key, as the FGD baseline ranks
// nodes), less d.PressureWeight times the pressure of the node's GPU model
// for GPU pods (the fgd-pressure teacher's score), less d.StrandWeight
// times the GPU (in devices) the placement strands for lack of CPU or
// memory, for every pod (sim.Strand.Delta; the fgd-strand teacher's
// score); the band leaves alone
// the scores of a pod with a dependency neighbour already placed: FGD
// does not see dependencies, so the network's colocation preference must
// not be handed to it. Scores of a model without a rule are left alone.
func (x *Extractor) Decide(d Decision, st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	d = d.For(p)
	if d.CPUCap > 0 || d.BusyCap > 0 {
		x.capCPU(d, st, p, nodes, scores)
	}
	if d.Band <= 0 || x.placedNeighbour(st, p) {
		return
	}
	if cap(x.keys) < len(nodes) {
		x.keys = make([]float64, len(nodes))
	}
	weigh := d.PressureWeight > 0 && p.GPUs > 0
	if weigh {
		x.md.Pressures(st, x.exact)
	}
	d.Apply(scores, x.keys, func(i int) float64 {
		n := nodes[i]
		x.n1[0] = n
		x.fgd.Score(st, p, x.n1[:], x.s1[:])
		k := x.s1[0]
		if g := x.model[n]; weigh && g >= 0 {
			k -= d.PressureWeight * x.exact[g]
		}
		if d.StrandWeight > 0 {
			k -= d.StrandWeight * x.strand.Delta(&st.Nodes[n], p) / sim.MilliGPU
		}
		return k
	})
}

// capCPU applies d's caps to p's candidates (Demote), in two tiers: the
// candidates whose cpu_busy step is at or above d.BusyCap (Busy) rank
// below the others, then those on which p's CPU request would bring the
// node's requests above d.CPUCap of its CPU (OverCap) rank below all the
// rest, busy or not; each group keeps its order, so within each side of
// the CPU cap the busy candidates rank below the others. So the request
// cap, which keeps room for later pods, holds whatever the telemetry
// says.
func (x *Extractor) capCPU(d Decision, st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	if cap(x.over) < len(nodes) {
		x.over = make([]bool, len(nodes))
	}
	over := x.over[:len(nodes)]
	if d.BusyCap > 0 {
		for i, n := range nodes {
			over[i] = Busy(d.BusyCap, x.telemetrySteps(st, int(n))&0xffff)
		}
		Demote(scores[:len(nodes)], over)
	}
	if d.CPUCap > 0 {
		for i, n := range nodes {
			nd := &st.Nodes[n]
			over[i] = OverCap(d.CPUCap, nd.CPU-nd.CPUFree, p.CPU, nd.CPU)
		}
		Demote(scores[:len(nodes)], over)
	}
}

// placedNeighbour reports whether a dependency neighbour of p's service
// (a caller or a callee with a positive call rate) has pods placed: what
// BeginPod's features read, without computing them.
func (x *Extractor) placedNeighbour(st *sim.State, p *sim.Pod) bool {
	placed := false
	x.eachNeighbour(p, func(nbr int, rate float64) {
		placed = placed || rate > 0 && st.ServiceCount(nbr) > 0
	})
	return placed
}

// eachNeighbour calls visit with every dependency neighbour of p's
// service (callee or caller; a self-edge once) and the edge's call rate.
func (x *Extractor) eachNeighbour(p *sim.Pod, visit func(nbr int, rate float64)) {
	if p.Service < 0 {
		return
	}
	for _, e := range x.env.Edges {
		switch int32(p.Service) {
		case e.From:
			visit(int(e.To), e.Rate)
		case e.To:
			if e.From != e.To {
				visit(int(e.From), e.Rate)
			}
		}
	}
}

// BeginPod prepares the per-decision context of pod p (its dependency
// neighbours' placement by zone). Call it once before Extract for the
// pod's candidate nodes.
func (x *Extractor) BeginPod(st *sim.State, p *sim.Pod) {
	env := x.env
	x.stamp++
	if x.stamp == 0 { // wrapped: forget every memo
		clear(x.telStamp)
		x.stamp = 1
	}
	for g, pr := range x.md.Pressures(st, x.exact) {
		x.pressure[g] = uint16(math.Round(math.Log1p(pr) * pressureSteps))
	}
	for a := range x.arch {
		pinned, free := st.ArchShares(sim.Arch(a))
		x.arch[a] = uint16(math.Round(pinned*archSteps)) | uint16(math.Round(free*archSteps))<<5
	}
	x.hasDeps = false
	for z := range x.coloc {
		x.coloc[z], x.rtt[z] = 0, 0
	}
	if p.Service < 0 {
		x.hasAff = false
		return
	}
	x.beginAffinity(st, p)
	Z := len(env.Zones)
	var total float64
	colo := make([]float64, Z)
	rtt := make([]float64, Z)
	x.eachNeighbour(p, func(nbr int, rate float64) {
		cnt := st.ServiceCount(nbr)
		if cnt == 0 || rate <= 0 {
			return
		}
		total += rate
		for z := range Z {
			var r float64
			for z2 := range Z {
				r += float64(st.ServiceZoneCount(nbr, z2)) * env.RTT[z][z2]
			}
			colo[z] += rate * float64(st.ServiceZoneCount(nbr, z)) / float64(cnt)
			rtt[z] += rate * r / float64(cnt)
		}
	})
	if total == 0 {
		return
	}
	x.hasDeps = true
	for z := range Z {
		x.coloc[z] = float32(colo[z] / total)
		x.rtt[z] = float32(rtt[z] / total / 100)
	}
}

// beginAffinity computes dep_affinity by zone for p: over p's service's
// partners with pods placed, the share of each one's pods in the zone,
// weighted by the partner's probability. Without partners, or with no
// partner placed, it is 0.
func (x *Extractor) beginAffinity(st *sim.State, p *sim.Pod) {
	x.hasAff = false
	parts := x.env.PartnersOf(cmp.Or(x.affEncoder, AffinityEncoder))
	if int(p.Service) >= len(parts) {
		return
	}
	clear(x.aff)
	var total float32
	for _, q := range parts[p.Service] {
		cnt := st.ServiceCount(int(q.Service))
		if cnt == 0 || q.P <= 0 {
			continue
		}
		total += q.P
		for z := range x.aff {
			if c := st.ServiceZoneCount(int(q.Service), z); c > 0 {
				x.aff[z] += q.P * float32(c) / float32(cnt)
			}
		}
	}
	if total == 0 {
		return
	}
	x.hasAff = true
	for z := range x.aff {
		x.aff[z] /= total
	}
}

// Extract writes the raw features of placing p on node n into out
// (len NumFeatures). BeginPod must have been called for p.
func (x *Extractor) Extract(st *sim.State, p *sim.Pod, n int, out []float32) {
	_ = out[NumFeatures-1]
	nd := &st.Nodes[n]
	demand := p.GPUDemand()
	gpuCap := float64(nd.GPUs) * sim.MilliGPU

	out[0] = float32(float64(p.CPU) / x.maxCPU)
	out[1] = float32(float64(p.Mem) / x.maxMem)
	out[2] = float32(float64(demand) / x.maxGPU)
	out[3] = b2f(p.GPUs == 1 && p.GPUMilli < sim.MilliGPU)
	out[4] = b2f(p.QoS == sim.QoSLS)
	out[5] = b2f(p.QoS == sim.QoSBE)
	out[6] = float32(math.Tanh(float64(p.Priority) / 1000))
	out[7] = b2f(p.GPUs > 0 && p.GPUMask != 0)
	out[8] = x.modelChoice(p)
	copy(out[9:13], x.wl[:])

	cpuAfter := float64(nd.CPUFree - p.CPU)
	memAfter := float64(nd.MemFree - p.Mem)
	gpuAfter := float64(nd.GPUFreeTotal - demand)
	out[13] = float32(cpuAfter / float64(nd.CPU))
	out[14] = float32(memAfter / float64(nd.Mem))
	gpuRel := 0.0
	if gpuCap > 0 {
		gpuRel = gpuAfter / gpuCap
	}
	out[15] = float32(gpuRel)
	out[16] = float32(cpuAfter / x.maxCPU)
	out[17] = float32(gpuAfter / x.maxGPU)

	full := nd.FullFree
	var leftover float64
	delta, fgdScore, dev := x.fgd.DeltaScore(st, p, n)
	x.buf = x.buf[:0]
	if p.GPUs > 0 {
		x.buf = x.fgd.PickGPUs(st, p, n, x.buf)
		for _, g := range x.buf {
			if nd.GPUFree[g] == sim.MilliGPU {
				full--
			}
		}
		if dev >= 0 {
			leftover = float64(nd.GPUFree[dev]-p.GPUMilli) / sim.MilliGPU
		}
	}
	out[18] = float32(full) / 8
	out[19] = float32(leftover)
	out[20] = float32(delta / sim.MilliGPU)
	out[21] = float32(fgdScore) / 100
	out[22] = float32((nd.FragGPU + delta) / x.maxGPU)
	fitDelta := delta // no class names a model: the fit measure is FGD's
	if len(nd.GPUFree) > 0 && x.wl[3] > 0 {
		before := x.fitBefore(st, n)
		var after float64
		if p.GPUs > 0 {
			after = st.GPUFragFitAfter(n, p, x.buf)
		} else {
			after = st.GPUFragFitOf(nd.CPUFree-p.CPU, nd.Model, nd.GPUFree)
		}
		fitDelta = after - before
	}
	out[23] = float32(fitDelta / sim.MilliGPU)
	out[24] = b2f(p.GPUs == 0 && nd.GPUs > 0)
	if gpuCap > 0 {
		out[25] = float32(cpuAfter/float64(nd.CPU) - gpuRel)
	} else {
		out[25] = 0
	}
	out[26], out[27], out[28] = 0, 0, 0
	if g := nd.Model; g >= 0 {
		out[26] = float32(x.pressure[g]) / pressureSteps
		out[27] = float32(x.md.Accept[g])
		out[28] = float32(x.md.Exclusive[g])
	}
	out[29] = b2f(nd.Arch == sim.ArchARM64)
	// what the node measures busy: its pods' use and, in the simulator,
	// its background load (a real node's measured use has it in CPUUsed)
	out[30] = float32((nd.CPUUsed + nd.Background) / float64(nd.CPU))
	out[31] = float32(float64(p.CPU) / float64(nd.CPU))
	out[32] = float32(math.Log1p(nd.FailureRate))
	out[33] = float32(x.env.CarbonAt(nd.CarbonZone, st.Now) / 1000)
	if x.hasDeps {
		out[34] = x.coloc[nd.Zone]
		out[35] = x.rtt[nd.Zone]
	} else {
		out[34], out[35] = 0, 0
	}
	out[AffinityFeature] = 0
	if x.hasAff {
		out[AffinityFeature] = x.aff[nd.Zone]
	}
	out[ArchPinnedFeature] = b2f(p.Arch != sim.ArchAny)
	a := x.arch[nd.Arch]
	out[ArchPinnedShareFeature] = float32(a&0x1f) / archSteps
	out[ArchFreeShareFeature] = float32(a>>5) / archSteps
	out[EmissionFeature] = 0
	if !x.skipEmission {
		out[EmissionFeature] = EmissionStep(x.env.CarbonAt(nd.CarbonZone, st.Now) * sim.RequestWatts(&nd.NodeInfo, p) / 1000)
	}
	if x.skipTel {
		out[36], out[37], out[38], out[39] = 0, 0, 0, 0
		return
	}
	tel := x.telemetrySteps(st, n)
	out[36] = float32(tel&0xffff) / cpuSteps
	out[37] = float32(tel>>16&0xffff) / runqSteps
	out[38] = float32(tel>>32&0xffff) / memSteps
	out[39] = float32(tel>>48) / retransSteps
}

// EmissionStep is the emission feature of an emission rate in gCO2/h:
// log(1 + rate) in steps of 1/emissionSteps (rounded down; a rate below 0
// or not a number reads as 0).
func EmissionStep(gPerHour float64) float32 {
	if !(gPerHour > 0) {
		return 0
	}
	return float32(math.Floor(math.Log1p(gPerHour)*emissionSteps)) / emissionSteps
}

// fitBefore is node n's GPUFragFitOf as it stands, memoised by node
// version (a version names one node state, clones included: sim.State's
// Clone), so a node's half of fgd_fit_delta is computed once per change
// rather than once per shape scored on it.
func (x *Extractor) fitBefore(st *sim.State, n int) float64 {
	nd := &st.Nodes[n]
	if x.fitVer[n] == nd.Version+1 {
		return x.fit[n]
	}
	v := st.GPUFragFitOf(nd.CPUFree, nd.Model, nd.GPUFree)
	x.fit[n], x.fitVer[n] = v, nd.Version+1
	return v
}

func b2f(b bool) float32 {
	if b {
		return 1
	}
	return 0
}
