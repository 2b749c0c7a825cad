package policydoc

import (
	"fmt"
	"strings"
)

// English renders the rule as one canonical English sentence, which the
// compiler (policydoc/nlp) reads back into the same rule.
func (r *Rule) English() string {
	subj := r.subjectEN()
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
		verb("run "+subj+" "+only+"in "+plural(len(r.Zones), "zone")+" "+listEN(r.Zones), "running "+subj+" in "+plural(len(r.Zones), "zone")+" "+listEN(r.Zones))
	case NodeLabel:
		verb("run "+subj+" "+only+"on nodes labelled "+r.Label, "running "+subj+" on nodes labelled "+r.Label)
	case Arch:
		verb("run "+subj+" "+only+"on "+listEN(r.Arch)+" nodes", "running "+subj+" on "+listEN(r.Arch)+" nodes")
	case GPUModel:
		verb("run "+subj+" "+only+"on "+listEN(r.GPUModels)+" GPUs", "running "+subj+" on "+listEN(r.GPUModels)+" GPUs")
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

// Chinese renders the rule as one canonical Chinese sentence, which the
// compiler reads back into the same rule.
func (r *Rule) Chinese() string {
	subj := r.subjectZH()
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
		fmt.Fprintf(&b, "%s%s运行在区域%s", subj, only, strings.Join(r.Zones, "、"))
	case NodeLabel:
		fmt.Fprintf(&b, "%s%s运行在带标签%s的节点上", subj, only, r.Label)
	case Arch:
		fmt.Fprintf(&b, "%s%s运行在%s节点上", subj, only, strings.Join(r.Arch, "、"))
	case GPUModel:
		fmt.Fprintf(&b, "%s%s运行在%s GPU上", subj, only, strings.Join(r.GPUModels, "、"))
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

func (r *Rule) subjectEN() string {
	switch {
	case r.Pods.GPU && len(r.Pods.Services) > 0:
		return "GPU pods of " + listEN(r.Pods.Services)
	case r.Pods.GPU:
		return "GPU pods"
	case len(r.Pods.Services) > 0:
		return listEN(r.Pods.Services)
	}
	return "all pods"
}

func (r *Rule) subjectZH() string {
	switch {
	case r.Pods.GPU && len(r.Pods.Services) > 0:
		return strings.Join(r.Pods.Services, "和") + "的GPU任务"
	case r.Pods.GPU:
		return "GPU任务"
	case len(r.Pods.Services) > 0:
		return strings.Join(r.Pods.Services, "和")
	}
	return "所有Pod"
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

func num(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", f), "0"), ".")
}
