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

	bolt "go.etcd.io/bbolt"
	"go.yaml.in/yaml/v3"

	"github.com/edgesched/edgesched/agent/trace/tracefmt"
	"github.com/edgesched/edgesched/internal/boltkv"
	"github.com/edgesched/edgesched/kubefmt"
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
	// FailureRate is the pool's nodes' edgesched.io/failure-rate.
	FailureRate float64 `yaml:"failureRate,omitempty"`
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
	tracefmt.Pod
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
	out, _, st, err := s.export(opt)
	return out, st, err
}

// ExportLoaded is Export's scenario loaded (sim/scenario.Parse of the
// document Export returns), for the site twin, which trains on it in
// memory, and the document itself.
func (s *Store) ExportLoaded(opt ExportOptions) (*scenario.Loaded, []byte, ExportStats, error) {
	out, l, st, err := s.export(opt)
	return l, out, st, err
}

func (s *Store) export(opt ExportOptions) ([]byte, *scenario.Loaded, ExportStats, error) {
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
		return nil, nil, st, err
	}
	c, err := s.collect(opt.Since, until, true)
	if err != nil {
		return nil, nil, st, err
	}
	start := opt.Since
	if start.IsZero() {
		for _, uid := range c.order {
			if p := c.pods[uid]; start.IsZero() || p.created.Before(start) {
				start = p.created
			}
		}
	}
	kept := c.kept(start, until)
	if len(nodes) == 0 || len(kept) == 0 {
		return nil, nil, st, fmt.Errorf("%w: %d nodes and %d pods in the window", ErrEmpty, len(nodes), len(kept))
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
	names := map[string]int{}
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
			po.Usage = meanUsage(c.usage[p.node], p.created, p.deleted, until)
		}
		if po.Usage > 0 {
			po.Usage = math.Round(po.Usage*1e4) / 1e4
			st.Measured++
		}
		doc.Workload.Pods = append(doc.Workload.Pods, po)
	}
	st.Pods = len(doc.Workload.Pods)

	services := servicesOf(kept)
	for _, d := range serviceRates(c.rates, services) {
		doc.Dependencies = append(doc.Dependencies, depOut{From: d.From, To: d.To, CallsPerSecond: math.Round(min(d.CallsPerSecond, tracefmt.MaxRate)*1000) / 1000})
	}
	st.Dependencies = len(doc.Dependencies)
	svcSet := map[string]bool{}
	for _, s := range services {
		svcSet[s] = true
	}
	st.Services = len(svcSet)
	doc.GPUModels = gpuModels(models)

	out, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, nil, st, fmt.Errorf("render scenario: %w", err)
	}
	l, err := scenario.Parse(out, opt.Name+".yaml", "")
	if err != nil {
		return nil, nil, st, fmt.Errorf("exported scenario does not load: %w", err)
	}
	return out, l, st, nil
}

// ServiceDependencies is the service call graph measured in the window
// [until-window, until]: for every (caller service, callee service), the
// sum over the pod pairs of the two services of the mean of each pair's
// recorded call rates in the window (what Export writes as the scenario's
// dependencies), sorted by (from, to). A pod's service is the one
// recorded with its arrival (kubefmt.ServiceOf); a pod whose lifetime
// does not overlap the window, or that has no service, contributes
// nothing. Rates are capped at kubefmt.MaxCallsPerSecond and edges
// whose rate is not positive are left out, so every edge is one kubefmt.DependencyGraph accepts as to
// its rate. An empty trace gives no edges and no error.
//
// It reads the whole event log in one read transaction (decoding only pod
// arrivals and deletions and the window's call rates): a record that does
// not decode fails it with ErrStore naming its sequence, as Export does.
func (s *Store) ServiceDependencies(window time.Duration, until time.Time) ([]kubefmt.DependencyEdge, error) {
	if window <= 0 {
		return nil, fmt.Errorf("%w: dependency window %v must be positive", ErrConfig, window)
	}
	since := until.Add(-window)
	c, err := s.collect(since, until, false)
	if err != nil {
		return nil, err
	}
	all := serviceRates(c.rates, servicesOf(c.kept(since, until)))
	out := all[:0]
	for _, e := range all {
		if !(e.CallsPerSecond > 0) { // also NaN, which the record format refuses anyway
			continue
		}
		e.CallsPerSecond = min(e.CallsPerSecond, kubefmt.MaxCallsPerSecond)
		out = append(out, e)
	}
	return out, nil
}

// podPair is a caller and a callee pod of the trace's call-rate samples.
type podPair struct{ src, dst tracefmt.PodRef }

// collection is what one walk over the trace gathers for a window.
type collection struct {
	pods  map[string]*tracedPod // by UID
	order []string              // UIDs, first seen first
	usage map[string][]usageSample
	rates map[podPair][]float64 // samples in [since, until]
}

// collect walks the event log and the live pods: every pod's arrival,
// binding (up to until) and deletion, the nodes' usage samples when
// withUsage, and the call-rate samples in [since, until] (since zero:
// from the first). Without withUsage only the records it needs are
// decoded (pod arrivals and deletions, the window's call rates).
func (s *Store) collect(since, until time.Time, withUsage bool) (*collection, error) {
	c := &collection{pods: map[string]*tracedPod{}, usage: map[string][]usageSample{}, rates: map[podPair][]float64{}}
	inWindow := func(t time.Time) bool { return !t.Before(since) && !t.After(until) }
	var want func(k tracefmt.Kind, t int64) bool // nil: every record
	if !withUsage {
		lo, hi := since.UnixNano(), until.UnixNano()
		if since.IsZero() {
			lo = math.MinInt64
		}
		want = func(k tracefmt.Kind, t int64) bool {
			return k == tracefmt.PodArrival || k == tracefmt.PodDeletion || (k == tracefmt.EdgeRate && t >= lo && t <= hi)
		}
	}
	err := s.scan(want, func(e tracefmt.Event) {
		switch e.Kind {
		case tracefmt.PodArrival:
			if _, ok := c.pods[e.Pod.UID]; !ok {
				c.pods[e.Pod.UID] = &tracedPod{Pod: *e.Pod, created: e.Time}
				c.order = append(c.order, e.Pod.UID)
			}
		case tracefmt.PodBinding:
			if p := c.pods[e.Pod.UID]; p != nil && !e.Time.After(until) {
				p.node = e.Pod.Node
			}
		case tracefmt.PodDeletion:
			if p := c.pods[e.Pod.UID]; p != nil {
				p.deleted = e.Time
			}
		case tracefmt.NodeUsage:
			if u := e.Usage; u.RequestedCPUMilli > 0 {
				c.usage[u.Node] = append(c.usage[u.Node], usageSample{e.Time, min(u.CPU*float64(u.CPUMilli)/float64(u.RequestedCPUMilli), tracefmt.MaxShare)})
			}
		case tracefmt.EdgeRate:
			if inWindow(e.Time) {
				k := podPair{e.Edge.Src, e.Edge.Dst}
				c.rates[k] = append(c.rates[k], e.Edge.CallsPerSecond)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	live, err := s.LivePods()
	if err != nil {
		return nil, err
	}
	for _, e := range live { // running pods whose arrival retention pruned
		if p, ok := c.pods[e.Pod.UID]; ok {
			p.deleted = time.Time{}
			if p.node == "" {
				p.node = e.Pod.Node
			}
			continue
		}
		c.pods[e.Pod.UID] = &tracedPod{Pod: *e.Pod, created: e.Time, node: e.Pod.Node}
		c.order = append(c.order, e.Pod.UID)
	}
	return c, nil
}

// scan calls fn with every event in recording order whose kind and time
// (read from the record's header) want accepts (want nil: every event),
// except the samples and flows dated more than
// kubefmt.MaxTelemetryClockSkew ahead of the store's clock. A record that
// does not decode, or whose header cannot be read, stops the walk with an
// ErrStore error naming its sequence.
func (s *Store) scan(want func(k tracefmt.Kind, t int64) bool, fn func(tracefmt.Event)) error {
	horizon := s.horizon()
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEvents).ForEach(func(k, v []byte) error {
			if ahead(v, horizon) || (want != nil && unwanted(v, want)) {
				return nil
			}
			e, err := tracefmt.DecodeEvent(v)
			if err != nil {
				return fmt.Errorf("%w: event %d: %w", ErrStore, boltkv.FromU64(k), err)
			}
			fn(e)
			return nil
		})
	})
}

// unwanted reports whether record v has a well-formed header (this
// format's version, a known kind, its time) that want refuses; a record
// whose header is not well-formed is decoded (and refused) by scan.
func unwanted(v []byte, want func(k tracefmt.Kind, t int64) bool) bool {
	kind, t, ok := tracefmt.RecordHeader(v)
	return ok && !want(kind, t)
}

// kept returns the pods that ran in [start, until] (created by until, not
// deleted before start), by creation time, then namespace/name.
func (c *collection) kept(start, until time.Time) []*tracedPod {
	var kept []*tracedPod
	for _, uid := range c.order {
		p := c.pods[uid]
		if p.created.After(until) || (!p.deleted.IsZero() && p.deleted.Before(start)) {
			continue
		}
		kept = append(kept, p)
	}
	slices.SortStableFunc(kept, func(a, b *tracedPod) int {
		return cmp.Or(a.created.Compare(b.created), cmp.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name))
	})
	return kept
}

// servicesOf maps the pods (in kept's order) to their services; of two
// pods of one name (a StatefulSet's pod re-created), the later one's
// service wins, unless it has none.
func servicesOf(kept []*tracedPod) map[tracefmt.PodRef]string {
	services := map[tracefmt.PodRef]string{}
	for _, p := range kept {
		if p.Service != "" {
			services[tracefmt.PodRef{Namespace: p.Namespace, Name: p.Name}] = p.Service
		}
	}
	return services
}

// serviceRates sums per (caller service, callee service) the mean of each
// pod pair's samples, leaving out pairs with a pod of no known service;
// sorted by (from, to), not capped. The pairs are added in a fixed order,
// so the same samples always give the same sums to the last bit.
func serviceRates(rates map[podPair][]float64, services map[tracefmt.PodRef]string) []kubefmt.DependencyEdge {
	pairs := slices.SortedFunc(maps.Keys(rates), func(a, b podPair) int {
		return cmp.Or(cmp.Compare(a.src.Namespace, b.src.Namespace), cmp.Compare(a.src.Name, b.src.Name),
			cmp.Compare(a.dst.Namespace, b.dst.Namespace), cmp.Compare(a.dst.Name, b.dst.Name))
	})
	sums := map[[2]string]float64{}
	for _, k := range pairs {
		from, to := services[k.src], services[k.dst]
		rs := rates[k]
		if from == "" || to == "" || len(rs) == 0 {
			continue
		}
		var sum float64
		for _, r := range rs {
			sum += r
		}
		sums[[2]string{from, to}] += sum / float64(len(rs))
	}
	out := make([]kubefmt.DependencyEdge, 0, len(sums))
	for k, r := range sums {
		out = append(out, kubefmt.DependencyEdge{From: k[0], To: k[1], CallsPerSecond: r})
	}
	slices.SortFunc(out, func(a, b kubefmt.DependencyEdge) int {
		return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
	})
	return out
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

// pools groups identical nodes (capacity, GPUs, zone, architecture,
// failure rate) into pools and declares their zones; models collects
// their GPU models.
func pools(nodes []tracefmt.Event, models map[string]bool) ([]zoneOut, []poolOut, int) {
	type key struct {
		cpu, mem int64
		gpus     int32
		model    string
		zone     string
		arch     sim.Arch
		failure  float64
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
		k := key{x.CPUMilli, x.MemoryMiB, x.GPUs, x.GPUModel, zone, x.Arch, x.FailureRate}
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
			cmp.Compare(a.model, b.model), cmp.Compare(a.arch, b.arch), cmp.Compare(a.failure, b.failure))
	})
	var out []poolOut
	for i, k := range keys {
		p := poolOut{Name: fmt.Sprintf("pool-%d", i), Count: counts[k], Zone: k.zone, CPUMilli: k.cpu, MemoryMiB: k.mem, GPUs: k.gpus, GPUModel: k.model,
			FailureRate: k.failure}
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
