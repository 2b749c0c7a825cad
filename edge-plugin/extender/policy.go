package extender

import (
	"fmt"
	"slices"
	"sync"

	"github.com/edgesched/edgesched/edge-plugin/sources"
	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	fwk "k8s.io/kube-scheduler/framework"
)

var metricPolicyBindRefusals = metrics.NewCounter(&metrics.CounterOpts{
	Subsystem:      "edgesched_extender",
	Name:           "policy_bind_refusals_total",
	Help:           "Bindings the extender's bind verb refused because a required rule of the scheduling policy no longer held on the chosen node (a concurrent binding came first; the scheduler retries the pod).",
	StabilityLevel: metrics.ALPHA,
})

// registerPolicyMetrics registers the policy's metrics, the extender's
// included (once each; they are left out of the registry until a policy
// is watched).
func registerPolicyMetrics() {
	sources.RegisterPolicyMetrics()
	registerBindRefusals.Do(func() { legacyregistry.MustRegister(metricPolicyBindRefusals) })
}

var registerBindRefusals sync.Once

// policyScores mixes the policy's preferred rules into the extender's
// scores of the feasible nodes (in place).
func (e *Extender) policyScores(pod *v1.Pod, feasible []*v1.Node, scores map[string]int64) {
	core := e.p.Core()
	if core.Policy().Current() == nil {
		return
	}
	c := core.NewPolicyCycle(pod, e.p.PolicyNodes())
	if c == nil {
		return
	}
	infos := e.infos(feasible, pod.UID)
	c = c.WithLeastEmissions(infos)
	for i, ni := range infos {
		scores[feasible[i].Name] = c.Score(ni, scores[feasible[i].Name])
	}
}

// policyBind checks the policy's required rules for pod on node at the
// bind verb (called with bindMu held: bindings are checked one at a time,
// the pods bound before assumed). It returns why the binding is refused
// ("" when every rule holds, or no rule applies) and, when it is not, the
// kubefmt.AnnotationPolicy value for the binding.
func (e *Extender) policyBind(pod *v1.Pod, node string) (refusal, explain string) {
	core := e.p.Core()
	if core.Policy().Current() == nil {
		return "", ""
	}
	if !e.src.Synced() {
		return "cluster cache not synced yet (the policy's placements unknown)", ""
	}
	all := e.p.PolicyNodes()
	c := core.NewPolicyCycle(pod, all)
	if c == nil {
		return "", ""
	}
	i := slices.IndexFunc(all, func(ni fwk.NodeInfo) bool { return ni.Node() != nil && ni.Node().Name == node })
	if i < 0 {
		return fmt.Sprintf("node %s is not in the extender's cache yet (the policy cannot be checked)", node), ""
	}
	if ok, _, reason := c.Check(all[i]); !ok {
		metricPolicyBindRefusals.Inc()
		return reason, ""
	}
	return "", c.Explain(all[i])
}
