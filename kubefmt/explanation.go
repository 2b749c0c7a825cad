// The explanation annotation: the pod annotation in which EdgePolicy
// explains a placement, one definition for the plugin that writes it and
// for `edgectl explain`, which reads it without linking kube-scheduler.
// Values are plain data, safe to share once built.

package kubefmt

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// AnnotationExplanation is the pod annotation: compact JSON of an
// Explanation.
const AnnotationExplanation = "edgesched.io/explanation"

// AnnotationPolicy is written at Bind on pods a scheduling policy rule
// applied to: one line per rule, "NAME: held: SENTENCE" for a required
// rule, "NAME: 0.75 (weight 50): SENTENCE" for a preferred rule's
// satisfaction on the chosen node, so the placement's explanation names
// the rules.
const AnnotationPolicy = "edgesched.io/policy"

// MaxPolicyBytes caps the AnnotationPolicy value EdgePolicy writes. A
// policy may hold 256 rules (policydoc.MaxRules) and a rule's sentence
// runs to kilobytes (64 names a list), while Kubernetes allows 256 KiB for
// all of a pod's annotations together: a pod over that fails validation
// on every later update, the kubelet's status included. A longer value
// is cut after the last whole line that fits, and its last line says how
// many rules were left out ("... 12 more rules left out: ..."); with
// MaxExplanationBytes the two annotations take at most 32 KiB.
const MaxPolicyBytes = 16 << 10

// ExplanationFormat is the version of the annotation's JSON (field "v").
const ExplanationFormat = 1

// ExplanationMethod names how EdgePolicy computes the attributions (field
// "method"): exact Shapley values of feature groups against the mean candidate.
const ExplanationMethod = "shapley-groups/mean-candidate"

// MaxExplanationBytes caps an annotation value ParseExplanation reads.
// EdgePolicy writes well under 1.5 KiB (a node name of up to 253
// bytes, a 64-hex model ID, at most edge-plugin/explain.ExplainTopK
// groups; TestMaxExplanationBytes encodes a larger one still under a
// tenth of the cap), and Kubernetes allows 256 KiB for all of a pod's
// annotations together: a longer value was not written by EdgePolicy and
// is refused before it is decoded.
const MaxExplanationBytes = 16 << 10

// ErrExplanation wraps every refusal of ParseExplanation.
var ErrExplanation = errors.New("kubefmt: malformed explanation annotation")

// Explanation is the content of the annotation.
type Explanation struct {
	Format       int    `json:"v"`
	Method       string `json:"method"`
	ModelID      string `json:"modelID"`
	ModelVersion uint64 `json:"modelVersion"`
	Node         string `json:"node"`
	// Score is the int8 model's raw score of the node, Baseline the score
	// of the mean candidate; NormalizedScore is what EdgePolicy's Score
	// returned for the node (0..100).
	Score           float64 `json:"score"`
	Baseline        float64 `json:"baseline"`
	NormalizedScore int64   `json:"normalizedScore"`
	// Candidates is the number of nodes scored; BaselineNodes how many of
	// them the baseline averages (all of them up to 64; 0 in annotations
	// written before the field existed means all).
	Candidates    int `json:"candidates"`
	BaselineNodes int `json:"baselineNodes,omitempty"`
	// Groups are the groups of largest |attribution|, largest first,
	// leaving out groups with exactly 0 (dummies such as the pod group);
	// Rest is the sum of the others' attributions, so that
	// Baseline + sum(Groups) + Rest = Score (up to rounding).
	Groups     []GroupAttribution `json:"groups"`
	Rest       float64            `json:"rest"`
	ComputedAt time.Time          `json:"computedAt"`
}

// GroupAttribution is one feature group's Shapley value.
type GroupAttribution struct {
	Group       string  `json:"group"`
	Attribution float64 `json:"attribution"`
}

// ParseExplanation decodes an annotation value: JSON of ExplanationFormat
// naming a node, at most MaxExplanationBytes long.
func ParseExplanation(s string) (*Explanation, error) {
	if len(s) > MaxExplanationBytes {
		return nil, fmt.Errorf("%w %s: %d bytes (limit %d)", ErrExplanation, AnnotationExplanation, len(s), MaxExplanationBytes)
	}
	var e Explanation
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrExplanation, AnnotationExplanation, err)
	}
	if e.Format != ExplanationFormat {
		return nil, fmt.Errorf("%w %s: format %d; this build reads format %d", ErrExplanation, AnnotationExplanation, e.Format, ExplanationFormat)
	}
	if e.Node == "" {
		return nil, fmt.Errorf("%w %s: no node", ErrExplanation, AnnotationExplanation)
	}
	return &e, nil
}
