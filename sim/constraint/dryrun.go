package constraint

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/edgesched/edgesched/policydoc"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/engine"
)

// Measures DryRun compares, in display order.
var Measures = []string{"pods_failed", "pods_pending", "cross_zone_traffic", "latency_p95_ms", "carbon_g", "carbon_g_per_h"}

// MeasureDiff is one measure before and after.
type MeasureDiff struct {
	Name   string  `json:"name"`
	Before float64 `json:"before"`
	After  float64 `json:"after"`
	Change float64 `json:"change"`
}

// PairTraffic is the cross-zone share of a co-located pair's replicas: the
// mean over scheduling decisions, while both run, of 1 - sum_z a_z b_z /
// (A B) (the probability that a call from a replica of one reaches the
// other in another zone, calls spread evenly over replicas).
type PairTraffic struct {
	Rule   string  `json:"rule"`
	A      string  `json:"a"`
	B      string  `json:"b"`
	Before float64 `json:"before"`
	After  float64 `json:"after"`
}

// RuleReport is what one rule did.
type RuleReport struct {
	Name    string `json:"name"`
	English string `json:"english"`
	Chinese string `json:"chinese"`
	Effect  string `json:"effect"`
	// BrokenBefore counts bindings of the run without the document that
	// break this required rule at the moment they were made.
	BrokenBefore int `json:"broken_before"`
	// BrokenAfter is the same count with the document (0 unless the
	// enforcement is wrong).
	BrokenAfter int `json:"broken_after"`
	// BlockedAfter counts decisions of the run with the document where this
	// rule refused every node the resources allowed (unmet).
	BlockedAfter int `json:"blocked_after"`
}

// Report is a dry run's outcome.
type Report struct {
	Input  string `json:"input"`
	Policy string `json:"policy"`
	Mode   string `json:"mode"`
	Seed   uint64 `json:"seed"`
	// Pods counts pods placed in either run; Moved those placed on another
	// node (or placed in one run only).
	Pods     int           `json:"pods"`
	Moved    int           `json:"moved"`
	Measures []MeasureDiff `json:"measures"`
	Pairs    []PairTraffic `json:"pairs,omitempty"`
	Rules    []RuleReport  `json:"rules"`
	// BlockedPods counts pods the document kept from a node at least once.
	BlockedPods int `json:"blocked_pods"`
}

// DryRun replays env with base alone and with doc applied.
func DryRun(ctx context.Context, env *sim.Env, base sim.Factory, doc *policydoc.Document, cfg engine.RunConfig) (*Report, error) {
	pairs := colocatedPairs(env, doc)
	run := func(with bool) (*engine.Result, map[int32]int32, []pairAcc, *Policy, map[string]int, error) {
		pol, err := base.New(env)
		if err != nil {
			return nil, nil, nil, nil, nil, fmt.Errorf("policy %s: %w", base.Name, err)
		}
		var wrapped *Policy
		if with {
			wrapped = Wrap(pol, doc)
			pol = wrapped
		}
		final := map[int32]int32{}
		acc := make([]pairAcc, len(pairs))
		broken := map[string]int{}
		c := cfg
		// an independent checker of every binding against the required rules
		checker := Wrap(nopPolicy{}, doc)
		c.OnBind = func(st *sim.State, p *sim.Pod, n int, _ []int) {
			if checker.nodes == nil {
				_ = checker.Start(st, nil)
			}
			checker.key = decisionKey{pod: -1}
			checker.begin(st, p)
			v := doc.Evaluate(checker.pod, checker.view(st, n), &checker.placed, hour(st))
			if !v.Fits {
				broken[v.Rule]++
			}
		}
		c.OnOutcome = func(st *sim.State, p *sim.Pod, n int) {
			if n >= 0 {
				final[p.ID] = int32(n)
			}
			for i, pr := range pairs {
				a, b := st.ServiceCount(pr.a), st.ServiceCount(pr.b)
				if a == 0 || b == 0 {
					continue
				}
				var same float64
				for z := range env.Zones {
					same += float64(st.ServiceZoneCount(pr.a, z)) * float64(st.ServiceZoneCount(pr.b, z))
				}
				acc[i].sum += 1 - same/(float64(a)*float64(b))
				acc[i].n++
			}
		}
		res, err := engine.Run(ctx, env, sim.Factory{Name: pol.Name(), New: func(*sim.Env) (sim.Policy, error) { return pol, nil }}, c)
		if err != nil {
			return nil, nil, nil, nil, nil, err
		}
		if wrapped != nil {
			wrapped.Flush()
		}
		return res, final, acc, wrapped, broken, nil
	}
	before, fb, accB, _, broken, err := run(false)
	if err != nil {
		return nil, err
	}
	after, fa, accA, wrapped, brokenAfter, err := run(true)
	if err != nil {
		return nil, err
	}
	rep := &Report{Policy: base.Name, Mode: string(cfg.Mode), Seed: cfg.Seed, BlockedPods: len(wrapped.BlockedPods)}
	ids := map[int32]bool{}
	for id := range fb {
		ids[id] = true
	}
	for id := range fa {
		ids[id] = true
	}
	rep.Pods = len(ids)
	for id := range ids {
		nb, okb := fb[id]
		na, oka := fa[id]
		if okb != oka || nb != na {
			rep.Moved++
		}
	}
	for _, m := range Measures {
		b, okb := before.Measures[m]
		a, oka := after.Measures[m]
		if !okb && !oka {
			continue
		}
		rep.Measures = append(rep.Measures, MeasureDiff{Name: m, Before: b, After: a, Change: a - b})
	}
	for i, pr := range pairs {
		rep.Pairs = append(rep.Pairs, PairTraffic{Rule: pr.rule, A: env.Services[pr.a], B: env.Services[pr.b], Before: accB[i].mean(), After: accA[i].mean()})
	}
	for i := range doc.Rules {
		r := &doc.Rules[i]
		rep.Rules = append(rep.Rules, RuleReport{Name: r.Name, English: r.English(), Chinese: r.Chinese(), Effect: string(r.Effect), BrokenBefore: broken[r.Name], BrokenAfter: brokenAfter[r.Name], BlockedAfter: wrapped.Blocked[r.Name]})
	}
	return rep, nil
}

type pairAcc struct {
	sum float64
	n   int
}

func (a pairAcc) mean() float64 {
	if a.n == 0 {
		return 0
	}
	return a.sum / float64(a.n)
}

type pair struct {
	rule string
	a, b int
}

// colocatedPairs lists the service pairs of zone co-location rules that
// the input knows.
func colocatedPairs(env *sim.Env, doc *policydoc.Document) []pair {
	var out []pair
	for _, r := range doc.Rules {
		if r.Kind != policydoc.Colocate {
			continue
		}
		var idx []int
		for _, s := range r.Pods.Services {
			if i, ok := env.ServiceIndex(s); ok {
				idx = append(idx, i)
			}
		}
		sort.Ints(idx)
		idx = slices.Compact(idx)
		for i := range idx {
			for j := i + 1; j < len(idx); j++ {
				out = append(out, pair{rule: r.Name, a: idx[i], b: idx[j]})
			}
		}
	}
	return out
}

// UnknownNames lists the services and zones doc names that env lacks, so a
// dry run can say a rule has nothing to act on.
func UnknownNames(env *sim.Env, doc *policydoc.Document) []string {
	var out []string
	for _, r := range doc.Rules {
		for _, s := range r.Pods.Services {
			if _, ok := env.ServiceIndex(s); !ok {
				out = append(out, fmt.Sprintf("%s: service %q", r.Name, s))
			}
		}
		for _, z := range r.Zones {
			if _, ok := env.ZoneIndex(z); !ok {
				out = append(out, fmt.Sprintf("%s: zone %q", r.Name, z))
			}
		}
	}
	return out
}

// nopPolicy scores nothing; the checker of the run without the document
// only uses the wrapper's views.
type nopPolicy struct{}

func (nopPolicy) Name() string                                   { return "none" }
func (nopPolicy) Score(*sim.State, *sim.Pod, []int32, []float64) {}
