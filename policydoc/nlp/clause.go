package nlp

import (
	"fmt"
	"slices"
	"strings"

	"github.com/edgesched/edgesched/policydoc"
)

// expectations name what each kind of clause is made of, for refusals.
const (
	expectAny = "expected a constraint: 'in the same zone/node', 'on different nodes', 'at most N replicas of S per node', " +
		"'in zone Z', 'on nodes labelled k=v', 'on arm64/amd64 nodes', 'on A10 GPUs', 'grids above N gCO2/kWh', " +
		"'between H1 and H2' or 'under N% CPU' (docs/policy-language.md)"
	expectName = "expected a service (a known name or 'NAME service'), a zone ('zone NAME'), a GPU model or a policy word"
)

func refuse(c clause, words []string, format string, a ...any) *Error {
	return &Error{Clause: c.text, Words: words, Expected: fmt.Sprintf(format, a...)}
}

func ambiguous(c clause, words []string, format string, a ...any) *Error {
	return &Error{Clause: c.text, Words: words, Expected: fmt.Sprintf(format, a...), Ambiguous: true}
}

// merge folds numbers with their units, times with am/pm, and weights.
// It returns the clause's tokens with the folded ones marked used.
func merge(ts []token) ([]token, *float64, []string) {
	ts = slices.Clone(ts)
	var weight *float64
	var bad []string
	for i := range ts {
		t := &ts[i]
		if t.used {
			continue
		}
		next := func() *token {
			for j := i + 1; j < len(ts); j++ {
				if !ts[j].used {
					return &ts[j]
				}
			}
			return nil
		}
		prev := func() *token {
			for j := i - 1; j >= 0; j-- {
				if !ts[j].used {
					return &ts[j]
				}
			}
			return nil
		}
		switch t.t {
		case tNumber:
			n := next()
			switch {
			case n != nil && n.t == tPercentWord:
				t.t, n.used = tPercent, true
			case n != nil && (n.t == tAM || n.t == tPM):
				h, ok := clockHour(t.v, n.t == tPM)
				if !ok {
					bad = append(bad, t.surf+" "+n.surf)
				}
				t.t, t.v, n.used = tTime, float64(h), true
			case n != nil && n.t == tOClock:
				if t.v != float64(int(t.v)) || t.v < 0 || t.v > 24 {
					bad = append(bad, t.surf+n.surf)
				}
				t.t, t.v, n.used = tTime, float64(int(t.v)%24), true
				if p := prev(); p != nil && (p.t == tAM || p.t == tPM || p.t == tNight) {
					h := int(t.v)
					switch {
					case p.t == tAM && h == 12:
						h = 0
					case p.t == tPM && h < 12, p.t == tNight && h >= 6 && h < 12:
						h += 12
					case p.t == tNight && h == 12:
						h = 0
					}
					t.v, p.used = float64(h), true
				}
			case n != nil && n.t == tCarbonUnit:
				t.t, t.s, n.used = tCarbonUnit, "threshold", true
			}
		case tPercentWord:
			if n := next(); n != nil && n.t == tNumber {
				n.t, t.used = tPercent, true
			}
		case tWeight:
			n := next()
			if n == nil || n.t != tNumber {
				bad = append(bad, t.surf)
				continue
			}
			w := n.v
			weight, t.used, n.used = &w, true, true
		}
	}
	return ts, weight, bad
}

// nameLike reports whether a role word ("zone", "service") can make t a
// name of its role: an ASCII name, quoted or not, whatever the glossary
// holds it as ("zone checkout" is a zone named like a service). A Chinese
// alias is not: "每个区域支付…" is per zone, for payment.
func nameLike(t token) bool {
	switch t.t {
	case tIdent:
		return true
	case tService, tZoneName, tGPUModel:
		return isASCII(t.surf)
	}
	return false
}

// quoted reports whether t was written in double quotes.
func quoted(t token) bool { return strings.HasPrefix(t.surf, `"`) }

// placesIn reports whether the zone word ts[i] places pods in the zone
// named next: a bare "zone"/"zones" (or 区域) right after "in" or
// "outside (of)" (or a word ending in 在: 在, 运行在). Only then does a name the glossary holds in
// another role become a zone ("run payment in zone checkout"); after
// "across", "one zone", "site" and the like it stays what it is ("spread
// across zones checkout, at most 2 per zone" spreads the service).
func placesIn(ts []token, i int) bool {
	switch strings.ToLower(ts[i].surf) {
	case "zone", "zones", "区域":
	default:
		return false
	}
	if i == 0 {
		return false
	}
	prev := strings.ToLower(ts[i-1].surf)
	return prev == "in" || prev == "outside" || prev == "outside of" || strings.HasSuffix(prev, "在")
}

// continues reports whether t, after "and" or a comma, goes on a list of
// names of role as that a role word began: a name the glossary does not
// hold, one it holds in that role, or a quoted one. A name the glossary
// holds in another role ends the list: the role word decides for the
// name right after it only ("in zone east and T4 GPUs" names a GPU
// model, "in zone east and payment in zone west" a service).
func continues(t token, as tk) bool {
	return t.t == tIdent || t.t == as || nameLike(t) && quoted(t)
}

// nameOf is a name token's name, lowercase, without quotes.
func nameOf(t token) string { return strings.ToLower(strings.Trim(t.surf, `"`)) }

// resolveNames turns names next to "service"/"zone" words into services
// and zones. A role word decides over the glossary: "zone checkout" is a
// zone when checkout is also a service, "east service" a service when east
// is also a zone.
func resolveNames(ts []token) {
	live := func(i int) bool { return i >= 0 && i < len(ts) && !ts[i].used }
	// set gives t the role as; a service keeps its canonical name (an
	// alias's), a zone is named as written
	set := func(t *token, as tk) {
		if as == tZoneName || t.t != tService {
			t.s = nameOf(*t)
		}
		t.t = as
	}
	// zoned marks the names a zone word made zones: a service word after
	// one does not take it back ("in zones west and east services payment")
	zoned := make([]bool, len(ts))
	chain := func(i int, as tk) {
		for i < len(ts) {
			if ts[i].used || ts[i].t == tFiller {
				i++
				continue
			}
			if nameLike(ts[i]) || ts[i].t == as {
				set(&ts[i], as)
				zoned[i] = as == tZoneName
				i++
				if i < len(ts) && (ts[i].t == tAnd || ts[i].t == tPunct) && i+1 < len(ts) && continues(ts[i+1], as) {
					i++
					continue
				}
			}
			return
		}
	}
	for i := range ts {
		if ts[i].used {
			continue
		}
		switch ts[i].t {
		case tScopeZone:
			// "in zone X" names a zone; "in the same zone", "per zone"
			// and "不同区域" are scopes, and a known name after them is
			// not taken for a zone
			scopeWord := live(i-1) && (ts[i-1].t == tSame || ts[i-1].t == tDiff || ts[i-1].t == tPer)
			if live(i+1) && (ts[i+1].t == tIdent || ts[i+1].t == tZoneName || !scopeWord && nameLike(ts[i+1]) && (quoted(ts[i+1]) || placesIn(ts, i))) {
				ts[i].t = tFiller
				chain(i+1, tZoneName)
			} else if live(i-1) && (ts[i-1].t == tIdent || ts[i-1].t == tZoneName) {
				ts[i].t, ts[i-1].t, ts[i-1].s = tFiller, tZoneName, nameOf(ts[i-1])
				zoned[i-1] = true
			}
		case tServiceMarker:
			// "NAME service" names NAME, whatever else the glossary holds
			// it as, unless names follow ("east services payment": east
			// stays a zone, "T4 services foo" a GPU model) or a zone word
			// made it a zone
			nextName := live(i+1) && (nameLike(ts[i+1]) || ts[i+1].t == tService)
			named := live(i-1) && (ts[i-1].t == tService || ts[i-1].t == tIdent || nameLike(ts[i-1]) && !nextName && !zoned[i-1])
			if named {
				// "NAME service": NAME is a service whatever else it is
				set(&ts[i-1], tService)
			}
			if live(i+1) && nameLike(ts[i+1]) && !named {
				ts[i].t = tFiller
				chain(i+1, tService)
			} else {
				for j := i - 1; j >= 0 && (ts[j].t == tIdent || ts[j].t == tService || ts[j].t == tAnd || ts[j].t == tPunct); j-- {
					if ts[j].t == tIdent {
						ts[j].t = tService
					}
				}
				ts[i].t = tFiller
			}
		}
	}
}

// allowed lists, per kind, the token types a clause of that kind may hold
// besides the common ones.
var allowed = map[policydoc.Kind][]tk{
	policydoc.Colocate:  {tSame, tDiff, tScopeNode, tScopeZone},
	policydoc.Separate:  {tSame, tDiff, tScopeNode, tScopeZone},
	policydoc.Spread:    {tSpread, tReplica, tNumber, tAtMost, tAbove, tPer, tScopeNode, tScopeZone, tSame, tDiff},
	policydoc.Zone:      {tZoneName},
	policydoc.NodeLabel: {tLabel, tScopeNode},
	policydoc.Arch:      {tArch, tScopeNode},
	policydoc.GPUModel:  {tGPUModel, tScopeNode},
	policydoc.Carbon:    {tCarbonWord, tLowCarbon, tHighCarbon, tCarbonUnit, tUnder, tAbove, tAtMost, tScopeNode, tScopeZone},
	policydoc.Hours:     {},
	policydoc.CPUCap:    {tCPU, tPercent, tUnder, tAbove, tAtMost, tPer, tScopeNode},
}

var common = []tk{tFiller, tReq, tOnly, tNeg, tPref, tAvoid, tStrength, tAnd, tPunct, tService, tServiceMarker, tGPU, tAll, tNight, tDay, tTime}

var expectKind = map[policydoc.Kind]string{
	policydoc.Colocate:  "a co-location reads 'keep A and B in the same zone' (or 'on the same node')",
	policydoc.Separate:  "a separation reads 'keep A and B on different nodes' (or 'in different zones')",
	policydoc.Spread:    "a spread reads 'at most N replicas of S per node' (or 'per zone')",
	policydoc.Zone:      "a zone rule reads 'run S only in zone Z'",
	policydoc.NodeLabel: "a label rule reads 'run S only on nodes labelled key=value'",
	policydoc.Arch:      "an architecture rule reads 'run S only on arm64 nodes'",
	policydoc.GPUModel:  "a GPU rule reads 'run GPU pods only on A10 GPUs'",
	policydoc.Carbon:    "a carbon rule reads 'never run S on grids above N gCO2/kWh' or 'prefer low-carbon grids'",
	policydoc.Hours:     "an hours rule reads 'schedule S only between H1 and H2'",
	policydoc.CPUCap:    "a CPU cap reads 'keep each node under N% CPU'",
}

func has(ts []token, kinds ...tk) bool {
	return slices.ContainsFunc(ts, func(t token) bool { return !t.used && slices.Contains(kinds, t.t) })
}

func collect(ts []token, k tk) []*token {
	var out []*token
	for i := range ts {
		if !ts[i].used && ts[i].t == k {
			out = append(out, &ts[i])
		}
	}
	return out
}

func surfs(ts []*token) []string {
	var s []string
	for _, t := range ts {
		s = append(s, t.surf)
	}
	return s
}

// compileClause turns one clause into one rule or refuses it.
func compileClause(c clause) (*policydoc.Rule, error) {
	ts, weight, badWords := merge(c.toks)
	if len(badWords) > 0 {
		return nil, refuse(c, badWords, "expected a whole hour such as 22:00, 10pm or 22点, and a number after 'weight'")
	}
	resolveNames(ts)
	if u := append(collect(ts, tUnknown), collect(ts, tIdent)...); len(u) > 0 {
		return nil, refuse(c, surfs(u), "%s", expectName)
	}
	if s := collect(ts, tOpenTime); len(s) > 0 {
		return nil, refuse(c, surfs(s), "a range of hours needs two times: 'between 22:00 and 06:00' (22点到6点)")
	}
	if s := collect(ts, tShould); len(s) > 0 {
		return nil, ambiguous(c, surfs(s), "'should' can be a hard rule or a preference: say 'must' (必须) or 'prefer' (尽量)")
	}
	if s := collect(ts, tOr); len(s) > 0 {
		return nil, ambiguous(c, surfs(s), "'or' leaves the choice open: name one, or write two sentences")
	}
	if s := collect(ts, tNear); len(s) > 0 {
		return nil, ambiguous(c, surfs(s), "'near' can mean the same node or the same zone: say which")
	}

	// modality
	nNeg, nAvoid, nPref, nReq, nOnly := len(collect(ts, tNeg)), len(collect(ts, tAvoid)), len(collect(ts, tPref)), len(collect(ts, tReq)), len(collect(ts, tOnly))
	neg := nNeg+nAvoid > 0
	pref := nPref+nAvoid > 0
	if nNeg+nAvoid > 1 {
		return nil, refuse(c, surfs(append(collect(ts, tNeg), collect(ts, tAvoid)...)), "one negation per clause (a double negation is refused)")
	}
	if pref && nReq+nOnly > 0 {
		return nil, ambiguous(c, surfs(append(append(collect(ts, tReq), collect(ts, tOnly)...), append(collect(ts, tPref), collect(ts, tAvoid)...)...)), "a clause is either a hard rule ('must', 'only', 'never') or a preference ('prefer', 'avoid'), not both")
	}
	if neg && nOnly > 0 {
		return nil, ambiguous(c, surfs(append(collect(ts, tOnly), collect(ts, tNeg)...)), "'only' and a negation together: say 'only in X' or 'never in X'")
	}
	r := &policydoc.Rule{Effect: policydoc.Required}
	if pref {
		r.Effect, r.Weight = policydoc.Preferred, policydoc.DefaultWeight
		if s := collect(ts, tStrength); len(s) == 1 {
			r.Weight = int(s[0].v)
		} else if len(s) > 1 {
			return nil, refuse(c, surfs(s), "at most one strength word")
		}
		if weight != nil {
			if len(collect(ts, tStrength)) > 0 {
				return nil, ambiguous(c, surfs(collect(ts, tStrength)), "both a strength word and a weight: give one")
			}
			if *weight < 1 || *weight > 100 || *weight != float64(int(*weight)) {
				return nil, refuse(c, []string{fmt.Sprint(*weight)}, "a weight is a whole number in [1, 100]")
			}
			r.Weight = int(*weight)
		}
	} else if weight != nil || has(ts, tStrength) {
		return nil, refuse(c, surfs(collect(ts, tStrength)), "a weight or strength belongs to a preference ('prefer', 'avoid', 尽量): a hard rule has none")
	}

	// hours
	times := collect(ts, tTime)
	night, day := collect(ts, tNight), collect(ts, tDay)
	switch {
	case len(times) == 2 && len(night)+len(day) == 0:
		r.During = &policydoc.HourRange{From: int(times[0].v), To: int(times[1].v)}
	case len(times) == 0 && len(night)+len(day) == 1:
		if len(night) == 1 {
			r.During = &policydoc.HourRange{From: nightFrom, To: nightTo}
		} else {
			r.During = &policydoc.HourRange{From: dayFrom, To: dayTo}
		}
	case len(times) == 0 && len(night)+len(day) == 0:
	case len(times) == 1:
		return nil, refuse(c, surfs(times), "a range of hours needs two times: 'between 22:00 and 06:00' (22点到6点)")
	default:
		return nil, ambiguous(c, surfs(append(append(times, night...), day...)), "one range of hours per clause")
	}

	// kind
	var kinds []policydoc.Kind
	add := func(k policydoc.Kind) {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	replicaCount := has(ts, tReplica) && (has(ts, tNumber, tAtMost, tDiff) || has(ts, tSame) && (nNeg+nAvoid) > 0)
	switch {
	case has(ts, tSpread) || replicaCount:
		add(policydoc.Spread)
	case has(ts, tSame):
		add(policydoc.Colocate)
	case has(ts, tDiff):
		add(policydoc.Separate)
	}
	if has(ts, tCPU, tPercent) {
		add(policydoc.CPUCap)
	}
	if has(ts, tCarbonWord, tLowCarbon, tHighCarbon, tCarbonUnit) {
		add(policydoc.Carbon)
	}
	if has(ts, tZoneName) {
		add(policydoc.Zone)
	}
	if has(ts, tLabel) {
		add(policydoc.NodeLabel)
	}
	if has(ts, tArch) {
		add(policydoc.Arch)
	}
	if has(ts, tGPUModel) {
		add(policydoc.GPUModel)
	}
	if len(kinds) == 0 && r.During != nil {
		add(policydoc.Hours)
		r.During, r.Kind = nil, policydoc.Hours
	}
	switch len(kinds) {
	case 0:
		return nil, refuse(c, nil, "%s", expectAny)
	case 1:
	default:
		var ks []string
		for _, k := range kinds {
			ks = append(ks, string(k))
		}
		return nil, ambiguous(c, nil, "this clause names %s constraints at once: write one constraint per clause", strings.Join(ks, " and "))
	}
	r.Kind = kinds[0]
	if r.Kind == policydoc.Hours {
		r.During = &policydoc.HourRange{From: int(times0(times, night, day).From), To: int(times0(times, night, day).To)}
	}

	// every token must be placed
	var left []*token
	for i := range ts {
		t := &ts[i]
		if t.used || slices.Contains(common, t.t) || slices.Contains(allowed[r.Kind], t.t) {
			continue
		}
		left = append(left, t)
	}
	if len(left) > 0 {
		if slices.ContainsFunc(left, func(t *token) bool { return t.t == tNumber }) {
			switch r.Kind {
			case policydoc.CPUCap:
				return nil, refuse(c, surfs(left), "a CPU cap is a percentage: 'N%%' (百分之N)")
			case policydoc.Carbon:
				return nil, refuse(c, surfs(left), "a carbon threshold needs its unit: 'N gCO2/kWh' (N克每千瓦时)")
			}
		}
		return nil, refuse(c, surfs(left), "%s", expectKind[r.Kind])
	}

	// subject: services, GPU pods or all pods; tGPU after the first object
	// word of a GPU rule is the object ("on A10 GPUs").
	firstObj := len(ts)
	if r.Kind == policydoc.GPUModel {
		firstObj = slices.IndexFunc(ts, func(t token) bool { return t.t == tGPUModel })
	}
	for i, t := range ts {
		if t.used {
			continue
		}
		switch {
		case t.t == tService:
			if !slices.Contains(r.Pods.Services, t.s) {
				r.Pods.Services = append(r.Pods.Services, t.s)
			}
		case t.t == tGPU && i < firstObj:
			r.Pods.GPU = true
		}
	}
	if has(ts, tAll) && (len(r.Pods.Services) > 0 || r.Pods.GPU) {
		return nil, ambiguous(c, surfs(collect(ts, tAll)), "'all pods' and named pods in one clause: say which")
	}
	if len(r.Pods.Services) == 0 && !r.Pods.GPU && !has(ts, tAll) && r.Kind != policydoc.Carbon && r.Kind != policydoc.CPUCap {
		return nil, refuse(c, nil, "expected the pods it applies to: a service, 'GPU pods' (GPU任务) or 'all pods' (所有Pod)")
	}

	if err := fill(c, ts, r, neg); err != nil {
		return nil, err
	}
	d := policydoc.New()
	d.Rules = []policydoc.Rule{*r}
	if err := d.Validate(); err != nil {
		msg := err.Error()
		if i := strings.Index(msg, "rules[0]."); i >= 0 {
			msg = msg[i+len("rules[0]."):]
		}
		return nil, refuse(c, nil, "the rule would be invalid: %s", msg)
	}
	r.Name = ""
	return r, nil
}

func times0(times, night, day []*token) policydoc.HourRange {
	switch {
	case len(times) == 2:
		return policydoc.HourRange{From: int(times[0].v), To: int(times[1].v)}
	case len(night) == 1:
		return policydoc.HourRange{From: nightFrom, To: nightTo}
	}
	return policydoc.HourRange{From: dayFrom, To: dayTo}
}

// scope returns the single scope the clause names.
func scope(c clause, ts []token) (policydoc.Scope, error) {
	n, z := collect(ts, tScopeNode), collect(ts, tScopeZone)
	switch {
	case len(n) > 0 && len(z) == 0:
		return policydoc.ScopeNode, nil
	case len(z) > 0 && len(n) == 0:
		return policydoc.ScopeZone, nil
	case len(z) > 0:
		return "", ambiguous(c, surfs(append(n, z...)), "both a node and a zone: say which")
	}
	return "", refuse(c, nil, "expected 'node' (节点) or 'zone' (区域)")
}

// fill sets the kind's fields.
func fill(c clause, ts []token, r *policydoc.Rule, neg bool) error {
	nums := collect(ts, tNumber)
	switch r.Kind {
	case policydoc.Colocate, policydoc.Separate:
		s, err := scope(c, ts)
		if err != nil {
			return err
		}
		r.Scope = s
		if neg { // "not on the same node" is apart; "not apart" is together
			if r.Kind == policydoc.Colocate {
				r.Kind = policydoc.Separate
			} else {
				r.Kind = policydoc.Colocate
			}
		}
		if len(r.Pods.Services) == 1 && r.Kind == policydoc.Separate {
			// "keep replicas of S on different nodes" is a spread of one
			r.Kind, r.MaxPerDomain = policydoc.Spread, 1
		}
	case policydoc.Spread:
		s, err := scope(c, ts)
		if err != nil {
			return err
		}
		r.Scope = s
		atMost, above := has(ts, tAtMost), has(ts, tAbove)
		switch {
		case len(nums) > 1:
			return refuse(c, surfs(nums), "one number of replicas")
		case len(nums) == 0:
			// "on different nodes" is one per node; a bare "spread" is
			// one per node only as a preference
			if !has(ts, tDiff) && r.Effect == policydoc.Required {
				return refuse(c, nil, "a hard spread needs a number: 'at most N replicas of S per node'")
			}
			r.MaxPerDomain = 1
		case neg && above, atMost && !neg:
			r.MaxPerDomain = int(nums[0].v)
		case neg && !atMost:
			// "never two replicas on one node": at most one
			r.MaxPerDomain = int(nums[0].v) - 1
		default:
			return refuse(c, surfs(nums), "expected 'at most N replicas per node' or 'never N replicas on one node'")
		}
		if nums != nil && nums[0].v != float64(int(nums[0].v)) {
			return refuse(c, surfs(nums), "a whole number of replicas")
		}
	case policydoc.Zone:
		for _, z := range collect(ts, tZoneName) {
			if !slices.Contains(r.Zones, z.s) {
				r.Zones = append(r.Zones, z.s)
			}
		}
		r.Negate = neg
	case policydoc.NodeLabel:
		ls := collect(ts, tLabel)
		if len(ls) > 1 {
			return ambiguous(c, surfs(ls), "one label per clause (all of them, or any of them?)")
		}
		r.Label, r.Negate = ls[0].s, neg
	case policydoc.Arch:
		for _, a := range collect(ts, tArch) {
			if !slices.Contains(r.Arch, a.s) {
				r.Arch = append(r.Arch, a.s)
			}
		}
		r.Negate = neg
	case policydoc.GPUModel:
		for _, m := range collect(ts, tGPUModel) {
			if !slices.Contains(r.GPUModels, m.s) {
				r.GPUModels = append(r.GPUModels, m.s)
			}
		}
		r.Negate = neg
	case policydoc.Carbon:
		units := collect(ts, tCarbonUnit)
		var thr []*token
		for _, u := range units {
			if u.s == "threshold" {
				thr = append(thr, u)
			}
		}
		if len(nums) > 0 {
			return refuse(c, surfs(nums), "a carbon threshold needs its unit: 'N gCO2/kWh' (N克每千瓦时)")
		}
		low, high := has(ts, tLowCarbon), has(ts, tHighCarbon)
		if low && neg || high && !neg {
			return refuse(c, surfs(append(collect(ts, tLowCarbon), collect(ts, tHighCarbon)...)), "expected 'prefer low-carbon grids' or 'avoid coal-heavy grids'")
		}
		switch len(thr) {
		case 0:
			if len(units) > 0 {
				return refuse(c, surfs(units), "a unit without a number")
			}
			if r.Effect == policydoc.Required {
				return refuse(c, nil, "a hard carbon rule needs a threshold: 'never run S on grids above N gCO2/kWh'")
			}
			if !low && !high {
				return refuse(c, nil, "expected 'low-carbon' (低碳) or a threshold in gCO2/kWh")
			}
		case 1:
			v := thr[0].v
			under, above := has(ts, tUnder, tAtMost), has(ts, tAbove)
			if !(neg && above && !under) && !(!neg && under && !above) {
				return refuse(c, nil, "expected 'never above N gCO2/kWh', 'avoid grids above N' or 'only below N'")
			}
			r.MaxCarbon = v
		default:
			return refuse(c, surfs(thr), "one carbon threshold per clause")
		}
	case policydoc.CPUCap:
		ps := collect(ts, tPercent)
		if len(nums) > 0 {
			return refuse(c, surfs(nums), "a CPU cap is a percentage: 'N%%' (百分之N)")
		}
		if len(ps) != 1 {
			return refuse(c, surfs(ps), "exactly one percentage")
		}
		under, above := has(ts, tUnder, tAtMost), has(ts, tAbove)
		if !(neg && above && !under) && !(!neg && under && !above) {
			return refuse(c, nil, "expected 'keep each node under N%% CPU' or 'never above N%% CPU'")
		}
		if ps[0].v != float64(int(ps[0].v)) {
			return refuse(c, surfs(ps), "a whole percentage")
		}
		r.MaxCPUPercent = int(ps[0].v)
	case policydoc.Hours:
		if neg {
			// "never schedule batch between 8 and 18" is the complement
			r.During = &policydoc.HourRange{From: r.During.To, To: r.During.From}
		}
	}
	return nil
}
