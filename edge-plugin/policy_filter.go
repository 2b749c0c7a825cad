package edgeplugin

import (
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/edgesched/edgesched/edge-plugin/serving"
	"github.com/edgesched/edgesched/kubefmt"
)

// Scheduling policy (docs/policy-language.md): with policyConfigMap set,
// the plugin watches that ConfigMap (sources.StartPolicy) for a policydoc
// document. Its required rules are checked in Filter (a refused node's
// status names the rule and says why: the FailedScheduling event carries
// it), its preferred rules are mixed into Score (serving.PolicyCycle).

// AnnotationPolicy is written at Bind on pods a policy rule applied to: one
// line per rule, "NAME: held" for a required rule, "NAME: 0.75 (weight
// 50)" for a preferred rule's satisfaction on the chosen node, each with
// its canonical sentence, so the placement's explanation names the rules;
// at most kubefmt.MaxPolicyBytes, cut at a line (serving.PolicyCycle.Explain).
const AnnotationPolicy = kubefmt.AnnotationPolicy

// policyKey is the CycleState key of a cycle's policy state.
const policyKey fwk.StateKey = "Policy" + Name

// policyState is the cycle's policy view in CycleState; read-only.
type policyState struct {
	*serving.PolicyCycle
}

func (s *policyState) Clone() fwk.StateData { return s }

// policyPreFilter writes the cycle's policy state; it reports whether a
// rule applies to the pod (so Filter must run even without a GPU request).
func (p *EdgePolicy) policyPreFilter(cs fwk.CycleState, pod *v1.Pod) *serving.PolicyCycle {
	if p.core.Policy().Current() == nil {
		return nil
	}
	c := p.core.NewPolicyCycle(pod, p.PolicyNodes())
	if c == nil {
		return nil
	}
	cs.Write(policyKey, &policyState{c})
	return c
}

// PolicyNodes lists every node with its pods: the scheduler's snapshot, or
// the extender's cluster source.
func (p *EdgePolicy) PolicyNodes() []fwk.NodeInfo {
	if p.handle != nil && p.handle.SnapshotSharedLister() != nil {
		if all, err := p.handle.SnapshotSharedLister().NodeInfos().List(); err == nil {
			return all
		}
	}
	if p.policyLister != nil {
		return p.policyLister()
	}
	return nil
}

func readPolicyCycle(cs fwk.CycleState) *serving.PolicyCycle {
	if cs == nil {
		return nil
	}
	v, err := cs.Read(policyKey)
	if err != nil {
		return nil
	}
	return v.(*policyState).PolicyCycle
}

// policyFilter checks the required rules on a node; nil when it passes.
// The status message names the rule: "policy rule rule-2 (keep payment
// and orders in the same zone): zone b is not where payment, orders run (a)".
func policyFilter(c *serving.PolicyCycle, ni fwk.NodeInfo) *fwk.Status {
	if ok, _, reason := c.Check(ni); !ok {
		return fwk.NewStatus(fwk.Unschedulable, reason)
	}
	return nil
}

// policyScore mixes the preferred rules into a node's score.
func policyScore(cs fwk.CycleState, ni fwk.NodeInfo, base int64) int64 {
	c := readPolicyCycle(cs)
	if c == nil || ni.Node() == nil {
		return base
	}
	return c.Score(ni, base)
}

// policyPreScore sets the cycle's least emissions over the filtered nodes.
func policyPreScore(cs fwk.CycleState, nodes []fwk.NodeInfo) {
	if c := readPolicyCycle(cs); c != nil {
		cs.Write(policyKey, &policyState{c.WithLeastEmissions(nodes)})
	}
}

// policyAnnKey is the CycleState key of the AnnotationPolicy value Reserve
// computes for Bind.
const policyAnnKey fwk.StateKey = "PolicyAnnotation" + Name

// policyAnnState is the AnnotationPolicy value for node; read-only.
type policyAnnState struct{ node, value string }

func (s *policyAnnState) Clone() fwk.StateData { return s }

// capturePolicyAnnotation keeps the AnnotationPolicy value of the cycle's
// pod on nodeName in CycleState (Reserve): it reads the scheduler's
// snapshot, which the framework allows in the scheduling cycle only. Bind
// runs in the binding cycle, alongside the next pod's scheduling cycle,
// which rewrites the snapshot's NodeInfos in place.
func (p *EdgePolicy) capturePolicyAnnotation(cs fwk.CycleState, nodeName string) {
	if e := p.policyAnnotation(cs, nodeName); e != "" {
		cs.Write(policyAnnKey, &policyAnnState{node: nodeName, value: e})
	}
}

// reservedPolicyAnnotation is the value capturePolicyAnnotation kept for
// nodeName ("" without one).
func reservedPolicyAnnotation(cs fwk.CycleState, nodeName string) string {
	if cs == nil {
		return ""
	}
	v, err := cs.Read(policyAnnKey)
	if err != nil {
		return ""
	}
	if s, _ := v.(*policyAnnState); s != nil && s.node == nodeName {
		return s.value
	}
	return ""
}

// policyAnnotation is the AnnotationPolicy value of a cycle's pod on
// nodeName ("" without a policy cycle), from the scheduler's snapshot:
// call it in the scheduling cycle only (capturePolicyAnnotation).
func (p *EdgePolicy) policyAnnotation(cs fwk.CycleState, nodeName string) string {
	c := readPolicyCycle(cs)
	if c == nil || p.handle == nil || p.handle.SnapshotSharedLister() == nil {
		return ""
	}
	ni, err := p.handle.SnapshotSharedLister().NodeInfos().Get(nodeName)
	if err != nil {
		return ""
	}
	return c.Explain(ni)
}
