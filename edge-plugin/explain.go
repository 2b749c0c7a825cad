package edgeplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/edgesched/edgesched/edge-plugin/explain"
	"github.com/edgesched/edgesched/edge-plugin/serving"
	"github.com/edgesched/edgesched/kubefmt"
)

// The annotation's format lives in package kubefmt, shared with
// edgectl; these names keep the plugin's API.
const (
	AnnotationExplanation = kubefmt.AnnotationExplanation
	ExplanationFormat     = kubefmt.ExplanationFormat
	ExplanationMethod     = kubefmt.ExplanationMethod
)

// Explanation is the content of AnnotationExplanation.
type Explanation = kubefmt.Explanation

// GroupAttribution is one feature group's Shapley value.
type GroupAttribution = kubefmt.GroupAttribution

// ParseExplanation decodes an AnnotationExplanation value.
func ParseExplanation(s string) (*Explanation, error) { return kubefmt.ParseExplanation(s) }

// explainKey is the CycleState key of the explanation input Reserve
// keeps.
const explainKey fwk.StateKey = Name + "/explain"

// explainState is the explanation input (explain.Input) in
// CycleState; read-only.
type explainState struct {
	*explain.Input
}

func (e *explainState) Clone() fwk.StateData { return e }

func readExplain(cs fwk.CycleState) *explain.Input {
	if cs == nil {
		return nil
	}
	v, err := cs.Read(explainKey)
	if err != nil {
		return nil
	}
	e, _ := v.(*explainState)
	if e == nil {
		return nil
	}
	return e.Input
}

// explainable reports whether the cycle scored nodeName and Reserve kept
// its explanation input.
func explainable(cs fwk.CycleState, nodeName string) bool {
	in := readExplain(cs)
	return in != nil && in.Model != nil && in.Node == nodeName
}

// captureExplanation keeps, in CycleState, the chosen node's features and
// the baseline, from the view PreScore scored on (Reserve runs in the same
// scheduling cycle, so that view is still current unless something
// rebuilt it: then there is no explanation). It contains panics.
func (p *EdgePolicy) captureExplanation(ctx context.Context, cs fwk.CycleState, nodeName string) {
	defer func() {
		if r := recover(); r != nil {
			serving.CountPanic()
			klog.FromContext(ctx).V(4).Info("EdgePolicy: no explanation", "node", nodeName, "panic", r)
		}
	}()
	ps := readPreScore(cs)
	if ps == nil {
		return
	}
	j := ps.Candidate(nodeName)
	if j < 0 {
		return
	}
	in, err := explain.Capture(p.core, &ps.Cycle, j, nodeName)
	if err != nil || in == nil {
		klog.FromContext(ctx).V(4).Info("EdgePolicy: no explanation", "node", nodeName, "err", err)
		return
	}
	cs.Write(explainKey, &explainState{in})
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
func (p *EdgePolicy) explain(cs fwk.CycleState, nodeName string) (*Explanation, error) {
	in := readExplain(cs)
	if in == nil || in.Node != nodeName {
		return nil, fmt.Errorf("node %s was not scored", nodeName)
	}
	return explain.Explain(in, p.core.Now())
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
