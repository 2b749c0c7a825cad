package constraint

import (
	"math"
	"math/rand/v2"

	"github.com/edgesched/edgesched/policydoc"
	"github.com/edgesched/edgesched/sim"
)

// Policy is a sim.Policy with a policy document applied.
type Policy struct {
	base  sim.Policy
	doc   *policydoc.Document
	nodes []policydoc.Node
	// per-decision cache
	key     decisionKey
	placed  placed
	pod     policydoc.Pod
	applies bool
	// Blocked counts, per required rule, decisions where the rule refused
	// every node the resources allowed (the pod could not be placed then).
	Blocked map[string]int
	// BlockedPods counts distinct pods that were blocked at least once.
	BlockedPods map[int32]bool
	pending     map[string]bool
	scored      bool
}

var (
	_ sim.Policy     = (*Policy)(nil)
	_ sim.NodeFilter = (*Policy)(nil)
	_ sim.Starter    = (*Policy)(nil)
	_ sim.GPUPicker  = (*Policy)(nil)
)

type decisionKey struct {
	pod int32
	svc uint64
	now int64
}

// Wrap applies doc to base.
func Wrap(base sim.Policy, doc *policydoc.Document) *Policy {
	return &Policy{base: base, doc: doc, Blocked: map[string]int{}, BlockedPods: map[int32]bool{}, key: decisionKey{pod: -1}}
}

// Name is the base policy's name with "+policy".
func (p *Policy) Name() string { return p.base.Name() + "+policy" }

// Start builds the node views and starts the base policy.
func (p *Policy) Start(st *sim.State, rng *rand.Rand) error {
	env := st.Env
	p.nodes = make([]policydoc.Node, len(env.Nodes))
	for i, n := range env.Nodes {
		v := policydoc.Node{Name: n.Name, Zone: env.Zones[n.Zone], Labels: n.Labels, CPUAllocatable: n.CPU,
			WattsPerCore: n.WattsPerCore, WattsPerGPU: n.WattsPerGPU}
		switch n.Arch {
		case sim.ArchAMD64:
			v.Arch = "amd64"
		case sim.ArchARM64:
			v.Arch = "arm64"
		}
		if n.Model >= 0 && n.GPUs > 0 {
			v.GPUModel = env.Models[n.Model].Name
		}
		p.nodes[i] = v
	}
	p.placed = placed{env: env}
	if s, ok := p.base.(sim.Starter); ok {
		return s.Start(st, rng)
	}
	return nil
}

// hour is the simulated hour of day.
func hour(st *sim.State) int {
	if st.Now < 0 {
		return 0
	}
	return int(st.Now/3600) % 24
}

// begin prepares a decision for pod.
func (p *Policy) begin(st *sim.State, pod *sim.Pod) {
	k := decisionKey{pod.ID, st.ServiceVersion, st.Now}
	if k == p.key {
		return
	}
	p.finish()
	p.key = k
	p.pending, p.scored = map[string]bool{}, false
	svc := ""
	if pod.Service >= 0 {
		svc = st.Env.Services[pod.Service]
	}
	p.pod = policydoc.Pod{Service: svc, GPU: pod.GPUs > 0, CPU: pod.CPU, GPUMilli: pod.GPUDemand()}
	p.placed.fill(st)
	h := hour(st)
	p.applies = false
	for i := range p.doc.Rules {
		if p.doc.Rules[i].Applies(p.pod, h) {
			p.applies = true
			break
		}
	}
}

// finish books the previous decision: when it was never scored, every node
// the resources allowed was refused by a rule.
func (p *Policy) finish() {
	if p.key.pod >= 0 && !p.scored && len(p.pending) > 0 {
		for r := range p.pending {
			p.Blocked[r]++
		}
		p.BlockedPods[p.key.pod] = true
	}
	p.pending = nil
}

// Flush books the last decision; call it after the run.
func (p *Policy) Flush() { p.finish(); p.key = decisionKey{pod: -1} }

func (p *Policy) view(st *sim.State, n int) *policydoc.Node {
	v := &p.nodes[n]
	nd := &st.Nodes[n]
	v.CPURequested = nd.CPU - nd.CPUFree
	cz := st.Env.Nodes[n].CarbonZone
	v.Carbon, v.CarbonKnown = st.Env.CarbonAt(cz, st.Now), true
	return v
}

// Admit checks the required rules.
func (p *Policy) Admit(st *sim.State, pod *sim.Pod, n int) bool {
	p.begin(st, pod)
	if !p.applies {
		return true
	}
	v := p.doc.Evaluate(p.pod, p.view(st, n), &p.placed, hour(st))
	if !v.Fits {
		p.pending[v.Rule] = true
	}
	return v.Fits
}

// Score scores with the base policy and mixes in the preferred rules.
func (p *Policy) Score(st *sim.State, pod *sim.Pod, nodes []int32, scores []float64) {
	p.begin(st, pod)
	p.scored = true
	p.base.Score(st, pod, nodes, scores)
	if !p.applies {
		return
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range scores {
		if !math.IsNaN(s) && !math.IsInf(s, 0) {
			lo, hi = math.Min(lo, s), math.Max(hi, s)
		}
	}
	h := hour(st)
	p.pod.LeastEmissions = 0
	if p.doc.WantsEmissions(p.pod, h) {
		p.pod.SetLeastEmissions(func(yield func(*policydoc.Node) bool) {
			for _, n := range nodes {
				if !yield(p.view(st, int(n))) {
					return
				}
			}
		})
	}
	for i, n := range nodes {
		v := p.doc.Evaluate(p.pod, p.view(st, int(n)), &p.placed, h)
		if !v.Preferred {
			return // no preferred rule applies to this pod
		}
		base := 50.0
		switch {
		case math.IsNaN(scores[i]) || math.IsInf(scores[i], 0):
			base = 0
		case hi > lo:
			base = 100 * (scores[i] - lo) / (hi - lo)
		}
		scores[i] = p.doc.Combine(base, v)
	}
}

// PickGPUs defers to the base policy's device choice.
func (p *Policy) PickGPUs(st *sim.State, pod *sim.Pod, n int, dst []int) []int {
	if g, ok := p.base.(sim.GPUPicker); ok {
		return g.PickGPUs(st, pod, n, dst)
	}
	return st.BestFitGPUs(n, pod, dst)
}

// placed counts running replicas per service, node and zone.
type placed struct {
	env    *sim.Env
	onNode map[string]map[string]int
	inZone map[string]map[string]int
}

func (c *placed) fill(st *sim.State) {
	c.onNode, c.inZone = map[string]map[string]int{}, map[string]map[string]int{}
	for _, id := range st.Running() {
		pd := &st.Pods[id]
		n := st.Placements[id].Node
		if pd.Service < 0 || n < 0 {
			continue
		}
		s := c.env.Services[pd.Service]
		if c.onNode[s] == nil {
			c.onNode[s], c.inZone[s] = map[string]int{}, map[string]int{}
		}
		c.onNode[s][c.env.Nodes[n].Name]++
		c.inZone[s][c.env.Zones[c.env.Nodes[n].Zone]]++
	}
}

// Count implements policydoc.Placed.
func (c *placed) Count(s string, sc policydoc.Scope) map[string]int {
	if sc == policydoc.ScopeNode {
		return c.onNode[s]
	}
	return c.inZone[s]
}
