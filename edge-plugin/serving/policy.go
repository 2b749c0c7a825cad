package serving

import (
	"fmt"
	"strings"

	"github.com/edgesched/edgesched/edge-plugin/sources"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policydoc"
	"github.com/edgesched/edgesched/sim"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Scheduling policy (docs/policy-language.md): a policydoc document
// (sources.PolicyRules) evaluated on a cycle's pod: required rules filter
// nodes (Check), preferred rules mix into scores (Score), bounded within
// [0, MaxScore].

// PolicyCycle is one cycle's view for the policy: the document, the pod,
// where every service runs, the hour. Read-only once built.
type PolicyCycle struct {
	doc    *policydoc.Document
	pod    policydoc.Pod
	placed servicePlacement
	hour   int
	topo   *sources.TopoSpec
}

// servicePlacement counts running pods per service, by node and by zone.
type servicePlacement map[policydoc.Scope]map[string]map[string]int

// Count implements policydoc.Placed.
func (s servicePlacement) Count(service string, scope policydoc.Scope) map[string]int {
	return s[scope][service]
}

// zoneOf is a node's zone as the converter names it.
func zoneOf(n *v1.Node) string {
	if z := n.Labels[kubefmt.LabelZone]; z != "" {
		return z
	}
	return "default"
}

// NewPolicyCycle builds a cycle's policy view of pod in the cluster all,
// or returns nil when no rule of the policy in use applies to the pod now.
func (c *Core) NewPolicyCycle(pod *v1.Pod, all []fwk.NodeInfo) *PolicyCycle {
	doc := c.policy.Current()
	if doc == nil {
		return nil
	}
	req, _ := kubefmt.PodGPURequest(pod)
	sp, _, _ := kubefmt.SimPod(pod)
	pc := &PolicyCycle{doc: doc, pod: policydoc.Pod{Service: kubefmt.ServiceOf(pod), GPU: req.GPUs > 0, CPU: sp.CPU, GPUMilli: sp.GPUDemand()}, hour: c.now().UTC().Hour(), topo: c.conv.topo.Current()}
	applies := false
	for i := range doc.Rules {
		if doc.Rules[i].Applies(pc.pod, pc.hour) || doc.Rules[i].Kind == policydoc.Hours && doc.Rules[i].Applies(pc.pod, 0) {
			applies = true
			break
		}
	}
	if !applies {
		return nil
	}
	pc.placed = servicePlacement{policydoc.ScopeNode: {}, policydoc.ScopeZone: {}}
	for _, ni := range all {
		n := ni.Node()
		if n == nil {
			continue
		}
		z := zoneOf(n)
		for _, pi := range ni.GetPods() {
			q := pi.GetPod()
			if q.UID == pod.UID {
				continue
			}
			s := kubefmt.ServiceOf(q)
			if s == "" {
				continue
			}
			for scope, d := range map[policydoc.Scope]string{policydoc.ScopeNode: n.Name, policydoc.ScopeZone: z} {
				m := pc.placed[scope]
				if m[s] == nil {
					m[s] = map[string]int{}
				}
				m[s][d]++
			}
		}
	}
	return pc
}

// node is the policy's view of a node.
func (c *PolicyCycle) node(ni fwk.NodeInfo) *policydoc.Node {
	n := ni.Node()
	spec, _ := kubefmt.SimNode(n)
	v := &policydoc.Node{Name: n.Name, Zone: zoneOf(n), Labels: n.Labels, Arch: spec.Arch.String(), GPUModel: spec.GPUModel,
		CPUAllocatable: spec.CPU, CPURequested: ni.GetRequested().GetMilliCPU()}
	if spec.GPUs == 0 {
		v.GPUModel = ""
	}
	v.WattsPerCore, v.WattsPerGPU = nodeWatts(spec)
	v.Carbon, v.CarbonKnown = c.topo.Carbon(v.Zone, c.hour)
	return v
}

// nodeWatts is a node's power for placed work as the simulator compiles
// it: its power annotations (kubefmt.NodePower), else by architecture
// (sim.DefaultPower), and the GPU model's board power (sim.GPUWatts)
// where no annotation gives a GPU's.
func nodeWatts(spec sim.NodeSpec) (perCore, perGPU float64) {
	pw := sim.DefaultPower(spec.Arch)
	if spec.Power != nil {
		pw = *spec.Power
	}
	if spec.GPUs == 0 {
		return pw.WattsPerCore, 0
	}
	if pw.WattsPerGPU == 0 {
		pw.WattsPerGPU = sim.GPUWatts(spec.GPUModel)
	}
	return pw.WattsPerCore, pw.WattsPerGPU
}

// WithLeastEmissions is the cycle with the pod's least emissions over the
// candidate nodes set, for a preferred carbon rule's relative scale (c
// itself when none applies). Called at PreScore, before any Score.
func (c *PolicyCycle) WithLeastEmissions(nodes []fwk.NodeInfo) *PolicyCycle {
	if c == nil || !c.doc.WantsEmissions(c.pod, c.hour) {
		return c
	}
	cc := *c
	cc.pod.SetLeastEmissions(func(yield func(*policydoc.Node) bool) {
		for _, ni := range nodes {
			if ni.Node() != nil && !yield(c.node(ni)) {
				return
			}
		}
	})
	return &cc
}

// Score mixes the preferred rules into a node's score base, within
// [0, MaxScore].
func (c *PolicyCycle) Score(ni fwk.NodeInfo, base int64) int64 {
	v := c.doc.Evaluate(c.pod, c.node(ni), c.placed, c.hour)
	s := c.doc.Combine(float64(base), v)
	return min(fwk.MaxNodeScore, max(fwk.MinNodeScore, int64(s+0.5)))
}

// Explain is the kubefmt.AnnotationPolicy value for the chosen node (""
// when no rule applies): one line per rule that applies, at most
// kubefmt.MaxPolicyBytes (capLines).
func (c *PolicyCycle) Explain(ni fwk.NodeInfo) string {
	if c == nil || ni == nil || ni.Node() == nil {
		return ""
	}
	n := c.node(ni)
	var lines []string
	for i := range c.doc.Rules {
		r := &c.doc.Rules[i]
		if !r.Applies(c.pod, c.hour) {
			continue
		}
		if r.Effect == policydoc.Required {
			lines = append(lines, fmt.Sprintf("%s: held: %s", r.Name, r.English()))
			continue
		}
		one := policydoc.Document{APIVersion: c.doc.APIVersion, Kind: c.doc.Kind, Rules: []policydoc.Rule{*r}}
		v := one.Evaluate(c.pod, n, c.placed, c.hour)
		lines = append(lines, fmt.Sprintf("%s: %.2f (weight %d): %s", r.Name, v.Score/policydoc.MaxNodeScore, r.Weight, r.English()))
	}
	return capLines(lines, kubefmt.MaxPolicyBytes)
}

// capLines joins lines with newlines in at most limit bytes: when they do
// not all fit, the first ones that do (whole lines) and a last line saying
// how many were left out.
func capLines(lines []string, limit int) string {
	total := max(len(lines)-1, 0) // the newlines
	for _, l := range lines {
		total += len(l)
	}
	if total <= limit {
		return strings.Join(lines, "\n")
	}
	var b strings.Builder
	for i, l := range lines {
		sep := min(b.Len(), 1)
		// line i is kept if the marker for the lines after it still fits
		// after it (the last line never does: they would all fit)
		if b.Len()+sep+len(l)+1+len(leftOut(len(lines)-i-1, limit)) > limit {
			if sep > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(leftOut(len(lines)-i, limit))
			break
		}
		if sep > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
	}
	return b.String()
}

// leftOut is capLines' last line.
func leftOut(n, limit int) string {
	rules := "rules"
	if n == 1 {
		rules = "rule"
	}
	return fmt.Sprintf("... %d more %s left out: the annotation is capped at %d bytes", n, rules, limit)
}

// Check evaluates the required rules on a node: ok, or the rule that
// refuses it and why ("policy rule rule-2 (keep payment and orders in the
// same zone): zone b is not where payment, orders run (a)"), counted in
// policy_filter_rejections_total. A nil cycle or a node without a Node
// passes.
func (c *PolicyCycle) Check(ni fwk.NodeInfo) (ok bool, rule, reason string) {
	if c == nil || ni.Node() == nil {
		return true, "", ""
	}
	v := c.doc.Evaluate(c.pod, c.node(ni), c.placed, c.hour)
	if v.Fits {
		return true, "", ""
	}
	sources.CountPolicyRejection(v.Rule)
	return false, v.Rule, v.Reason
}
