package edgeplugin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"

	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policy"
)

// Explanations: every pod EdgePolicy scored gets the annotation
// AnnotationExplanation at Bind (in the Binding's annotations), saying why the policy liked its node:
// the int8 model's raw score there, the score of a baseline node, and the
// exact Shapley values of the feature groups (FeatureGroups) that split the
// difference between the two.
//
// Game. The players are the G feature groups; the value of a coalition S is
// the int8 scorer's raw output on the chosen node's feature vector with the
// features of the groups outside S replaced by the baseline's. The baseline
// is the mean of the pod's scored candidate nodes' raw feature vectors (of
// explainBaselineNodes of them, evenly spaced in name order, when there are
// more; the annotation says how many: baselineNodes). The features are
// normalised affinely inside the scorer, so this is also the mean after
// normalisation. The explanation therefore answers "why this node rather
// than a typical candidate": pod features are equal on every candidate, so
// the pod group is a dummy player and gets exactly 0, and the attributions
// add up to score(node) - score(mean candidate) (efficiency). Zeros after
// normalisation would instead compare with the training set's average
// decision, which mixes in what the pod is and says less about the choice
// of node.
//
// Cost. Reserve extracts the chosen node's features and the baseline's
// from the cycle's view (PreScore itself keeps no features: most of its
// scores come from the score cache, scorecache.go). All 2^G coalitions
// are then scored in Bind (the binding cycle, off the scheduling path) in
// one batch with a scorer of the model that scored the cycle (the same
// Int8Scorer code, so the attributions explain what ran): 2^7 = 128
// forward passes, tens of microseconds.

// The annotation's format lives in package kubefmt, shared with
// edgectl; these names keep the plugin's API.
const (
	AnnotationExplanation = kubefmt.AnnotationExplanation
	ExplanationFormat     = kubefmt.ExplanationFormat
	ExplanationMethod     = kubefmt.ExplanationMethod
)

// explainTopK is how many groups (largest |attribution| first) the
// annotation lists; the others' sum is Rest.
const explainTopK = 5

// maxExplainGroups bounds the 2^G coalitions of ShapleyGroups.
const maxExplainGroups = 12

// Explanation is the content of AnnotationExplanation.
type Explanation = kubefmt.Explanation

// GroupAttribution is one feature group's Shapley value.
type GroupAttribution = kubefmt.GroupAttribution

// ParseExplanation decodes an AnnotationExplanation value.
func ParseExplanation(s string) (*Explanation, error) { return kubefmt.ParseExplanation(s) }

// FeatureGroup is a named set of features of the schema
// (policy.FeatureList), a player of the explanation's Shapley game.
type FeatureGroup struct {
	Name, Description string
	Features          []string // feature names, schema order
	index             []int
}

// featureGroups partition the 40 features of edgesched.features/v3. They
// follow the schema's own sections, except that its "node attributes and
// load" section is split into architecture, load/failure and carbon (the
// load group holds the telemetry features too), which
// an operator reads as different reasons, and the pod's GPU-model
// constraint and the target workload's mix join the pod group (all of
// them equal on every candidate).
var featureGroups = resolveGroups([]FeatureGroup{
	{Name: "pod", Description: "pod requests, GPU share, QoS, priority, GPU-model constraint and the target workload's mix (equal on every candidate: 0 against the mean candidate)",
		Features: []string{"pod_cpu", "pod_mem", "pod_gpu", "pod_share", "pod_qos_ls", "pod_qos_be", "pod_priority", "pod_gpu_spec", "pod_model_choice", "wl_cpu", "wl_share", "wl_multi", "wl_spec"}},
	{Name: "resources", Description: "the node's free CPU, memory, GPU and whole devices after placement",
		Features: []string{"cpu_free_after", "mem_free_after", "gpu_free_after", "cpu_free_after_abs", "gpu_free_after_abs", "full_gpus_after"}},
	{Name: "gpu-fit", Description: "GPU fit and fragmentation: device leftover, FGD fragmentation change (also against the classes accepting the node's GPU model), CPU pod on a GPU node, CPU/GPU balance",
		Features: []string{"device_leftover", "fgd_delta", "fgd_score", "frag_after", "fgd_fit_delta", "gpu_node_cpu_pod", "balance_after"}},
	{Name: "gpu-model", Description: "the node's GPU model against the target workload: pressure from pods naming models, share of GPU demand it can serve, and only it can serve",
		Features: []string{"model_pressure", "model_accept", "model_exclusive"}},
	{Name: "arch", Description: "the node's CPU architecture (arm64)",
		Features: []string{"arch_arm64"}},
	{Name: "load", Description: "node load as measured (CPU, run-queue latency, memory pressure, TCP retransmits), the pod's share of the node's CPU, node failure rate",
		Features: []string{"load", "pod_cpu_rel", "failure_rate", "cpu_busy", "runq_p99", "mem_pressure", "retrans"}},
	{Name: "carbon", Description: "grid carbon intensity at the node",
		Features: []string{"carbon"}},
	{Name: "dependencies", Description: "co-location with and RTT to the pod's service dependencies (0 without a dependency graph: dependenciesConfigMap)",
		Features: []string{"dep_zone_colocation", "dep_rtt"}},
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

// explainKey is the CycleState key of the explainInput Reserve keeps.
const explainKey fwk.StateKey = Name + "/explain"

// explainInput is what Reserve keeps for the explanation in Bind: the
// model that scored the cycle, the chosen node's raw features and raw
// score, and the baseline (the mean raw features of the candidates, or of
// baselineNodes of them). Read-only.
type explainInput struct {
	model         *Model
	node          string
	row, base     []float32
	raw           float32
	norm          int64 // the node's normalised score
	candidates    int
	baselineNodes int
}

func (e *explainInput) Clone() fwk.StateData { return e }

func readExplain(cs fwk.CycleState) *explainInput {
	if cs == nil {
		return nil
	}
	v, err := cs.Read(explainKey)
	if err != nil {
		return nil
	}
	e, _ := v.(*explainInput)
	return e
}

// explainable reports whether the cycle scored nodeName and Reserve kept
// its explanation input.
func explainable(cs fwk.CycleState, nodeName string) bool {
	in := readExplain(cs)
	return in != nil && in.model != nil && in.node == nodeName
}

// captureExplanation keeps, in CycleState, the chosen node's features and
// the baseline, from the view PreScore scored on (Reserve runs in the same
// scheduling cycle, so that view is still current unless something
// rebuilt it: then there is no explanation). It contains panics.
func (p *EdgePolicy) captureExplanation(ctx context.Context, cs fwk.CycleState, nodeName string) {
	defer func() {
		if r := recover(); r != nil {
			metricPanics.Inc()
			klog.FromContext(ctx).V(4).Info("EdgePolicy: no explanation", "node", nodeName, "panic", r)
		}
	}()
	ps := readPreScore(cs)
	j := ps.candidate(nodeName)
	if j < 0 {
		return
	}
	in, err := p.explainFromView(ps, j, nodeName)
	if err != nil || in == nil {
		klog.FromContext(ctx).V(4).Info("EdgePolicy: no explanation", "node", nodeName, "err", err)
		return
	}
	in.norm, _ = ps.scoreOf(nodeName)
	cs.Write(explainKey, in)
}

// explainFromView builds the explanation input of candidate j from the
// converter's view of epoch ps.epoch; nil when that view is gone.
func (p *EdgePolicy) explainFromView(ps *preScoreState, j int, nodeName string) (*explainInput, error) {
	const F = policy.NumFeatures
	k := len(ps.cand)
	in := &explainInput{model: ps.model, node: nodeName, raw: ps.raw[j], candidates: k,
		baselineNodes: min(k, explainBaselineNodes), row: make([]float32, F), base: make([]float32, F)}
	ok, err := p.conv.withCurrent(ps.epoch, func(v *view) error {
		v.ext.BeginPod(v.st, &ps.pod)
		v.ext.Extract(v.st, &ps.pod, int(ps.cand[j]), in.row)
		x := make([]float32, F)
		sum := make([]float64, F)
		for s := range in.baselineNodes {
			v.ext.Extract(v.st, &ps.pod, int(ps.cand[s*k/in.baselineNodes]), x)
			for f, val := range x {
				sum[f] += float64(val)
			}
		}
		for f := range F {
			in.base[f] = float32(sum[f] / float64(in.baselineNodes))
		}
		return nil
	})
	if !ok {
		return nil, errors.New("the cycle's view was rebuilt")
	}
	return in, err
}

func readPreScore(cs fwk.CycleState) *preScoreState {
	if cs == nil {
		return nil
	}
	v, err := cs.Read(preScoreKey)
	if err != nil {
		return nil
	}
	ps, _ := v.(*preScoreState)
	return ps
}

// explain computes the explanation of the chosen node from the cycle's
// state; it contains panics.
func (p *EdgePolicy) explain(cs fwk.CycleState, nodeName string) (e *Explanation, err error) {
	defer func() {
		if r := recover(); r != nil {
			metricPanics.Inc()
			e, err = nil, fmt.Errorf("panic in explanation: %v", r)
		}
	}()
	in := readExplain(cs)
	if in == nil || in.node != nodeName {
		return nil, fmt.Errorf("node %s was not scored", nodeName)
	}
	return explainRow(in, in.norm, p.now())
}

// explainRow explains in's node.
func explainRow(in *explainInput, normalized int64, now time.Time) (*Explanation, error) {
	const F = policy.NumFeatures
	if len(in.row) != F || len(in.base) != F {
		return nil, fmt.Errorf("%d and %d feature values, want %d", len(in.row), len(in.base), F)
	}
	sc := in.model.getScorer()
	phi, full, empty, err := ShapleyGroups(sc, in.row, in.base, groupIndices(featureGroups))
	if err != nil {
		return nil, err // a scorer that failed is not returned to the pool
	}
	in.model.putScorer(sc)
	e := &Explanation{
		Format: ExplanationFormat, Method: ExplanationMethod,
		ModelID: in.model.Header.ModelID, ModelVersion: in.model.Header.Version,
		Node: in.node, Score: full, Baseline: empty, NormalizedScore: normalized,
		Candidates: in.candidates, BaselineNodes: in.baselineNodes, ComputedAt: now.UTC().Truncate(time.Second),
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
		if r < explainTopK {
			e.Groups = append(e.Groups, GroupAttribution{Group: featureGroups[i].Name, Attribution: round6(phi[i])})
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

// explanationAnnotation returns the annotation value for the pod's node,
// or "" (logged at V(4)) when there is none: explanations never fail or
// delay a binding beyond their bounded computation.
func (p *EdgePolicy) explanationAnnotation(ctx context.Context, cs fwk.CycleState, nodeName string) string {
	if !explainable(cs, nodeName) {
		return ""
	}
	e, err := p.explain(cs, nodeName)
	if err == nil && (math.IsNaN(e.Score) || math.IsInf(e.Score, 0) || math.IsNaN(e.Baseline) || math.IsInf(e.Baseline, 0)) {
		err = errors.New("non-finite score") // JSON cannot carry it
	}
	var b []byte
	if err == nil {
		b, err = json.Marshal(e)
	}
	if err != nil {
		klog.FromContext(ctx).V(4).Info("EdgePolicy: no explanation", "node", nodeName, "err", err)
		return ""
	}
	return string(b)
}
