package trace

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/scenario"
)

// ErrEmpty is returned when the store has nothing to export.
var ErrEmpty = errors.New("trace: nothing recorded to export")

// ExportOptions choose what Export writes. The zero value exports
// everything retained, named "site-trace".
type ExportOptions struct {
	// Name and Description of the scenario (default name "site-trace").
	Name, Description string
	// Since starts the window (zero: the first recorded arrival); pods
	// created before it and still running then are created at time 0.
	Since time.Time
	// Until ends it (zero: now); pods running then never leave.
	Until time.Time
}

// ExportStats describes an exported scenario.
type ExportStats struct {
	Start, End   time.Time
	Nodes, Pods  int
	Services     int
	Dependencies int
	// Measured counts pods whose CPU usage comes from measurements (their
	// own annotation or their node's telemetry); the others get the
	// simulator's usage model.
	Measured int
}

// The scenario document Export writes (sim/scenario reads it; fields as
// in docs/scenario.md).
type scenarioOut struct {
	APIVersion   string      `yaml:"apiVersion"`
	Kind         string      `yaml:"kind"`
	Name         string      `yaml:"name"`
	Description  string      `yaml:"description,omitempty"`
	Zones        []zoneOut   `yaml:"zones,omitempty"`
	GPUModels    []gpuOut    `yaml:"gpuModels,omitempty"`
	NodePools    []poolOut   `yaml:"nodePools"`
	Workload     workloadOut `yaml:"workload"`
	Dependencies []depOut    `yaml:"dependencies,omitempty"`
}

type zoneOut struct {
	Name string `yaml:"name"`
}

type gpuOut struct {
	Name      string  `yaml:"name"`
	MemoryMiB int64   `yaml:"memoryMiB"`
	Watts     float64 `yaml:"watts,omitempty"`
}

type poolOut struct {
	Name      string `yaml:"name"`
	Count     int    `yaml:"count"`
	Zone      string `yaml:"zone,omitempty"`
	Arch      string `yaml:"arch,omitempty"`
	CPUMilli  int64  `yaml:"cpuMilli"`
	MemoryMiB int64  `yaml:"memoryMiB"`
	GPUs      int32  `yaml:"gpus,omitempty"`
	GPUModel  string `yaml:"gpuModel,omitempty"`
}

type workloadOut struct {
	Pods []podOut `yaml:"pods"`
}

type podOut struct {
	Name          string   `yaml:"name"`
	Service       string   `yaml:"service,omitempty"`
	Create        int64    `yaml:"create"`
	Delete        *int64   `yaml:"delete,omitempty"`
	CPUMilli      int64    `yaml:"cpuMilli"`
	MemoryMiB     int64    `yaml:"memoryMiB"`
	GPUs          int32    `yaml:"gpus,omitempty"`
	GPUMilli      int64    `yaml:"gpuMilli,omitempty"`
	GPUSpec       []string `yaml:"gpuSpec,omitempty"`
	QoS           string   `yaml:"qos"`
	Priority      int32    `yaml:"priority,omitempty"`
	Arch          string   `yaml:"arch,omitempty"`
	Usage         float64  `yaml:"usage,omitempty"`
	CPULimitMilli int64    `yaml:"cpuLimitMilli,omitempty"`
}

type depOut struct {
	From           string  `yaml:"from"`
	To             string  `yaml:"to"`
	CallsPerSecond float64 `yaml:"callsPerSecond"`
}

// tracedPod is a pod as the export sees it.
type tracedPod struct {
	Pod
	created, deleted time.Time // deleted zero: still running
	node             string
}

type usageSample struct {
	t     time.Time
	share float64 // CPU used / CPU requested on the node
}

// Export writes the trace as a simulator scenario (docs/scenario.md):
// the current nodes as node pools of identical nodes, the pods that ran in
// the window with their requests, creation and deletion times (seconds
// from the window's start) and CPU usage, and the service dependency
// graph with call rates. The document loads with sim/scenario (Export
// checks that before returning it): `edgectl sim --scenario` replays it,
// `edgectl train` trains on it.
//
// A pod's usage is its own edgesched.io/cpu-usage when given, else the
// mean over its node's telemetry samples while it ran of node CPU used /
// CPU requested on the node (clamped to [0, 64]); with neither it is left
// to the simulator's usage model. A dependency's rate is, summed over the
// pod pairs of the two services, the mean of each pair's recorded rates
// in the window.
func (s *Store) Export(opt ExportOptions) ([]byte, ExportStats, error) {
	var st ExportStats
	if opt.Name == "" {
		opt.Name = "site-trace"
	}
	until := opt.Until
	if until.IsZero() {
		until = s.cfg.Now()
	}
	nodes, err := s.Nodes()
	if err != nil {
		return nil, st, err
	}
	pods := map[string]*tracedPod{} // by UID
	var order []string
	usage := map[string][]usageSample{}
	type pair struct{ src, dst PodRef }
	rates := map[pair][]float64{}
	err = s.Events(func(_ uint64, e Event) error {
		switch e.Kind {
		case PodArrival:
			if _, ok := pods[e.Pod.UID]; !ok {
				pods[e.Pod.UID] = &tracedPod{Pod: *e.Pod, created: e.Time}
				order = append(order, e.Pod.UID)
			}
		case PodBinding:
			if p := pods[e.Pod.UID]; p != nil && !e.Time.After(until) {
				p.node = e.Pod.Node
			}
		case PodDeletion:
			if p := pods[e.Pod.UID]; p != nil {
				p.deleted = e.Time
			}
		case NodeUsage:
			if u := e.Usage; u.RequestedCPUMilli > 0 {
				usage[u.Node] = append(usage[u.Node], usageSample{e.Time, min(u.CPU*float64(u.CPUMilli)/float64(u.RequestedCPUMilli), maxShare)})
			}
		case EdgeRate:
			if !e.Time.Before(opt.Since) && !e.Time.After(until) {
				k := pair{e.Edge.Src, e.Edge.Dst}
				rates[k] = append(rates[k], e.Edge.CallsPerSecond)
			}
		}
		return nil
	})
	if err != nil {
		return nil, st, err
	}
	live, err := s.LivePods()
	if err != nil {
		return nil, st, err
	}
	for _, e := range live { // running pods whose arrival retention pruned
		if p, ok := pods[e.Pod.UID]; ok {
			p.deleted = time.Time{}
			if p.node == "" {
				p.node = e.Pod.Node
			}
			continue
		}
		pods[e.Pod.UID] = &tracedPod{Pod: *e.Pod, created: e.Time, node: e.Pod.Node}
		order = append(order, e.Pod.UID)
	}

	start := opt.Since
	if start.IsZero() {
		for _, uid := range order {
			if p := pods[uid]; start.IsZero() || p.created.Before(start) {
				start = p.created
			}
		}
	}
	var kept []*tracedPod
	for _, uid := range order {
		p := pods[uid]
		if p.created.After(until) || (!p.deleted.IsZero() && p.deleted.Before(start)) {
			continue
		}
		kept = append(kept, p)
	}
	if len(nodes) == 0 || len(kept) == 0 {
		return nil, st, fmt.Errorf("%w: %d nodes and %d pods in the window", ErrEmpty, len(nodes), len(kept))
	}
	st.Start, st.End = start, until

	doc := scenarioOut{APIVersion: scenario.APIVersion, Kind: scenario.Kind, Name: opt.Name, Description: opt.Description}
	if doc.Description == "" {
		doc.Description = fmt.Sprintf("workload trace recorded by edge-agent from %s to %s", start.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339))
	}
	models := map[string]bool{}
	doc.Zones, doc.NodePools, st.Nodes = pools(nodes, models)

	secs := func(t time.Time) int64 {
		d := t.Sub(start)
		if d <= 0 {
			return 0
		}
		return min(int64(math.Ceil(d.Seconds())), sim.MaxTime)
	}
	slices.SortStableFunc(kept, func(a, b *tracedPod) int {
		return cmp.Or(a.created.Compare(b.created), cmp.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name))
	})
	names := map[string]int{}
	services := map[PodRef]string{}
	for _, p := range kept {
		name := p.Namespace + "/" + p.Name
		if n := names[name]; n > 0 {
			name += "#" + strconv.Itoa(n+1) // the same name used again (a StatefulSet's pod re-created)
		}
		names[p.Namespace+"/"+p.Name]++
		po := podOut{Name: name, Service: p.Service, Create: secs(p.created), CPUMilli: p.CPUMilli, MemoryMiB: p.MemoryMiB,
			GPUs: p.GPUs, GPUMilli: p.GPUMilli, GPUSpec: p.GPUModels, QoS: p.QoS.String(), Priority: p.Priority, CPULimitMilli: p.CPULimitMilli}
		if p.Arch != sim.ArchAny {
			po.Arch = p.Arch.String()
		}
		if !p.deleted.IsZero() && !p.deleted.After(until) {
			d := max(secs(p.deleted), po.Create)
			po.Delete = &d
		}
		for _, m := range p.GPUModels {
			models[m] = true
		}
		po.Usage = p.CPUUsage
		if po.Usage == 0 {
			po.Usage = meanUsage(usage[p.node], p.created, p.deleted, until)
		}
		if po.Usage > 0 {
			po.Usage = math.Round(po.Usage*1e4) / 1e4
			st.Measured++
		}
		if p.Service != "" {
			services[PodRef{p.Namespace, p.Name}] = p.Service
		}
		doc.Workload.Pods = append(doc.Workload.Pods, po)
	}
	st.Pods = len(doc.Workload.Pods)

	depRate := map[[2]string]float64{}
	for k, rs := range rates {
		from, to := services[k.src], services[k.dst]
		if from == "" || to == "" {
			continue
		}
		var sum float64
		for _, r := range rs {
			sum += r
		}
		depRate[[2]string{from, to}] += sum / float64(len(rs))
	}
	for k, r := range depRate {
		doc.Dependencies = append(doc.Dependencies, depOut{From: k[0], To: k[1], CallsPerSecond: math.Round(min(r, maxRate)*1000) / 1000})
	}
	slices.SortFunc(doc.Dependencies, func(a, b depOut) int { return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To)) })
	st.Dependencies = len(doc.Dependencies)
	svcSet := map[string]bool{}
	for _, s := range services {
		svcSet[s] = true
	}
	st.Services = len(svcSet)
	doc.GPUModels = gpuModels(models)

	out, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, st, fmt.Errorf("render scenario: %w", err)
	}
	if _, err := scenario.Parse(out, opt.Name+".yaml", ""); err != nil {
		return nil, st, fmt.Errorf("exported scenario does not load: %w", err)
	}
	return out, st, nil
}

// meanUsage averages a node's usage samples over [from, to] (to zero:
// until).
func meanUsage(samples []usageSample, from, to, until time.Time) float64 {
	if to.IsZero() {
		to = until
	}
	var sum float64
	var n int
	for _, s := range samples {
		if !s.t.Before(from) && !s.t.After(to) {
			sum += s.share
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// pools groups identical nodes (capacity, GPUs, zone, architecture) into
// pools and declares their zones; models collects their GPU models.
func pools(nodes []Event, models map[string]bool) ([]zoneOut, []poolOut, int) {
	type key struct {
		cpu, mem int64
		gpus     int32
		model    string
		zone     string
		arch     sim.Arch
	}
	counts := map[key]int{}
	zones := map[string]bool{}
	n := 0
	for _, e := range nodes {
		x := e.Node
		if x.CPUMilli <= 0 || x.MemoryMiB <= 0 {
			continue // nothing to place on
		}
		zone := x.Zone
		if zone == "" {
			zone = "default"
		}
		k := key{x.CPUMilli, x.MemoryMiB, x.GPUs, x.GPUModel, zone, x.Arch}
		if x.GPUs == 0 {
			k.model = ""
		} else {
			models[x.GPUModel] = true
		}
		counts[k]++
		zones[zone] = true
		n++
	}
	keys := make([]key, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.zone, b.zone), cmp.Compare(a.cpu, b.cpu), cmp.Compare(a.mem, b.mem), cmp.Compare(a.gpus, b.gpus),
			cmp.Compare(a.model, b.model), cmp.Compare(a.arch, b.arch))
	})
	var out []poolOut
	for i, k := range keys {
		p := poolOut{Name: fmt.Sprintf("pool-%d", i), Count: counts[k], Zone: k.zone, CPUMilli: k.cpu, MemoryMiB: k.mem, GPUs: k.gpus, GPUModel: k.model}
		if k.arch == sim.ArchARM64 {
			p.Arch = k.arch.String()
		}
		out = append(out, p)
	}
	var zs []zoneOut
	for _, z := range slices.Sorted(maps.Keys(zones)) {
		zs = append(zs, zoneOut{Name: z})
	}
	return zs, out, n
}

// gpuModels declares the GPU models when one is not among the
// simulator's known models (declaring any replaces the defaults, so the
// known ones are declared too).
func gpuModels(used map[string]bool) []gpuOut {
	known := map[string]bool{}
	var out []gpuOut
	for _, m := range sim.KnownGPUModels() {
		known[m.Name] = true
		out = append(out, gpuOut{Name: m.Name, MemoryMiB: m.MemoryMiB, Watts: m.Watts})
	}
	extra := false
	for _, m := range slices.Sorted(maps.Keys(used)) {
		if !known[m] {
			out = append(out, gpuOut{Name: m})
			extra = true
		}
	}
	if !extra {
		return nil
	}
	return out
}
