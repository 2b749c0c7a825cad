package policydoc

import (
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"
)

// Pod is what a rule needs to know of the pod being scheduled.
type Pod struct {
	// Service is the pod's service ("" without one).
	Service string
	// GPU is set when the pod requests GPUs.
	GPU bool
	// CPU is the pod's CPU request in milli-CPU.
	CPU int64
	// GPUMilli is the pod's whole GPU demand in milli-GPUs (2 GPUs: 2000;
	// a 30% share of one: 300).
	GPUMilli int64
	// LeastEmissions is the lowest Emissions of the pod over the decision's
	// candidate nodes, set by the scheduler before scoring (SetLeastEmissions);
	// 0 scores the carbon preference on the absolute scale.
	LeastEmissions float64
}

// Node is what a rule needs to know of a candidate node.
type Node struct {
	Name   string
	Zone   string
	Labels map[string]string
	// Arch is amd64 or arm64 ("" unknown).
	Arch string
	// GPUModel is "" for a node without GPUs.
	GPUModel string
	// Carbon is the grid's intensity now in gCO2/kWh; CarbonKnown is false
	// when the scheduler has no carbon data for the node.
	Carbon      float64
	CarbonKnown bool
	// CPUAllocatable and CPURequested (before the pod) in milli-CPU.
	CPUAllocatable, CPURequested int64
	// WattsPerCore and WattsPerGPU are the node's power for placed work
	// (watts per busy core, per busy GPU); both 0 when unknown, and then
	// the carbon preference ranks by grid intensity alone.
	WattsPerCore, WattsPerGPU float64
}

// The carbon preference's reference placement (RefWattsPerCore per core,
// RefWattsPerGPU per GPU, on a grid at RefCarbon gCO2/kWh) scores 0; a
// placement's satisfaction is 1 minus its estimated emissions over the
// reference's, so on a node of the reference's power it is 1 -
// intensity/RefCarbon, as without power figures. The per-core and per-GPU
// figures are the simulator's defaults for an amd64 node and a GPU without
// a data sheet (sim.DefaultPower, sim.DefaultGPUWatts).
const (
	RefWattsPerCore = 8
	RefWattsPerGPU  = 250
	RefCarbon       = 1000
)

// Emissions estimates the pod's emission rate on n relative to the
// reference node's power: the grid's intensity (gCO2/kWh) times the pod's
// power there over its power on the reference node (powerShare; 1 when the
// node's power is unknown). ok is false when the intensity is unknown.
func Emissions(p Pod, n *Node) (float64, bool) {
	if !n.CarbonKnown {
		return 0, false
	}
	e := math.Max(n.Carbon, 0)
	if share, ok := powerShare(p, n); ok {
		e *= share
	}
	return e, true
}

// WantsEmissions reports whether a preferred carbon rule without a
// threshold applies to the pod at hour, so the scheduler should set
// p.LeastEmissions before scoring.
func (d *Document) WantsEmissions(p Pod, hour int) bool {
	for i := range d.Rules {
		r := &d.Rules[i]
		if r.Kind == Carbon && r.Effect != Required && r.MaxCarbon == 0 && r.Applies(p, hour) {
			return true
		}
	}
	return false
}

// SetLeastEmissions sets p.LeastEmissions to the lowest positive Emissions
// over the candidate nodes (0 when none is known).
func (p *Pod) SetLeastEmissions(nodes iter.Seq[*Node]) {
	p.LeastEmissions = 0
	for n := range nodes {
		if e, ok := Emissions(*p, n); ok && e > 0 && (p.LeastEmissions == 0 || e < p.LeastEmissions) {
			p.LeastEmissions = e
		}
	}
}

// powerShare is the pod's power on n over its power on the reference
// node, from its requests; ok is false when either is unknown or zero.
func powerShare(p Pod, n *Node) (float64, bool) {
	if n.WattsPerCore <= 0 && n.WattsPerGPU <= 0 {
		return 0, false
	}
	cores, gpus := float64(max(p.CPU, 0))/1000, float64(max(p.GPUMilli, 0))/1000
	ref := cores*RefWattsPerCore + gpus*RefWattsPerGPU
	if ref <= 0 {
		return 0, false
	}
	return (cores*max(n.WattsPerCore, 0) + gpus*max(n.WattsPerGPU, 0)) / ref, true
}

// Placed counts the running replicas the rules about services look at.
type Placed interface {
	// Count maps each node (scope node) or zone (scope zone) that runs
	// replicas of service to their number. The map is read only.
	Count(service string, scope Scope) map[string]int
}

// Applies reports whether the rule selects the pod at hour (UTC, 0-23).
func (r *Rule) Applies(p Pod, hour int) bool {
	if r.Pods.GPU && !p.GPU {
		return false
	}
	if len(r.Pods.Services) > 0 && !slices.Contains(r.Pods.Services, p.Service) {
		return false
	}
	if r.Kind != Hours && r.During != nil && !r.During.Contains(hour) {
		return false
	}
	return true
}

func count(pl Placed, s Scope, service string, n *Node) int {
	return pl.Count(service, s)[domain(s, n)]
}

// Check tests a required rule on a node; it returns "" when the node
// passes, or why it does not.
func (r *Rule) Check(p Pod, n *Node, pl Placed, hour int) string {
	s := r.satisfaction(p, n, pl, hour, true)
	if s.ok {
		return ""
	}
	return s.why
}

type sat struct {
	ok  bool
	v   float64 // in [0, 1]
	why string
}

func yes() sat { return sat{ok: true, v: 1} }

func no(format string, a ...any) sat { return sat{why: fmt.Sprintf(format, a...)} }

func (r *Rule) satisfaction(p Pod, n *Node, pl Placed, hour int, hard bool) sat {
	switch r.Kind {
	case Colocate:
		// every replica of the group in one domain: the domain that holds
		// most of the group's running replicas (all of them, once the rule
		// has been in force from the start)
		tally := map[string]int{}
		total := 0
		for _, t := range r.Pods.Services {
			for d, c := range pl.Count(t, r.Scope) {
				tally[d] += c
				total += c
			}
		}
		if total == 0 {
			return yes()
		}
		best := 0
		for _, c := range tally {
			best = max(best, c)
		}
		d := domain(r.Scope, n)
		if tally[d] == best {
			return sat{ok: true, v: float64(tally[d]) / float64(total)}
		}
		var where []string
		for dd, c := range tally {
			if c == best {
				where = append(where, dd)
			}
		}
		slices.Sort(where)
		return sat{v: float64(tally[d]) / float64(total), why: fmt.Sprintf("%s %s is not where %s run (%s)", r.Scope, d, strings.Join(r.Pods.Services, ", "), strings.Join(where, ", "))}
	case Separate:
		var sum float64
		var k int
		for _, t := range r.Pods.Services {
			if t == p.Service {
				continue
			}
			k++
			if c := count(pl, r.Scope, t, n); c > 0 {
				if hard {
					return no("%s %s already runs %d %s replica(s)", r.Scope, domain(r.Scope, n), c, t)
				}
				continue
			}
			sum++
		}
		if k == 0 {
			return yes()
		}
		return sat{ok: sum == float64(k), v: sum / float64(k)}
	case Spread:
		c := count(pl, r.Scope, p.Service, n)
		if c+1 <= r.MaxPerDomain {
			return yes()
		}
		return sat{v: float64(r.MaxPerDomain) / float64(c+1), why: fmt.Sprintf("%s %s already runs %d %s replica(s) (at most %d)", r.Scope, domain(r.Scope, n), c, p.Service, r.MaxPerDomain)}
	case Zone:
		in := slices.Contains(r.Zones, n.Zone)
		if in != r.Negate {
			return yes()
		}
		if r.Negate {
			return no("zone %s is excluded", n.Zone)
		}
		return no("zone %s is not one of %s", n.Zone, strings.Join(r.Zones, ", "))
	case NodeLabel:
		k, v, _ := strings.Cut(r.Label, "=")
		got, has := n.Labels[k]
		if (has && got == v) != r.Negate {
			return yes()
		}
		if r.Negate {
			return no("node has label %s", r.Label)
		}
		return no("node lacks label %s", r.Label)
	case Arch:
		if slices.Contains(r.Arch, n.Arch) != r.Negate {
			return yes()
		}
		return no("architecture %q is not allowed", n.Arch)
	case GPUModel:
		if (n.GPUModel != "" && slices.Contains(r.GPUModels, n.GPUModel)) != r.Negate {
			return yes()
		}
		if n.GPUModel == "" {
			return no("node has no GPU of model %s", strings.Join(r.GPUModels, ", "))
		}
		return no("GPU model %s is not allowed", n.GPUModel)
	case Carbon:
		if !n.CarbonKnown {
			return sat{v: 0.5, why: "carbon intensity of the node's grid is unknown"}
		}
		if r.MaxCarbon == 0 {
			e, _ := Emissions(p, n)
			if p.LeastEmissions > 0 && e > 0 {
				return sat{ok: true, v: math.Min(1, p.LeastEmissions/e)}
			}
			return sat{ok: true, v: 1 - math.Min(e, RefCarbon)/RefCarbon}
		}
		if n.Carbon <= r.MaxCarbon {
			return yes()
		}
		return sat{v: r.MaxCarbon / n.Carbon, why: fmt.Sprintf("grid at %.0f gCO2/kWh is above %.0f", n.Carbon, r.MaxCarbon)}
	case Hours:
		if r.During.Contains(hour) {
			return yes()
		}
		return no("hour %02d:00 UTC is outside %02d:00-%02d:00", hour, r.During.From, r.During.To)
	case CPUCap:
		if n.CPUAllocatable <= 0 {
			return no("node has no allocatable CPU")
		}
		pct := 100 * float64(n.CPURequested+p.CPU) / float64(n.CPUAllocatable)
		if pct <= float64(r.MaxCPUPercent) {
			return yes()
		}
		return sat{v: math.Max(0, 1-(pct-float64(r.MaxCPUPercent))/100), why: fmt.Sprintf("requested CPU would be %.0f%% (cap %d%%)", pct, r.MaxCPUPercent)}
	}
	return no("unknown rule kind %q", r.Kind)
}

func domain(s Scope, n *Node) string {
	if s == ScopeNode {
		return n.Name
	}
	return n.Zone
}

// Verdict is the policy's answer for one pod on one node.
type Verdict struct {
	// Fits is false when a required rule is broken; Rule names it and Reason
	// says why ("policy rule rule-2 (...): zone b has no orders replica").
	Fits   bool
	Rule   string
	Reason string
	// Preferred is set when at least one preferred rule applies; Score is
	// then their weighted satisfaction in [0, MaxNodeScore].
	Preferred bool
	Score     float64
}

// Evaluate applies the document to a pod on a node at hour (UTC).
// Required rules are checked in order and the first broken one decides.
func (d *Document) Evaluate(p Pod, n *Node, pl Placed, hour int) Verdict {
	v := Verdict{Fits: true}
	var w, sum float64
	for i := range d.Rules {
		r := &d.Rules[i]
		if !r.Applies(p, hour) {
			continue
		}
		if r.Effect == Required {
			if v.Fits {
				if s := r.satisfaction(p, n, pl, hour, true); !s.ok {
					v.Fits, v.Rule = false, r.Name
					v.Reason = fmt.Sprintf("policy rule %s (%s): %s", r.Name, r.English(), s.why)
				}
			}
			continue
		}
		s := r.satisfaction(p, n, pl, hour, false)
		w += float64(r.Weight)
		sum += float64(r.Weight) * s.v
	}
	if w > 0 {
		v.Preferred = true
		v.Score = MaxNodeScore * sum / w
	}
	return v
}

// Share is the fraction of the final score the preferred rules decide.
func (d *Document) Share() float64 {
	if d.ScoreShare == 0 {
		return DefaultScoreShare / 100.0
	}
	return float64(d.ScoreShare) / 100
}

// Combine mixes a base score in [0, MaxNodeScore] with a verdict: the
// result stays in [0, MaxNodeScore] and equals base when no preferred rule
// applies.
func (d *Document) Combine(base float64, v Verdict) float64 {
	if !v.Preferred {
		return base
	}
	s := d.Share()
	return math.Min(MaxNodeScore, math.Max(0, (1-s)*base+s*v.Score))
}
