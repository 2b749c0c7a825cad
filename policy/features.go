package policy

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
)

// SchemaID names the feature schema version. Artifacts carry it with
// Schema.Hash; a model is only ever fed features of the schema it was
// trained on.
const SchemaID = "edgesched.features/v1"

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
var featureList = [NumFeatures]Feature{
	// pod
	{"pod_cpu", "pod CPU request / largest node's CPU"},
	{"pod_mem", "pod memory request / largest node's memory"},
	{"pod_gpu", "pod GPU demand (milli-GPU) / largest node's GPU capacity"},
	{"pod_share", "1 when the pod shares one GPU (gpu_milli < 1000)"},
	{"pod_qos_ls", "1 for a latency-sensitive (LS) pod"},
	{"pod_qos_be", "1 for a best-effort (BE) pod"},
	{"pod_priority", "tanh(priority / 1000)"},
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
	{"gpu_node_cpu_pod", "1 when a pod without GPUs would land on a node with GPUs"},
	{"balance_after", "cpu_free_after - gpu_free_after on GPU nodes (0 otherwise)"},
	// node attributes and load
	{"arch_arm64", "1 for an arm64 node"},
	{"load", "node's used CPU (measured) / node's CPU"},
	{"pod_cpu_rel", "pod CPU request / node's CPU"},
	{"failure_rate", "log(1 + node failures per day)"},
	{"carbon", "grid carbon intensity at the node now, gCO2/kWh / 1000"},
	// dependencies
	{"dep_zone_colocation", "call-rate weighted share of the pod's dependency neighbours' replicas in the node's zone"},
	{"dep_rtt", "call-rate weighted mean RTT (ms) from the node's zone to the neighbours' replicas / 100"},
}

// NumFeatures is the length of a feature vector.
const NumFeatures = 26

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
		return fmt.Errorf("%w: schema %q, this build computes %q", ErrSchema, s.ID, SchemaID)
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
	return nil
}

// Hash is a SHA-256 over the schema's ID, names and statistics.
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

// Fit sets the statistics from raw samples: mean and standard deviation
// per feature, with the deviation floored at 1e-3 (a constant feature
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
		s.Std[i] = float32(math.Max(math.Sqrt(sq/n), 1e-3))
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
	// per-decision dependency context, by zone
	coloc, rtt []float32
	hasDeps    bool
	maxCPU     float64
	maxMem     float64
	maxGPU     float64
	buf        []int
	// Decide's scratch
	keys []float64
	n1   [1]int32
	s1   [1]float64
}

// NewExtractor returns an extractor for env.
func NewExtractor(env *sim.Env) *Extractor {
	return &Extractor{
		env: env, fgd: baseline.NewFGD(env),
		coloc: make([]float32, len(env.Zones)), rtt: make([]float32, len(env.Zones)),
		maxCPU: float64(env.MaxNode.CPU), maxMem: float64(env.MaxNode.Mem), maxGPU: math.Max(float64(env.MaxNode.GPU), sim.MilliGPU),
	}
}

// Decide rewrites the scores of pod p on candidate nodes by decision rule
// d (Decision.Apply), keyed by FGD's score of each placement (its
// fragmentation bucket plus its packing key, as the FGD baseline ranks
// nodes). Scores of a model without a rule are left alone, and so are
// those of a pod with a dependency neighbour already placed: FGD does not
// see dependencies, so the network's colocation preference must not be
// handed to it.
func (x *Extractor) Decide(d Decision, st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	d = d.For(p)
	if d.Band <= 0 || x.placedNeighbour(st, p) {
		return
	}
	if cap(x.keys) < len(nodes) {
		x.keys = make([]float64, len(nodes))
	}
	d.Apply(scores, x.keys, func(i int) float64 {
		x.n1[0] = nodes[i]
		x.fgd.Score(st, p, x.n1[:], x.s1[:])
		return x.s1[0]
	})
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
	x.hasDeps = false
	for z := range x.coloc {
		x.coloc[z], x.rtt[z] = 0, 0
	}
	if p.Service < 0 {
		return
	}
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

	cpuAfter := float64(nd.CPUFree - p.CPU)
	memAfter := float64(nd.MemFree - p.Mem)
	gpuAfter := float64(nd.GPUFreeTotal - demand)
	out[7] = float32(cpuAfter / float64(nd.CPU))
	out[8] = float32(memAfter / float64(nd.Mem))
	gpuRel := 0.0
	if gpuCap > 0 {
		gpuRel = gpuAfter / gpuCap
	}
	out[9] = float32(gpuRel)
	out[10] = float32(cpuAfter / x.maxCPU)
	out[11] = float32(gpuAfter / x.maxGPU)

	full := nd.FullFree
	var leftover float64
	delta, dev := x.fgd.Delta(st, p, n)
	if p.GPUs > 0 {
		x.buf = x.fgd.PickGPUs(st, p, n, x.buf[:0])
		for _, g := range x.buf {
			if nd.GPUFree[g] == sim.MilliGPU {
				full--
			}
		}
		if dev >= 0 {
			leftover = float64(nd.GPUFree[dev]-p.GPUMilli) / sim.MilliGPU
		}
	}
	out[12] = float32(full) / 8
	out[13] = float32(leftover)
	out[14] = float32(delta / sim.MilliGPU)
	out[15] = float32(baseline.FGDScore(delta)) / 100
	out[16] = float32((nd.FragGPU + delta) / x.maxGPU)
	out[17] = b2f(p.GPUs == 0 && nd.GPUs > 0)
	if gpuCap > 0 {
		out[18] = float32(cpuAfter/float64(nd.CPU) - gpuRel)
	} else {
		out[18] = 0
	}
	out[19] = b2f(nd.Arch == sim.ArchARM64)
	out[20] = float32(nd.CPUUsed / float64(nd.CPU))
	out[21] = float32(float64(p.CPU) / float64(nd.CPU))
	out[22] = float32(math.Log1p(nd.FailureRate))
	out[23] = float32(x.env.CarbonAt(nd.CarbonZone, st.Now) / 1000)
	if x.hasDeps {
		out[24] = x.coloc[nd.Zone]
		out[25] = x.rtt[nd.Zone]
	} else {
		out[24], out[25] = 0, 0
	}
}

func b2f(b bool) float32 {
	if b {
		return 1
	}
	return 0
}
