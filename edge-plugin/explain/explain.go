package explain

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/edgesched/edgesched/edge-plugin/serving"
	"github.com/edgesched/edgesched/edge-plugin/sources"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policy"
)

// ExplainTopK is how many groups (largest |attribution| first) the
// annotation lists; the others' sum is Rest.
const ExplainTopK = 5

// maxExplainGroups bounds the 2^G coalitions of ShapleyGroups.
const maxExplainGroups = 12

// FeatureGroup is a named set of features of the schema
// (policy.FeatureList), a player of the explanation's Shapley game.
type FeatureGroup struct {
	Name, Description string
	Features          []string // feature names, schema order
	index             []int
}

// featureGroups partition the 45 features of edgesched.features/v6. They
// follow the schema's own sections, except that its "node attributes and
// load" section is split into architecture, load/failure and carbon (the
// load group holds the telemetry features too), which
// an operator reads as different reasons, and the pod's GPU-model and
// architecture constraints and the target workload's mix join the pod
// group (all of them equal on every candidate).
var featureGroups = resolveGroups([]FeatureGroup{
	{Name: "pod", Description: "pod requests, GPU share, QoS, priority, GPU-model and architecture constraints and the target workload's mix (equal on every candidate: 0 against the mean candidate)",
		Features: []string{"pod_cpu", "pod_mem", "pod_gpu", "pod_share", "pod_qos_ls", "pod_qos_be", "pod_priority", "pod_gpu_spec", "pod_model_choice", "wl_cpu", "wl_share", "wl_multi", "wl_spec", "pod_arch_pinned"}},
	{Name: "resources", Description: "the node's free CPU, memory, GPU and whole devices after placement",
		Features: []string{"cpu_free_after", "mem_free_after", "gpu_free_after", "cpu_free_after_abs", "gpu_free_after_abs", "full_gpus_after"}},
	{Name: "gpu-fit", Description: "GPU fit and fragmentation: device leftover, FGD fragmentation change (also against the classes accepting the node's GPU model), CPU pod on a GPU node, CPU/GPU balance",
		Features: []string{"device_leftover", "fgd_delta", "fgd_score", "frag_after", "fgd_fit_delta", "gpu_node_cpu_pod", "balance_after"}},
	{Name: "gpu-model", Description: "the node's GPU model against the target workload: pressure from pods naming models, share of GPU demand it can serve, and only it can serve",
		Features: []string{"model_pressure", "model_accept", "model_exclusive"}},
	{Name: "arch", Description: "the node's CPU architecture (arm64), the share of the running work that needs it and its share of the free CPU",
		Features: []string{"arch_arm64", "arch_pinned_share", "arch_free_share"}},
	{Name: "load", Description: "node load as measured (CPU, run-queue latency, memory pressure, TCP retransmits), the pod's share of the node's CPU, node failure rate",
		Features: []string{"load", "pod_cpu_rel", "failure_rate", "cpu_busy", "runq_p99", "mem_pressure", "retrans"}},
	{Name: "carbon", Description: "grid carbon intensity at the node, and the pod's emission rate there",
		Features: []string{"carbon", "emission"}},
	{Name: "dependencies", Description: "co-location with and RTT to the pod's service dependencies, and with its partners within two calls by the embeddings' predicted links (0 without a dependency graph: dependenciesConfigMap; dep_affinity 0 without the leader's partners)",
		Features: []string{"dep_zone_colocation", "dep_rtt", "dep_affinity"}},
})

// FeatureGroups returns the explanation's feature groups.
func FeatureGroups() []FeatureGroup {
	out := make([]FeatureGroup, len(featureGroups))
	for i, g := range featureGroups {
		out[i] = g
		out[i].Features = slices.Clone(g.Features)
		out[i].index = slices.Clone(g.index)
	}
	return out
}

// resolveGroups fills the feature indices from the schema; a name not in
// the schema is left out (TestFeatureGroupsPartition catches it).
func resolveGroups(gs []FeatureGroup) []FeatureGroup {
	pos := map[string]int{}
	for i, f := range policy.FeatureList() {
		pos[f.Name] = i
	}
	for i := range gs {
		for _, n := range gs[i].Features {
			if j, ok := pos[n]; ok {
				gs[i].index = append(gs[i].index, j)
			}
		}
	}
	return gs
}

// GroupIndices returns the feature indices of each explanation group
// (FeatureGroups' order).
func GroupIndices() [][]int { return groupIndices(featureGroups) }

func groupIndices(gs []FeatureGroup) [][]int {
	out := make([][]int, len(gs))
	for i, g := range gs {
		out[i] = g.index
	}
	return out
}

// ShapleyGroups computes the exact Shapley values of the feature groups
// for the scorer's output on x (one raw feature vector) against base:
// coalition S scores x with the features of the groups outside S taken
// from base. All 2^G coalitions run in one Scores batch; phi[i] is
//
//	sum over S not containing i of |S|!(G-|S|-1)!/G! (v(S+i) - v(S)).
//
// full = v(all groups) = score(x) and empty = v(no group) = score(base),
// so sum(phi) = full - empty. Features in no group keep x's value.
func ShapleyGroups(sc policy.Scorer, x, base []float32, groups [][]int) (phi []float64, full, empty float64, err error) {
	G, F := len(groups), len(x)
	if G == 0 || G > maxExplainGroups {
		return nil, 0, 0, fmt.Errorf("%d feature groups: want 1..%d", G, maxExplainGroups)
	}
	if len(base) != F {
		return nil, 0, 0, fmt.Errorf("baseline has %d features, x has %d", len(base), F)
	}
	for _, g := range groups {
		for _, j := range g {
			if j < 0 || j >= F {
				return nil, 0, 0, fmt.Errorf("feature index %d out of [0, %d)", j, F)
			}
		}
	}
	n := 1 << G
	rows := make([]float32, n*F)
	for s := range n {
		row := rows[s*F : (s+1)*F]
		copy(row, x)
		for i, g := range groups {
			if s&(1<<i) == 0 {
				for _, j := range g {
					row[j] = base[j]
				}
			}
		}
	}
	v32 := make([]float32, n)
	if err := sc.Scores(rows, n, v32); err != nil {
		return nil, 0, 0, err
	}
	// w[k] = k!(G-k-1)!/G!
	w := make([]float64, G)
	for k := range G {
		w[k] = math.Exp(lgamma(k+1) + lgamma(G-k) - lgamma(G+1))
	}
	phi = make([]float64, G)
	for i := range G {
		bit := 1 << i
		var sum float64
		for s := range n {
			if s&bit == 0 {
				sum += w[bits.OnesCount(uint(s))] * (float64(v32[s|bit]) - float64(v32[s]))
			}
		}
		phi[i] = sum
	}
	return phi, float64(v32[n-1]), float64(v32[0]), nil
}

func lgamma(n int) float64 {
	v, _ := math.Lgamma(float64(n))
	return v
}

// explainBaselineNodes bounds the candidates the baseline averages: more
// candidates are sampled evenly in name order (the simulator's node order).
// 64 feature extractions cost tens of microseconds in Reserve.
const explainBaselineNodes = 64

// Input is what Reserve keeps for the explanation in Bind: the
// model that scored the cycle, the chosen node's raw features and raw
// score, and the baseline (the mean raw features of the candidates, or of
// baselineNodes of them). Read-only.
type Input struct {
	Model         *sources.Model
	Node          string
	Row, Base     []float32
	Raw           float32
	Norm          int64 // the node's normalised score
	Candidates    int
	BaselineNodes int
}

// Capture builds the explanation input of nodeName, candidate j of cycle
// ps, from the view ps scored on in core; an error when that view is
// gone. Its Norm is ps's normalised score of the node.
func Capture(core *serving.Core, ps *serving.Cycle, j int, nodeName string) (*Input, error) {
	const F = policy.NumFeatures
	k := len(ps.Cand)
	in := &Input{Model: ps.Model, Node: nodeName, Raw: ps.Raw[j], Candidates: k,
		BaselineNodes: min(k, explainBaselineNodes), Row: make([]float32, F), Base: make([]float32, F)}
	in.Norm, _ = ps.ScoreOf(nodeName)
	ok, err := core.WithCurrent(ps.Epoch, func(v *serving.View) error {
		ext, st := v.Extractor(), v.State()
		ext.BeginPod(st, &ps.Pod)
		ext.Extract(st, &ps.Pod, int(ps.Cand[j]), in.Row)
		x := make([]float32, F)
		sum := make([]float64, F)
		for s := range in.BaselineNodes {
			ext.Extract(st, &ps.Pod, int(ps.Cand[s*k/in.BaselineNodes]), x)
			for f, val := range x {
				sum[f] += float64(val)
			}
		}
		for f := range F {
			in.Base[f] = float32(sum[f] / float64(in.BaselineNodes))
		}
		return nil
	})
	if !ok {
		return nil, errors.New("the cycle's view was rebuilt")
	}
	return in, err
}

// Explain explains in's node: its score against the baseline and the
// feature groups' Shapley values, computed at now; it contains panics.
func Explain(in *Input, now time.Time) (e *kubefmt.Explanation, err error) {
	defer func() {
		if r := recover(); r != nil {
			serving.CountPanic()
			e, err = nil, fmt.Errorf("panic in explanation: %v", r)
		}
	}()
	const F = policy.NumFeatures
	if len(in.Row) != F || len(in.Base) != F {
		return nil, fmt.Errorf("%d and %d feature values, want %d", len(in.Row), len(in.Base), F)
	}
	sc := in.Model.GetScorer()
	phi, full, empty, err := ShapleyGroups(sc, in.Row, in.Base, groupIndices(featureGroups))
	if err != nil {
		return nil, err // a scorer that failed is not returned to the pool
	}
	in.Model.PutScorer(sc)
	e = &kubefmt.Explanation{
		Format: kubefmt.ExplanationFormat, Method: kubefmt.ExplanationMethod,
		ModelID: in.Model.Header.ModelID, ModelVersion: in.Model.Header.Version,
		Node: in.Node, Score: full, Baseline: empty, NormalizedScore: in.Norm,
		Candidates: in.Candidates, BaselineNodes: in.BaselineNodes, ComputedAt: now.UTC().Truncate(time.Second),
	}
	order := make([]int, len(phi))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(math.Abs(phi[b]), math.Abs(phi[a])) })
	for r, i := range order {
		if phi[i] == 0 {
			continue // a dummy (e.g. the pod group): nothing to list
		}
		if r < ExplainTopK {
			e.Groups = append(e.Groups, kubefmt.GroupAttribution{Group: featureGroups[i].Name, Attribution: round6(phi[i])})
		} else {
			e.Rest += phi[i]
		}
	}
	e.Score, e.Baseline, e.Rest = round6(e.Score), round6(e.Baseline), round6(e.Rest)
	return e, nil
}

// round6 keeps the annotation compact (6 significant decimals).
func round6(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	return math.Round(v*1e6) / 1e6
}
