package scenario

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/openb"
)

type builder struct {
	s        *Scenario
	dir      string
	models   []sim.GPUModel
	modelSet map[string]bool
	zones    map[string]bool
	zoneList []string
	carbon   map[string]bool
	services map[string]bool
	profiles map[string]bool
	grids    []gridZone
	cluster  sim.Cluster
	workload sim.Workload
	// background is Options.Background
	background *sim.BackgroundLoad
}

func errAt(line int, field string, base error, format string, args ...any) error {
	return &sim.LineError{Line: line, Field: field, Err: fmt.Errorf("%w: "+format, append([]any{base}, args...)...)}
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// inRange reports whether v is a finite number in [0, hi].
func inRange(v, hi float64) bool { return finite(v) && v >= 0 && v <= hi }

func (b *builder) build() (*Loaded, error) {
	s := b.s
	switch {
	case s.APIVersion != APIVersion:
		return nil, errAt(s.pos.at("apiVersion"), "apiVersion", ErrSyntax, "%q, want %s", s.APIVersion, APIVersion)
	case s.Kind != Kind:
		return nil, errAt(s.pos.at("kind"), "kind", ErrSyntax, "%q, want %s", s.Kind, Kind)
	case s.Name == "":
		return nil, errAt(s.pos.at("name"), "name", sim.ErrInvalid, "a scenario needs a name")
	}
	b.cluster.Name = s.Name
	b.workload.Name = s.Name
	steps := []func() error{b.carbonZones, b.zonesAndNetwork, b.gpuModels, b.loadProfiles, b.nodePools, b.backgroundLoad, b.workloadPods, b.dependencies, b.gridCurves}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return &Loaded{Name: s.Name, Description: s.Description, Seed: s.Seed, Cluster: &b.cluster, Workload: &b.workload, Generated: s.Workload.Generator != nil}, nil
}

func (b *builder) carbonZones() error {
	b.carbon = map[string]bool{}
	for i := range b.s.CarbonZones {
		cz := &b.s.CarbonZones[i]
		f := fmt.Sprintf("carbonZones[%d]", i)
		switch {
		case cz.Name == "":
			return errAt(cz.pos.line, f+".name", sim.ErrInvalid, "missing")
		case b.carbon[cz.Name]:
			return errAt(cz.pos.at("name"), f+".name", sim.ErrDuplicate, "%q", cz.Name)
		case cz.Grid != "":
			start, err := gridStart(cz, f)
			if err != nil {
				return err
			}
			b.carbon[cz.Name] = true
			b.grids = append(b.grids, gridZone{index: len(b.cluster.CarbonZones), cz: cz, field: f, start: start})
			b.cluster.CarbonZones = append(b.cluster.CarbonZones, sim.CarbonZone{Name: cz.Name})
			continue
		case cz.Start != "" || cz.UTCOffsetHours != 0 || cz.Hours != 0:
			return errAt(cz.pos.at("start"), f+".start", sim.ErrInvalid, "start, utcOffsetHours and hours go with grid")
		case len(cz.Curve) == 0 || len(cz.Curve) > 24*366:
			return errAt(cz.pos.at("curve"), f+".curve", sim.ErrInvalid, "want 1 to %d hourly values, got %d", 24*366, len(cz.Curve))
		}
		for h, v := range cz.Curve {
			if !finite(v) || v < 0 {
				return errAt(cz.pos.at("curve"), fmt.Sprintf("%s.curve[%d]", f, h), sim.ErrInvalid, "%v must be a finite number >= 0", v)
			}
		}
		b.carbon[cz.Name] = true
		b.cluster.CarbonZones = append(b.cluster.CarbonZones, sim.CarbonZone{Name: cz.Name, Curve: cz.Curve})
	}
	return nil
}

func (b *builder) zonesAndNetwork() error {
	b.zones = map[string]bool{}
	for i, z := range b.s.Zones {
		f := fmt.Sprintf("zones[%d]", i)
		switch {
		case z.Name == "":
			return errAt(z.pos.line, f+".name", sim.ErrInvalid, "missing")
		case b.zones[z.Name]:
			return errAt(z.pos.at("name"), f+".name", sim.ErrDuplicate, "%q", z.Name)
		case z.CarbonZone != "" && !b.carbon[z.CarbonZone]:
			return errAt(z.pos.at("carbonZone"), f+".carbonZone", ErrUnknownRef, "carbon zone %q is not declared in carbonZones", z.CarbonZone)
		}
		up, err := uplink(z.Uplink, f)
		if err != nil {
			return err
		}
		b.zones[z.Name] = true
		b.zoneList = append(b.zoneList, z.Name)
		b.cluster.Zones = append(b.cluster.Zones, sim.Zone{Name: z.Name, CarbonZone: z.CarbonZone, Uplink: up})
	}
	if len(b.zoneList) == 0 {
		b.zones["default"] = true
		b.zoneList = []string{"default"}
		b.cluster.Zones = []sim.Zone{{Name: "default"}}
	}
	nw := b.s.Network
	if nw == nil {
		return nil // sim's default network
	}
	def := sim.DefaultNetwork()
	if _, set := nw.pos.keys["intraZoneMs"]; !set {
		nw.IntraZoneMs = def.IntraZoneMs
	}
	if _, set := nw.pos.keys["interZoneMs"]; !set {
		nw.InterZoneMs = def.InterZoneMs
	}
	if !inRange(nw.IntraZoneMs, sim.MaxRTTMs) {
		return errAt(nw.pos.at("intraZoneMs"), "network.intraZoneMs", sim.ErrInvalid, "%v must be finite and in [0, %g]", nw.IntraZoneMs, float64(sim.MaxRTTMs))
	}
	if !inRange(nw.InterZoneMs, sim.MaxRTTMs) {
		return errAt(nw.pos.at("interZoneMs"), "network.interZoneMs", sim.ErrInvalid, "%v must be finite and in [0, %g]", nw.InterZoneMs, float64(sim.MaxRTTMs))
	}
	out := sim.Network{IntraZoneMs: nw.IntraZoneMs, InterZoneMs: nw.InterZoneMs}
	for i, p := range nw.Pairs {
		f := fmt.Sprintf("network.pairs[%d]", i)
		switch {
		case !b.zones[p.A]:
			return errAt(p.pos.at("a"), f+".a", ErrUnknownRef, "zone %q", p.A)
		case !b.zones[p.B]:
			return errAt(p.pos.at("b"), f+".b", ErrUnknownRef, "zone %q", p.B)
		case !inRange(p.Ms, sim.MaxRTTMs):
			return errAt(p.pos.at("ms"), f+".ms", sim.ErrInvalid, "%v must be finite and in [0, %g]", p.Ms, float64(sim.MaxRTTMs))
		}
		out.Pairs = append(out.Pairs, sim.ZonePair{A: p.A, B: p.B, Ms: p.Ms})
	}
	b.cluster.Network = &out
	return nil
}

func (b *builder) gpuModels() error {
	b.modelSet = map[string]bool{}
	for i, g := range b.s.GPUModels {
		f := fmt.Sprintf("gpuModels[%d]", i)
		switch {
		case g.Name == "":
			return errAt(g.pos.line, f+".name", sim.ErrInvalid, "missing")
		case b.modelSet[g.Name]:
			return errAt(g.pos.at("name"), f+".name", sim.ErrDuplicate, "%q", g.Name)
		case g.MemoryMiB < 0:
			return errAt(g.pos.at("memoryMiB"), f+".memoryMiB", sim.ErrInvalid, "%d is negative", g.MemoryMiB)
		case !finite(g.Watts) || g.Watts < 0:
			return errAt(g.pos.at("watts"), f+".watts", sim.ErrInvalid, "%v must be finite and >= 0", g.Watts)
		case i >= 64:
			return errAt(g.pos.line, f, sim.ErrInvalid, "at most 64 GPU models")
		}
		b.modelSet[g.Name] = true
		b.models = append(b.models, sim.GPUModel{Name: g.Name, MemoryMiB: g.MemoryMiB, Watts: g.Watts})
	}
	if len(b.models) == 0 {
		b.models = sim.KnownGPUModels()
		for _, m := range b.models {
			b.modelSet[m.Name] = true
		}
	}
	b.cluster.GPUModels = b.models
	return nil
}

// tracePath resolves a trace reference from the scenario.
func (b *builder) tracePath(ref string, line int, field string) (string, error) {
	if strings.HasPrefix(ref, "openb:") {
		return ref, nil
	}
	if b.dir == "" {
		return "", errAt(line, field, ErrUnknownRef, "%q: built-in scenarios may only use embedded traces (openb:NAME)", ref)
	}
	if filepath.IsAbs(ref) {
		return ref, nil
	}
	return filepath.Join(b.dir, ref), nil
}

// traceErr places an error from a trace file under the scenario field that
// named it; the trace's own file and line stay in the wrapped error.
func traceErr(err error, line int, field string) error {
	return &sim.LineError{Line: line, Field: field, Err: err}
}

func (b *builder) nodePools() error {
	if len(b.s.NodePools) == 0 {
		return errAt(b.s.pos.at("nodePools"), "nodePools", sim.ErrInvalid, "a scenario needs at least one node pool")
	}
	names := map[string]bool{}
	for i := range b.s.NodePools {
		p := &b.s.NodePools[i]
		f := fmt.Sprintf("nodePools[%d]", i)
		zones := p.Zones
		if p.Zone != "" {
			if len(zones) > 0 {
				return errAt(p.pos.at("zone"), f+".zone", sim.ErrInvalid, "give zone or zones, not both")
			}
			zones = []string{p.Zone}
		}
		if len(zones) == 0 {
			zones = b.zoneList[:1]
		}
		for j, z := range zones {
			if !b.zones[z] {
				return errAt(p.pos.at("zones"), fmt.Sprintf("%s.zones[%d]", f, j), ErrUnknownRef, "zone %q is not declared in zones", z)
			}
		}
		if p.CarbonZone != "" && !b.carbon[p.CarbonZone] {
			return errAt(p.pos.at("carbonZone"), f+".carbonZone", ErrUnknownRef, "carbon zone %q is not declared in carbonZones", p.CarbonZone)
		}
		if !inRange(p.FailureRate, sim.MaxFailureDay) {
			return errAt(p.pos.at("failureRate"), f+".failureRate", sim.ErrInvalid, "%v must be finite and in [0, %g]", p.FailureRate, float64(sim.MaxFailureDay))
		}
		if !inRange(p.NICMbps, sim.MaxNetMbps) {
			return errAt(p.pos.at("nicMbps"), f+".nicMbps", sim.ErrInvalid, "%v must be finite and in [0, %g]", p.NICMbps, float64(sim.MaxNetMbps))
		}
		if !inRange(p.BackgroundCPU, sim.MaxBackground) {
			return errAt(p.pos.at("backgroundCPU"), f+".backgroundCPU", sim.ErrInvalid, "%v must be finite and in [0, %g] (a share of the node's CPU)", p.BackgroundCPU, float64(sim.MaxBackground))
		}
		arch := sim.ArchAMD64
		if p.Arch != "" {
			a, err := sim.ParseArch(p.Arch)
			if err != nil || a == sim.ArchAny {
				return errAt(p.pos.at("arch"), f+".arch", sim.ErrInvalid, "%q, want amd64 or arm64", p.Arch)
			}
			arch = a
		}
		var taints []sim.Taint
		for j, t := range p.Taints {
			eff, err := sim.ParseTaintEffect(t.Effect)
			if err != nil {
				return errAt(t.pos.at("effect"), fmt.Sprintf("%s.taints[%d].effect", f, j), sim.ErrInvalid, "%v", err)
			}
			if t.Key == "" {
				return errAt(t.pos.line, fmt.Sprintf("%s.taints[%d].key", f, j), sim.ErrInvalid, "missing")
			}
			taints = append(taints, sim.Taint{Key: t.Key, Value: t.Value, Effect: eff})
		}
		var power *sim.PowerModel // nil: the architecture's default
		if p.Power != nil {
			pw := p.Power
			pm := sim.DefaultPower(arch) // keys left out keep their defaults
			for _, v := range []struct {
				name string
				src  float64
				dst  *float64
			}{{"idleWatts", pw.IdleWatts, &pm.IdleWatts}, {"wattsPerCore", pw.WattsPerCore, &pm.WattsPerCore}, {"wattsPerGPU", pw.WattsPerGPU, &pm.WattsPerGPU}} {
				if _, set := pw.pos.keys[v.name]; !set {
					continue
				}
				if !inRange(v.src, sim.MaxWatts) {
					return errAt(pw.pos.at(v.name), f+".power."+v.name, sim.ErrInvalid, "%v must be finite and in [0, %g]", v.src, float64(sim.MaxWatts))
				}
				*v.dst = v.src
			}
			power = &pm
		}
		var specs []sim.NodeSpec
		if p.OpenB != "" {
			for _, k := range []string{"count", "cpuMilli", "memoryMiB", "gpus", "gpuModel"} {
				if _, set := p.pos.keys[k]; set {
					return errAt(p.pos.at(k), f+"."+k, sim.ErrInvalid, "not allowed with openb: capacity comes from the node list")
				}
			}
			if p.Limit < 0 || p.Stride < 0 {
				return errAt(p.pos.at("limit"), f+".limit", sim.ErrInvalid, "limit and stride must be >= 0")
			}
			path, err := b.tracePath(p.OpenB, p.pos.at("openb"), f+".openb")
			if err != nil {
				return err
			}
			nodes, err := openb.LoadNodes(path, b.models)
			if err != nil {
				return traceErr(err, p.pos.at("openb"), f+".openb")
			}
			stride := max(1, p.Stride)
			for j := 0; j < len(nodes); j += stride {
				specs = append(specs, nodes[j])
				if p.Limit > 0 && len(specs) == p.Limit {
					break
				}
			}
		} else {
			switch {
			case p.Name == "":
				return errAt(p.pos.line, f+".name", sim.ErrInvalid, "a pool needs a name (its nodes are NAME-0, NAME-1, ...)")
			case p.Count <= 0 || p.Count > MaxNodes:
				return errAt(p.pos.at("count"), f+".count", sim.ErrInvalid, "%d, want 1..%d", p.Count, MaxNodes)
			case p.CPUMilli <= 0 || p.CPUMilli > sim.MaxQuantity:
				return errAt(p.pos.at("cpuMilli"), f+".cpuMilli", sim.ErrInvalid, "%d, want > 0 (at most %d)", p.CPUMilli, int64(sim.MaxQuantity))
			case p.MemoryMiB <= 0 || p.MemoryMiB > sim.MaxQuantity:
				return errAt(p.pos.at("memoryMiB"), f+".memoryMiB", sim.ErrInvalid, "%d, want > 0 (at most %d)", p.MemoryMiB, int64(sim.MaxQuantity))
			case p.GPUs < 0 || p.GPUs > sim.MaxGPUsPerNode:
				return errAt(p.pos.at("gpus"), f+".gpus", sim.ErrInvalid, "%d, want 0..%d", p.GPUs, sim.MaxGPUsPerNode)
			case p.GPUs > 0 && !b.modelSet[p.GPUModel]:
				return errAt(p.pos.at("gpuModel"), f+".gpuModel", sim.ErrUnknownModel, "%q (declare it in gpuModels)", p.GPUModel)
			case p.GPUs == 0 && p.GPUModel != "":
				return errAt(p.pos.at("gpuModel"), f+".gpuModel", sim.ErrInvalid, "%q given for a pool without gpus", p.GPUModel)
			case p.Limit != 0 || p.Stride != 0:
				return errAt(p.pos.at("limit"), f+".limit", sim.ErrInvalid, "limit and stride only apply to openb pools")
			}
			for j := range p.Count {
				specs = append(specs, sim.NodeSpec{Name: fmt.Sprintf("%s-%d", p.Name, j), CPU: p.CPUMilli, Memory: p.MemoryMiB, GPUs: p.GPUs, GPUModel: p.GPUModel})
			}
		}
		for j := range specs {
			n := &specs[j]
			if names[n.Name] {
				return errAt(p.pos.line, f, sim.ErrDuplicate, "node %q appears twice in the scenario", n.Name)
			}
			names[n.Name] = true
			n.Arch, n.Zone, n.CarbonZone, n.Labels, n.Taints, n.FailureRate, n.Power = arch, zones[j%len(zones)], p.CarbonZone, p.Labels, taints, p.FailureRate, power
			n.NICMbps, n.Background = p.NICMbps, p.BackgroundCPU
		}
		b.cluster.Nodes = append(b.cluster.Nodes, specs...)
		if len(b.cluster.Nodes) > MaxNodes {
			return errAt(p.pos.line, f, ErrTooLarge, "more than %d nodes", MaxNodes)
		}
	}
	return nil
}

// podSpec turns a template into a spec, validating each field at its line.
func (b *builder) podSpec(t *PodTemplate, name, f string) (sim.PodSpec, error) {
	ps := sim.PodSpec{Name: name, CPU: t.CPUMilli, Memory: t.MemoryMiB, GPUs: t.GPUs, GPUMilli: t.GPUMilli, Priority: t.Priority, CPUUsage: t.Usage, CPULimit: t.CPULimitMilli, NodeSelector: t.NodeSelector,
		MemUsage: t.MemUsage, Profile: t.Profile, Interference: t.Interference, NetMbps: t.NetMbps}
	check := []struct {
		bad   bool
		field string
		msg   string
	}{
		{t.CPUMilli < 0, "cpuMilli", fmt.Sprintf("%d is negative", t.CPUMilli)},
		{t.MemoryMiB < 0, "memoryMiB", fmt.Sprintf("%d is negative", t.MemoryMiB)},
		{t.CPUMilli > sim.MaxQuantity, "cpuMilli", fmt.Sprintf("%d exceeds %d", t.CPUMilli, int64(sim.MaxQuantity))},
		{t.MemoryMiB > sim.MaxQuantity, "memoryMiB", fmt.Sprintf("%d exceeds %d", t.MemoryMiB, int64(sim.MaxQuantity))},
		{t.GPUs < 0 || t.GPUs > sim.MaxGPUsPerNode, "gpus", fmt.Sprintf("%d, want 0..%d", t.GPUs, sim.MaxGPUsPerNode)},
		{t.GPUs > 0 && (t.GPUMilli <= 0 || t.GPUMilli > sim.MilliGPU), "gpuMilli", fmt.Sprintf("%d, want 1..%d for a pod with gpus", t.GPUMilli, sim.MilliGPU)},
		{t.GPUs == 0 && t.GPUMilli != 0, "gpuMilli", fmt.Sprintf("%d given for a pod without gpus", t.GPUMilli)},
		{t.GPUs > 1 && t.GPUMilli != sim.MilliGPU, "gpuMilli", fmt.Sprintf("%d, but a pod with %d gpus takes whole gpus (%d)", t.GPUMilli, t.GPUs, sim.MilliGPU)},
		{t.GPUs == 0 && len(t.GPUSpec) > 0, "gpuSpec", "given for a pod without gpus"},
		{!finite(t.Usage) || t.Usage < 0 || t.Usage > 64, "usage", fmt.Sprintf("%v, want a share of the request in [0, 64]", t.Usage)},
		{t.CPULimitMilli < 0, "cpuLimitMilli", fmt.Sprintf("%d is negative", t.CPULimitMilli)},
		{!inRange(t.UsageSpread, MaxUsageSpread), "usageSpread", fmt.Sprintf("%v, want a lognormal sigma in [0, %d]", t.UsageSpread, MaxUsageSpread)},
		{!inRange(t.MemUsage, 64), "memUsage", fmt.Sprintf("%v, want a share of the request in [0, 64]", t.MemUsage)},
		{!inRange(t.Interference, 4), "interference", fmt.Sprintf("%v, want [0, 4]", t.Interference)},
		{!inRange(t.NetMbps, sim.MaxNetMbps), "netMbps", fmt.Sprintf("%v, want [0, %g] Mbit/s", t.NetMbps, float64(sim.MaxNetMbps))},
		{t.Profile != "" && !b.profiles[t.Profile], "profile", fmt.Sprintf("%q is not declared in loadProfiles", t.Profile)},
	}
	for _, c := range check {
		if c.bad {
			return ps, errAt(t.pos.at(c.field), f+"."+c.field, sim.ErrInvalid, "%s", c.msg)
		}
	}
	for j, m := range t.GPUSpec {
		if !b.modelSet[m] {
			return ps, errAt(t.pos.at("gpuSpec"), fmt.Sprintf("%s.gpuSpec[%d]", f, j), sim.ErrUnknownModel, "%q", m)
		}
	}
	ps.GPUSpec = t.GPUSpec
	var err error
	if ps.QoS, err = sim.ParseQoS(t.QoS); err != nil {
		return ps, errAt(t.pos.at("qos"), f+".qos", sim.ErrInvalid, "%v", err)
	}
	if ps.Arch, err = sim.ParseArch(t.Arch); err != nil {
		return ps, errAt(t.pos.at("arch"), f+".arch", sim.ErrInvalid, "%v", err)
	}
	for j, tol := range t.Tolerations {
		tf := fmt.Sprintf("%s.tolerations[%d]", f, j)
		st := sim.Toleration{Key: tol.Key, Value: tol.Value}
		switch tol.Operator {
		case "", "Equal":
		case "Exists":
			st.Exists = true
		default:
			return ps, errAt(tol.pos.at("operator"), tf+".operator", sim.ErrInvalid, "%q, want Equal or Exists", tol.Operator)
		}
		if tol.Effect == "" {
			st.AnyEffect = true
		} else if st.Effect, err = sim.ParseTaintEffect(tol.Effect); err != nil {
			return ps, errAt(tol.pos.at("effect"), tf+".effect", sim.ErrInvalid, "%v", err)
		}
		ps.Tolerations = append(ps.Tolerations, st)
	}
	return ps, nil
}

func (b *builder) addPod(ps sim.PodSpec, line int, field string) error {
	if err := ps.Validate(); err != nil {
		return &sim.LineError{Line: line, Field: field, Err: err}
	}
	if len(b.workload.Pods) >= MaxPods {
		return errAt(line, field, ErrTooLarge, "more than %d pods", MaxPods)
	}
	b.workload.Pods = append(b.workload.Pods, ps)
	return nil
}

func (b *builder) workloadPods() error {
	w := &b.s.Workload
	b.services = map[string]bool{}
	names := map[string]bool{}
	add := func(ps sim.PodSpec, line int, field string) error {
		if names[ps.Name] {
			return errAt(line, field+".name", sim.ErrDuplicate, "pod %q appears twice in the workload", ps.Name)
		}
		names[ps.Name] = true
		return b.addPod(ps, line, field)
	}
	if w.OpenB != "" {
		path, err := b.tracePath(w.OpenB, w.pos.at("openb"), "workload.openb")
		if err != nil {
			return err
		}
		pl, err := openb.LoadPods(path, b.models)
		if err != nil {
			return traceErr(err, w.pos.at("openb"), "workload.openb")
		}
		if w.Limit < 0 {
			return errAt(w.pos.at("limit"), "workload.limit", sim.ErrInvalid, "%d is negative", w.Limit)
		}
		pods := pl.Pods
		if w.Limit > 0 && w.Limit < len(pods) {
			pods = pods[:w.Limit]
		}
		for _, ps := range pods {
			if err := add(ps, w.pos.at("openb"), "workload.openb"); err != nil {
				return err
			}
		}
		b.workload.Untimed = !pl.Timed
	}
	for i := range w.Pods {
		p := &w.Pods[i]
		f := fmt.Sprintf("workload.pods[%d]", i)
		if p.Name == "" {
			return errAt(p.pos.line, f+".name", sim.ErrInvalid, "missing")
		}
		ps, err := b.podSpec(&p.PodTemplate, p.Name, f)
		if err != nil {
			return err
		}
		b.spread(&ps, p.UsageSpread)
		ps.Service = p.Service
		ps.Create = p.Create.Seconds()
		ps.Delete = sim.NoDeletion
		if p.Delete != nil {
			ps.Delete = p.Delete.Seconds()
			if ps.Delete < ps.Create {
				return errAt(p.pos.at("delete"), f+".delete", sim.ErrInvalid, "%ds is before create %ds", ps.Delete, ps.Create)
			}
		}
		if p.Service != "" {
			b.services[p.Service] = true
		}
		if err := add(ps, p.pos.line, f); err != nil {
			return err
		}
	}
	for i := range w.Services {
		s := &w.Services[i]
		f := fmt.Sprintf("workload.services[%d]", i)
		switch {
		case s.Name == "":
			return errAt(s.pos.line, f+".name", sim.ErrInvalid, "missing")
		case b.services[s.Name] && s.Replicas > 0:
			return errAt(s.pos.at("name"), f+".name", sim.ErrDuplicate, "service %q", s.Name)
		case s.Replicas < 0 || s.Replicas > 10000:
			return errAt(s.pos.at("replicas"), f+".replicas", sim.ErrInvalid, "%d, want 0..10000", s.Replicas)
		}
		b.services[s.Name] = true
		b.workload.Services = append(b.workload.Services, s.Name)
		for r := range s.Replicas {
			ps, err := b.podSpec(&s.Template, fmt.Sprintf("%s-%d", s.Name, r), f+".template")
			if err != nil {
				return err
			}
			b.spread(&ps, s.Template.UsageSpread)
			ps.Service, ps.Create, ps.Delete = s.Name, s.Start.Seconds(), sim.NoDeletion
			if err := add(ps, s.pos.line, f); err != nil {
				return err
			}
		}
	}
	if err := b.apps(add); err != nil {
		return err
	}
	if w.Generator != nil {
		seed := b.s.Seed
		pods, err := b.generate(w.Generator, seed)
		if err != nil {
			return err
		}
		for _, gp := range pods {
			if err := add(gp.spec, gp.line, gp.field); err != nil {
				return err
			}
		}
	}
	if len(b.workload.Pods) == 0 {
		return errAt(w.pos.line, "workload", sim.ErrInvalid, "the workload has no pods (give openb, pods, services or generator)")
	}
	return nil
}

func (b *builder) dependencies() error {
	for i, d := range b.s.Dependencies {
		f := fmt.Sprintf("dependencies[%d]", i)
		switch {
		case !b.services[d.From]:
			return errAt(d.pos.at("from"), f+".from", ErrUnknownRef, "service %q is not in the workload", d.From)
		case !b.services[d.To]:
			return errAt(d.pos.at("to"), f+".to", ErrUnknownRef, "service %q is not in the workload", d.To)
		case !inRange(d.CallsPerSecond, sim.MaxCallRate):
			return errAt(d.pos.at("callsPerSecond"), f+".callsPerSecond", sim.ErrInvalid, "%v must be finite and in [0, %g]", d.CallsPerSecond, float64(sim.MaxCallRate))
		}
		b.workload.Dependencies = append(b.workload.Dependencies, sim.Dependency{From: d.From, To: d.To, CallsPerSecond: d.CallsPerSecond})
	}
	return nil
}

// backgroundLoad draws the nodes' background load (Options.Background,
// else the scenario's backgroundLoad, validated either way) from the
// scenario's seed.
func (b *builder) backgroundLoad() error {
	bl, err := b.s.BackgroundLoad.Model()
	if err != nil {
		return &sim.LineError{Line: b.s.BackgroundLoad.pos.line, Field: "backgroundLoad", Err: err}
	}
	if b.background != nil {
		if err := b.background.Validate(); err != nil {
			return fmt.Errorf("background load option: %w", err)
		}
		bl = b.background
	}
	if bl != nil {
		bl.Apply(b.cluster.Nodes, b.s.Seed)
	}
	return nil
}
