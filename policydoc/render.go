package policydoc

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// NameStyle is how a rendering writes the names of services, zones and GPU
// models. A name can also be a name in another role or a word of the
// policy language (a service called "east" where the compiler's glossary
// knows a zone "east", a zone "a", a service "order" that the glossary
// reads as "orders"); the compiler (policydoc/nlp) then reads the plain
// sentence as another rule or refuses it, and a more explicit style
// disambiguates. nlp.RenderRule picks the first style that reads back.
type NameStyle int

// Name styles, from plain to explicit.
const (
	// NamesPlain writes names as they are: "run checkout only in zone east".
	NamesPlain NameStyle = iota
	// NamesMarked writes "service" (服务) after every service: "run
	// checkout service only in zone checkout" (a zone always has "zone").
	NamesMarked
	// NamesQuoted also quotes every name: `run "checkout" service only in
	// zone "a"`. The compiler takes a quoted name as written: never as a
	// policy word or a glossary alias.
	NamesQuoted
)

// English renders the rule as one canonical English sentence, names
// plain. The compiler (policydoc/nlp) reads it back into the same rule
// when its glossary reads every name in its role; nlp.RenderRule checks
// that and writes names more explicitly when it does not.
func (r *Rule) English() string { return r.EnglishNames(NamesPlain) }

// Chinese renders the rule as one canonical Chinese sentence, names plain
// (as English).
func (r *Rule) Chinese() string { return r.ChineseNames(NamesPlain) }

// EnglishNames renders the rule as one English sentence writing names in
// style s.
func (r *Rule) EnglishNames(s NameStyle) string {
	subj := r.subjectEN(s)
	zones := quoteNames(r.Zones, s)
	gpus := quoteNames(r.GPUModels, s)
	var b strings.Builder
	pref := r.Effect == Preferred
	neg := r.Negate
	verb := func(pos, negv string) {
		switch {
		case pref && neg:
			b.WriteString("avoid " + negv)
		case pref:
			b.WriteString("prefer to " + pos)
		case neg:
			b.WriteString("never " + pos)
		default:
			b.WriteString(pos)
		}
	}
	only := ""
	if !pref && !neg {
		only = "only "
	}
	switch r.Kind {
	case Colocate:
		verb("keep "+subj+" "+sameEN(r.Scope), "")
	case Separate:
		verb("keep "+subj+" "+diffEN(r.Scope), "")
	case Spread:
		verb(fmt.Sprintf("run at most %d %s of %s per %s", r.MaxPerDomain, plural(r.MaxPerDomain, "replica"), subj, r.Scope), "")
	case Zone:
		verb("run "+subj+" "+only+"in "+plural(len(zones), "zone")+" "+listEN(zones), "running "+subj+" in "+plural(len(zones), "zone")+" "+listEN(zones))
	case NodeLabel:
		verb("run "+subj+" "+only+"on nodes labelled "+r.Label, "running "+subj+" on nodes labelled "+r.Label)
	case Arch:
		verb("run "+subj+" "+only+"on "+listEN(r.Arch)+" nodes", "running "+subj+" on "+listEN(r.Arch)+" nodes")
	case GPUModel:
		verb("run "+subj+" "+only+"on "+listEN(gpus)+" GPUs", "running "+subj+" on "+listEN(gpus)+" GPUs")
	case Carbon:
		switch {
		case r.MaxCarbon == 0:
			b.WriteString("prefer low-carbon grids for " + subj)
		case pref:
			fmt.Fprintf(&b, "avoid running %s on grids above %s gCO2/kWh", subj, num(r.MaxCarbon))
		default:
			fmt.Fprintf(&b, "never run %s on grids above %s gCO2/kWh", subj, num(r.MaxCarbon))
		}
	case Hours:
		fmt.Fprintf(&b, "schedule %s only between %02d:00 and %02d:00", subj, r.During.From, r.During.To)
	case CPUCap:
		s := fmt.Sprintf("keep each node at or under %d%% CPU", r.MaxCPUPercent)
		if subj != "all pods" {
			s += " for " + subj
		}
		verb(s, "")
	}
	if r.During != nil && r.Kind != Hours {
		fmt.Fprintf(&b, " between %02d:00 and %02d:00", r.During.From, r.During.To)
	}
	if pref {
		fmt.Fprintf(&b, " (weight %d)", r.Weight)
	}
	return b.String()
}

// ChineseNames renders the rule as one Chinese sentence writing names in
// style s.
func (r *Rule) ChineseNames(s NameStyle) string {
	subj := r.subjectZH(s)
	var b strings.Builder
	if r.During != nil && r.Kind != Hours {
		fmt.Fprintf(&b, "在%d点到%d点之间", r.During.From, r.During.To)
	}
	pref := r.Effect == Preferred
	modal := "必须"
	switch {
	case pref && r.Negate:
		modal = "尽量避免"
	case pref:
		modal = "尽量"
	case r.Negate:
		modal = "不得"
	}
	only := modal
	if !pref && !r.Negate {
		only = "只能"
	}
	switch r.Kind {
	case Colocate:
		fmt.Fprintf(&b, "%s把%s放在同一个%s", modal, subj, scopeZH(r.Scope))
	case Separate:
		fmt.Fprintf(&b, "%s把%s放在不同的%s", modal, subj, scopeZH(r.Scope))
	case Spread:
		fmt.Fprintf(&b, "%s每个%s最多运行%d个%s副本", modal, scopeZH(r.Scope), r.MaxPerDomain, subj)
	case Zone:
		fmt.Fprintf(&b, "%s%s运行在区域%s", subj, only, strings.Join(quoteNames(r.Zones, s), "、"))
	case NodeLabel:
		fmt.Fprintf(&b, "%s%s运行在带标签%s的节点上", subj, only, r.Label)
	case Arch:
		fmt.Fprintf(&b, "%s%s运行在%s节点上", subj, only, strings.Join(r.Arch, "、"))
	case GPUModel:
		fmt.Fprintf(&b, "%s%s运行在%s GPU上", subj, only, strings.Join(quoteNames(r.GPUModels, s), "、"))
	case Carbon:
		if r.MaxCarbon == 0 {
			fmt.Fprintf(&b, "%s优先使用低碳电网", subj)
		} else {
			m := "不得"
			if pref {
				m = "尽量避免"
			}
			fmt.Fprintf(&b, "%s%s运行在高于%s克每千瓦时的电网上", subj, m, num(r.MaxCarbon))
		}
	case Hours:
		fmt.Fprintf(&b, "%s只能在%d点到%d点之间调度", subj, r.During.From, r.During.To)
	case CPUCap:
		if subj != "所有Pod" {
			fmt.Fprintf(&b, "调度%s时", subj)
		}
		m := "不得"
		if pref {
			m = "尽量不"
		}
		fmt.Fprintf(&b, "每个节点的CPU%s超过百分之%d", m, r.MaxCPUPercent)
	}
	if pref {
		fmt.Fprintf(&b, "（权重%d）", r.Weight)
	}
	return b.String()
}

func (r *Rule) subjectEN(s NameStyle) string {
	svcs := serviceNames(r.Pods.Services, s, " service")
	switch {
	case r.Pods.GPU && len(svcs) > 0:
		return "GPU pods of " + listEN(svcs)
	case r.Pods.GPU:
		return "GPU pods"
	case len(svcs) > 0:
		return listEN(svcs)
	}
	return "all pods"
}

func (r *Rule) subjectZH(s NameStyle) string {
	svcs := serviceNames(r.Pods.Services, s, "服务")
	switch {
	case r.Pods.GPU && len(svcs) > 0:
		return strings.Join(svcs, "和") + "的GPU任务"
	case r.Pods.GPU:
		return "GPU任务"
	case len(svcs) > 0:
		return strings.Join(svcs, "和")
	}
	return "所有Pod"
}

// serviceNames writes services in style s, marked with the word marker.
func serviceNames(names []string, s NameStyle, marker string) []string {
	out := quoteNames(names, s)
	if s >= NamesMarked {
		for i := range out {
			out[i] += marker
		}
	}
	return out
}

// quoteNames returns a copy of names, quoted in NamesQuoted.
func quoteNames(names []string, s NameStyle) []string {
	out := slices.Clone(names)
	if s == NamesQuoted {
		for i, n := range out {
			out[i] = `"` + n + `"`
		}
	}
	return out
}

func sameEN(s Scope) string {
	if s == ScopeNode {
		return "on the same node"
	}
	return "in the same zone"
}

func diffEN(s Scope) string {
	if s == ScopeNode {
		return "on different nodes"
	}
	return "in different zones"
}

func scopeZH(s Scope) string {
	if s == ScopeNode {
		return "节点"
	}
	return "区域"
}

func listEN(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

func plural(n int, w string) string {
	if n == 1 {
		return w
	}
	return w + "s"
}

// num writes f in the fewest digits that read back as f (%.3f wrote
// 123.4567 as 123.457, another threshold).
func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
