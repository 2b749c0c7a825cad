package edgeplugin

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policydoc"
	"github.com/edgesched/edgesched/sim"
)

// Scheduling policy (docs/policy-language.md): with policyConfigMap set,
// the plugin watches that ConfigMap (configMapFeed, as the dependency graph
// and the topology) for a policydoc document under policydoc.ConfigMapKey.
// Its required rules are checked in Filter (a refused node's status names
// the rule and says why: the FailedScheduling event carries it), its
// preferred rules are mixed into Score by policydoc.Document.Combine
// (bounded: scores stay in [0, MaxNodeScore]). A document that does not
// decode is refused (counted, logged) and the last good one stays; a
// deleted ConfigMap or key clears the policy.

var (
	metricPolicyRules = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "policy_rules",
		Help:           "Rules of the scheduling policy in use (0 without one).",
		StabilityLevel: metrics.ALPHA,
	})
	metricPolicyUpdates   = newFeedUpdates("policy_updates_total", "Scheduling policy")
	metricPolicyRejection = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "policy_filter_rejections_total",
		Help:           "Nodes refused by a required rule of the scheduling policy, by rule.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"rule"})
	metricPolicyBindRefusals = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      "edgesched_extender",
		Name:           "policy_bind_refusals_total",
		Help:           "Bindings the extender's bind verb refused because a required rule of the scheduling policy no longer held on the chosen node (a concurrent binding came first; the scheduler retries the pod).",
		StabilityLevel: metrics.ALPHA,
	})
	policyMetricsRegistered atomic.Bool
)

// policyRules holds the policy in use. Safe for concurrent use; install
// and clear are called one at a time (configMapFeed).
type policyRules struct {
	cur atomic.Pointer[policyInUse] // nil: none
}

type policyInUse struct {
	doc *policydoc.Document
	raw []byte
}

var _ feedTarget = (*policyRules)(nil)

// current is the document in use (nil: none).
func (r *policyRules) current() *policydoc.Document {
	if r == nil {
		return nil
	}
	if c := r.cur.Load(); c != nil {
		return c.doc
	}
	return nil
}

// install implements feedTarget.
func (r *policyRules) install(raw []byte) (bool, error) {
	d, err := policydoc.Decode(raw)
	if err != nil {
		return false, err
	}
	if c := r.cur.Load(); c != nil && bytes.Equal(c.raw, raw) {
		return false, nil
	}
	r.cur.Store(&policyInUse{doc: d, raw: bytes.Clone(raw)})
	metricPolicyRules.Set(float64(len(d.Rules)))
	return true, nil
}

// set installs a document directly (tests, and a file in a later version).
func (r *policyRules) set(d *policydoc.Document) {
	if d == nil {
		r.cur.Store(nil)
		return
	}
	r.cur.Store(&policyInUse{doc: d})
}

// clear implements feedTarget.
func (r *policyRules) clear() bool {
	metricPolicyRules.Set(0)
	return r.cur.Swap(nil) != nil
}

// inUse implements feedTarget.
func (r *policyRules) inUse() []any {
	d := r.current()
	if d == nil {
		return []any{"rules", 0}
	}
	return []any{"rules", len(d.Rules)}
}

// startPolicySource watches namespace/name's policy into rules until ctx
// ends (configMapFeed.start).
func startPolicySource(ctx context.Context, client kubernetes.Interface, rules *policyRules, namespace, name string) (*configMapFeed, func()) {
	registerPolicyMetrics()
	f := &configMapFeed{what: "Scheduling policy", without: "no policy rules apply", key: policydoc.ConfigMapKey,
		target: rules, updates: metricPolicyUpdates, namespace: namespace, name: name,
		logger: klog.FromContext(ctx).WithValues("plugin", Name, "policy", namespace+"/"+name)}
	return f, f.start(ctx, client)
}

func registerPolicyMetrics() {
	if policyMetricsRegistered.CompareAndSwap(false, true) {
		for _, m := range []metrics.Registerable{metricPolicyRules, metricPolicyUpdates, metricPolicyRejection, metricPolicyBindRefusals} {
			_ = legacyregistry.Register(m)
		}
	}
}

// policyKey is the CycleState key of a cycle's policy state.
const policyKey fwk.StateKey = "Policy" + Name

// policyCycle is one cycle's view for the policy: the document, the pod,
// where every service runs, the hour. Read-only once built.
type policyCycle struct {
	doc    *policydoc.Document
	pod    policydoc.Pod
	placed servicePlacement
	hour   int
	topo   *topoSpec
}

func (s *policyCycle) Clone() fwk.StateData { return s }

// servicePlacement counts running pods per service, by node and by zone.
type servicePlacement map[policydoc.Scope]map[string]map[string]int

// Count implements policydoc.Placed.
func (s servicePlacement) Count(service string, scope policydoc.Scope) map[string]int {
	return s[scope][service]
}

// zoneOf is a node's zone as the converter names it.
func zoneOf(n *v1.Node) string {
	if z := n.Labels[LabelZone]; z != "" {
		return z
	}
	return "default"
}

// newPolicyCycle builds the cycle's policy view, or returns nil when no
// rule of the policy in use applies to the pod now.
func (p *EdgePolicy) newPolicyCycle(pod *v1.Pod, all []fwk.NodeInfo) *policyCycle {
	doc := p.policy.current()
	if doc == nil {
		return nil
	}
	req, _ := podGPURequest(pod)
	sp, _ := simPod(pod)
	c := &policyCycle{doc: doc, pod: policydoc.Pod{Service: kubefmt.ServiceOf(pod), GPU: req.GPUs > 0, CPU: sp.CPU, GPUMilli: sp.GPUDemand()}, hour: p.now().UTC().Hour(), topo: p.conv.topo.current()}
	applies := false
	for i := range doc.Rules {
		if doc.Rules[i].Applies(c.pod, c.hour) || doc.Rules[i].Kind == policydoc.Hours && doc.Rules[i].Applies(c.pod, 0) {
			applies = true
			break
		}
	}
	if !applies {
		return nil
	}
	c.placed = servicePlacement{policydoc.ScopeNode: {}, policydoc.ScopeZone: {}}
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
				m := c.placed[scope]
				if m[s] == nil {
					m[s] = map[string]int{}
				}
				m[s][d]++
			}
		}
	}
	return c
}

// node is the policy's view of a node.
func (c *policyCycle) node(ni fwk.NodeInfo) *policydoc.Node {
	n := ni.Node()
	spec, _ := kubefmt.SimNode(n)
	v := &policydoc.Node{Name: n.Name, Zone: zoneOf(n), Labels: n.Labels, Arch: spec.Arch.String(), GPUModel: spec.GPUModel,
		CPUAllocatable: spec.CPU, CPURequested: ni.GetRequested().GetMilliCPU()}
	if spec.GPUs == 0 {
		v.GPUModel = ""
	}
	v.WattsPerCore, v.WattsPerGPU = nodeWatts(spec)
	if c.topo != nil {
		if cz, ok := c.topo.zones[v.Zone]; ok && cz != "" {
			for _, z := range c.topo.carbon {
				if z.Name == cz && len(z.Curve) > 0 {
					v.Carbon, v.CarbonKnown = z.Curve[c.hour%len(z.Curve)], true
				}
			}
		}
	}
	return v
}

// nodeWatts is a node's power for placed work as the simulator assumes it
// without a figure: by architecture (sim.DefaultPower), and the GPU
// model's board power (sim.GPUWatts).
func nodeWatts(spec sim.NodeSpec) (perCore, perGPU float64) {
	perCore = sim.DefaultPower(spec.Arch).WattsPerCore
	if spec.GPUs == 0 {
		return perCore, 0
	}
	return perCore, sim.GPUWatts(spec.GPUModel)
}

// policyPreFilter writes the cycle's policy state; it reports whether a
// rule applies to the pod (so Filter must run even without a GPU request).
func (p *EdgePolicy) policyPreFilter(cs fwk.CycleState, pod *v1.Pod) *policyCycle {
	if p.policy.current() == nil {
		return nil
	}
	c := p.newPolicyCycle(pod, p.policyNodes())
	if c == nil {
		return nil
	}
	cs.Write(policyKey, c)
	return c
}

// policyNodes lists every node with its pods: the scheduler's snapshot, or
// the extender's cluster source.
func (p *EdgePolicy) policyNodes() []fwk.NodeInfo {
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

func readPolicyCycle(cs fwk.CycleState) *policyCycle {
	if cs == nil {
		return nil
	}
	v, err := cs.Read(policyKey)
	if err != nil {
		return nil
	}
	return v.(*policyCycle)
}

// policyFilter checks the required rules on a node; nil when it passes.
// The status message names the rule: "policy rule rule-2 (keep payment
// and orders in the same zone): zone b is not where payment, orders run (a)".
func (p *EdgePolicy) policyFilter(c *policyCycle, ni fwk.NodeInfo) *fwk.Status {
	if c == nil || ni.Node() == nil {
		return nil
	}
	v := c.doc.Evaluate(c.pod, c.node(ni), c.placed, c.hour)
	if v.Fits {
		return nil
	}
	metricPolicyRejection.WithLabelValues(v.Rule).Inc()
	return fwk.NewStatus(fwk.Unschedulable, v.Reason)
}

// policyScore mixes the preferred rules into a node's score.
func (p *EdgePolicy) policyScore(cs fwk.CycleState, ni fwk.NodeInfo, base int64) int64 {
	c := readPolicyCycle(cs)
	if c == nil || ni.Node() == nil {
		return base
	}
	return c.score(ni, base)
}

// withLeastEmissions is the cycle with the pod's least emissions over the
// candidate nodes set, for a preferred carbon rule's relative scale (c
// itself when none applies). Called at PreScore, before any Score.
func (c *policyCycle) withLeastEmissions(nodes []fwk.NodeInfo) *policyCycle {
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

// policyPreScore sets the cycle's least emissions over the filtered nodes.
func policyPreScore(cs fwk.CycleState, nodes []fwk.NodeInfo) {
	if c := readPolicyCycle(cs); c != nil {
		cs.Write(policyKey, c.withLeastEmissions(nodes))
	}
}

func (c *policyCycle) score(ni fwk.NodeInfo, base int64) int64 {
	v := c.doc.Evaluate(c.pod, c.node(ni), c.placed, c.hour)
	s := c.doc.Combine(float64(base), v)
	return min(fwk.MaxNodeScore, max(fwk.MinNodeScore, int64(s+0.5)))
}

// policyScores mixes the policy's preferred rules into the extender's
// scores of the feasible nodes (in place).
func (e *Extender) policyScores(pod *v1.Pod, feasible []*v1.Node, scores map[string]int64) {
	if e.p.policy.current() == nil {
		return
	}
	c := e.p.newPolicyCycle(pod, e.p.policyNodes())
	if c == nil {
		return
	}
	infos := e.infos(feasible, pod.UID)
	c = c.withLeastEmissions(infos)
	for i, ni := range infos {
		scores[feasible[i].Name] = c.score(ni, scores[feasible[i].Name])
	}
}

// AnnotationPolicy is written at Bind on pods a policy rule applied to: one
// line per rule, "NAME: held" for a required rule, "NAME: 0.75 (weight
// 50)" for a preferred rule's satisfaction on the chosen node, each with
// its canonical sentence, so the placement's explanation names the rules.
const AnnotationPolicy = "edgesched.io/policy"

// explain is the AnnotationPolicy value for the chosen node ("" when no
// rule applies).
func (c *policyCycle) explain(ni fwk.NodeInfo) string {
	if c == nil || ni == nil || ni.Node() == nil {
		return ""
	}
	n := c.node(ni)
	var b strings.Builder
	for i := range c.doc.Rules {
		r := &c.doc.Rules[i]
		if !r.Applies(c.pod, c.hour) {
			continue
		}
		if r.Effect == policydoc.Required {
			fmt.Fprintf(&b, "%s: held: %s\n", r.Name, r.English())
			continue
		}
		one := policydoc.Document{APIVersion: c.doc.APIVersion, Kind: c.doc.Kind, Rules: []policydoc.Rule{*r}}
		v := one.Evaluate(c.pod, n, c.placed, c.hour)
		fmt.Fprintf(&b, "%s: %.2f (weight %d): %s\n", r.Name, v.Score/policydoc.MaxNodeScore, r.Weight, r.English())
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// policyAnnotation is the AnnotationPolicy value of a cycle's pod on
// nodeName ("" without a policy cycle).
func (p *EdgePolicy) policyAnnotation(cs fwk.CycleState, nodeName string) string {
	c := readPolicyCycle(cs)
	if c == nil || p.handle == nil || p.handle.SnapshotSharedLister() == nil {
		return ""
	}
	ni, err := p.handle.SnapshotSharedLister().NodeInfos().Get(nodeName)
	if err != nil {
		return ""
	}
	return c.explain(ni)
}

// policyBind checks the policy's required rules for pod on node at the
// bind verb (called with bindMu held: bindings are checked one at a time,
// the pods bound before assumed). It returns why the binding is refused
// ("" when every rule holds, or no rule applies) and, when it is not, the
// AnnotationPolicy value for the binding.
func (e *Extender) policyBind(pod *v1.Pod, node string) (refusal, explain string) {
	if e.p.policy.current() == nil {
		return "", ""
	}
	if !e.src.Synced() {
		return "cluster cache not synced yet (the policy's placements unknown)", ""
	}
	all := e.p.policyNodes()
	c := e.p.newPolicyCycle(pod, all)
	if c == nil {
		return "", ""
	}
	i := slices.IndexFunc(all, func(ni fwk.NodeInfo) bool { return ni.Node() != nil && ni.Node().Name == node })
	if i < 0 {
		return fmt.Sprintf("node %s is not in the extender's cache yet (the policy cannot be checked)", node), ""
	}
	v := c.doc.Evaluate(c.pod, c.node(all[i]), c.placed, c.hour)
	if !v.Fits {
		metricPolicyRejection.WithLabelValues(v.Rule).Inc()
		metricPolicyBindRefusals.Inc()
		return v.Reason, ""
	}
	return "", c.explain(all[i])
}
