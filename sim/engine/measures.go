package engine

import (
	"math"
	"slices"
	"time"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/disrupt"
	"github.com/edgesched/edgesched/sim/internal/stats"
)

// MeasureInfo documents one measure of a Result.
type MeasureInfo struct {
	Name, Unit, Description string
	// Modes lists the modes that report it ("" for both).
	Modes string
}

// Measures lists every measure a run can report, in display order. The
// list is the reference for docs/sim.md and the comparison table.
func Measures() []MeasureInfo {
	return []MeasureInfo{
		{"pods_arrived", "pods", "pods that arrived", ""},
		{"pods_placed", "pods", "pods that were bound to a node", ""},
		{"pods_failed", "pods", "pods never placed (inflate: no node fitted; replay: deadline passed while pending)", ""},
		{"pods_pending", "pods", "pods still waiting when the trace ends (replay)", "replay"},
		{"failure_rate", "share", "pods_failed / pods_arrived", ""},
		{"failures_with_room", "share", "share of failed pods whose eligible nodes (architecture, GPU model, selector, taints, up) had, summed, the free CPU, memory and GPU they asked for when they first fitted no node: failures of fragmentation; the rest met full nodes, or no eligible node up (absent without failures)", ""},
		{"alloc_cpu", "share", "CPU requested by placed pods / CPU requested by arrived pods", ""},
		{"alloc_mem", "share", "memory requested by placed pods / memory requested by arrived pods", ""},
		{"alloc_gpu", "share", "GPU requested by placed pods / GPU requested by arrived pods", ""},
		{"unallocated_gpu_share", "share", "1 - allocated GPU / GPU capacity at the end of the sweep", "inflate"},
		{"unallocated_gpu_share_at_100", "share", "1 - allocated GPU / GPU capacity when arrived GPU demand first reaches 100% of capacity (the FGD paper's headline)", "inflate"},
		{"failed_pods_at_100", "pods", "pods failed when arrived GPU demand first reaches 100% of capacity", "inflate"},
		{"frag_gpu_share_at_100", "share", "fragmented GPU (FGD measure) / GPU capacity at 100% arrived demand", "inflate"},
		{"fragmentation", "share", "mean over samples of fragmented capacity / capacity: frag_gpu_share when the typical pod needs a GPU (Env.GPUPrimary), frag_cpu_share otherwise", ""},
		{"frag_gpu_share", "share", "mean over samples of FGD's fragmented GPU / GPU capacity", ""},
		{"frag_cpu_share", "share", "mean over samples of free CPU unusable by the typical pod / CPU capacity", ""},
		{"util_alloc_cpu_mean", "share", "mean over samples of requested CPU / CPU capacity", ""},
		{"util_alloc_cpu_p95", "share", "95th percentile over samples of requested CPU / CPU capacity", ""},
		{"util_alloc_mem_mean", "share", "mean over samples of requested memory / memory capacity", ""},
		{"util_alloc_mem_p95", "share", "95th percentile over samples of requested memory / memory capacity", ""},
		{"util_alloc_gpu_mean", "share", "mean over samples of allocated GPU / GPU capacity", ""},
		{"util_alloc_gpu_p95", "share", "95th percentile over samples of allocated GPU / GPU capacity", ""},
		{"util_used_cpu_mean", "share", "mean over samples of used CPU (requests x usage) / CPU capacity", ""},
		{"util_used_cpu_p95", "share", "95th percentile over samples of used CPU / CPU capacity", ""},
		{"util_used_mem_mean", "share", "mean over samples of used memory / memory capacity", ""},
		{"util_used_mem_p95", "share", "95th percentile over samples of used memory / memory capacity", ""},
		{"util_active_cpu_mean", "share", "mean over samples of used CPU / CPU capacity of the nodes running at least one pod (the rest could sleep)", ""},
		{"nodes_active_mean", "nodes", "mean over samples of the nodes running at least one pod", ""},
		{"latency_mean_ms", "ms", "mean per-pod latency proxy over samples: base x 1/(1-rho) of the node's CPU use + call-rate-weighted RTT to dependencies", ""},
		{"latency_p95_ms", "ms", "95th percentile of the per-pod latency proxy over samples", ""},
		{"latency_capped_share", "share", "share of the pod samples on nodes at the latency proxy's utilisation cap (MaxUtil); above 0.05 the p95 is at least the cap, whatever the placement of the rest", ""},
		{"cross_zone_traffic", "share", "mean over samples of the share of dependency call rate that crosses zones", ""},
		{"carbon_g_per_h", "gCO2/h", "mean over samples of the emission rate of placed work (replay: curve at the hour; inflate: daily mean curve)", ""},
		{"carbon_g", "gCO2", "emissions of placed work integrated over the trace", "replay"},
		{"carbon_g_per_kwh", "gCO2/kWh", "carbon intensity of placed work: carbon_g over the energy of placed work (where and when it ran, not how much of it ran)", "replay"},
		{"pods_evicted", "pods", "evictions of running pods by node failures (scenarios with disruptions)", "replay"},
		{"pods_lost", "pods", "evicted pods not placed again before their end (scenarios with disruptions)", "replay"},
		{"node_failures", "events", "node failures during the trace (scenarios with disruptions)", "replay"},
		{"uplink_flaps", "events", "uplink flaps during the trace (scenarios with disruptions)", "replay"},
		{"decision_us_mean", "us", "mean time per pod of the filter + score + select pass", ""},
		{"decision_us_p99", "us", "99th percentile of the time per pod of the filter + score + select pass", ""},
	}
}

// recorder accumulates a run's measures.
type recorder struct {
	env     *sim.Env
	cfg     RunConfig
	inflate bool

	nArrived, nPlaced, nFailed, nPending int
	// roomAtMiss records, for every pod that once fitted no node, whether
	// its eligible nodes had room for it in aggregate at that moment.
	roomAtMiss      map[int32]bool
	nFailedWithRoom int
	// latencyCapped counts the pod samples on nodes at the latency proxy's
	// utilisation cap.
	latencyCapped               int
	arrivedDemand, placedDemand sim.Resources

	allocCPU, allocMem, allocGPU, usedCPU, usedMem []float64
	activeUtil, activeNodes                        []float64
	fragGPU, fragCPU, cross, carbonRate            []float64
	latency                                        stats.LogHist
	decisions                                      []int64
	curve                                          []CurvePoint
	series                                         []SeriesPoint
	at100                                          *CurvePoint

	clock   int64
	carbonG float64
	// energyKWh is the energy of placed work integrated with carbonG
	// (carbon_g_per_kwh = carbonG / energyKWh).
	energyKWh float64
	svcRTT    []float64
	svcRate   []float64
	tel       []sim.NodeTelemetry

	evicted, lost, nodeFailures, flaps int
	classes                            classCounts
}

func newRecorder(env *sim.Env, cfg RunConfig) *recorder {
	return &recorder{
		env: env, cfg: cfg, latency: stats.NewLogHist(), roomAtMiss: map[int32]bool{},
		svcRTT:  make([]float64, len(env.Services)*len(env.Zones)),
		svcRate: make([]float64, len(env.Services)*len(env.Zones)),
		tel:     make([]sim.NodeTelemetry, len(env.Nodes)),
		classes: newClassCounts(env, cfg.FailedClasses),
	}
}

func (r *recorder) decision(d time.Duration) { r.decisions = append(r.decisions, int64(d)) }

func (r *recorder) arrive(p *sim.Pod) {
	r.nArrived++
	r.classes.arrive(p)
	r.arrivedDemand.CPU += p.CPU
	r.arrivedDemand.Mem += p.Mem
	r.arrivedDemand.GPU += p.GPUDemand()
}

// noFit notes that pod id fitted no node; the first time, it records
// whether its eligible nodes had room for it in aggregate (State.RoomFor).
func (r *recorder) noFit(st *sim.State, id int32) {
	if _, seen := r.roomAtMiss[id]; seen {
		return
	}
	r.roomAtMiss[id] = st.RoomFor(&st.Pods[id])
}

func (r *recorder) outcome(id int32, p *sim.Pod, ok bool) {
	if !ok {
		r.nFailed++
		if r.roomAtMiss[id] {
			r.nFailedWithRoom++
		}
		r.classes.fail(p, r.roomAtMiss[id])
		return
	}
	r.nPlaced++
	r.placedDemand.CPU += p.CPU
	r.placedDemand.Mem += p.Mem
	r.placedDemand.GPU += p.GPUDemand()
}

func (r *recorder) pendingAtEnd(n int) { r.nPending = n }

func (r *recorder) startClock(t int64) { r.clock = t }

// advanceTo integrates emissions of the current placement up to time t.
// Power is constant in between; each carbon curve is integrated in closed
// form (whole cycles, then the remaining hours), so the cost does not grow
// with the length of the interval.
func (r *recorder) advanceTo(st *sim.State, t int64) {
	if t <= r.clock {
		return
	}
	for cz, w := range st.PowerByCarbonZone {
		if w != 0 {
			// W * s / 3600 = Wh; / 1000 = kWh; * g/kWh = g
			r.carbonG += w / 3600 / 1000 * r.env.CarbonIntegral(int32(cz), r.clock, t)
			r.energyKWh += w * float64(max(t, 0)-max(r.clock, 0)) / 3600 / 1000 // CarbonIntegral's clamp
		}
	}
	r.clock = t
}

func share(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// sample records the utilisation, fragmentation, traffic, carbon and
// latency measures of the current state at position x.
func (r *recorder) sample(st *sim.State, x float64) {
	env := r.env
	c := env.Capacity
	usedCPU := st.UsedCPU
	for i := range st.Nodes {
		if st.Nodes[i].Pods > 0 || env.Dynamic {
			r.tel[i] = st.Telemetry(i)
		}
	}
	if env.Dynamic { // what the nodes measure: bursts, capped at capacity, less their background
		usedCPU = 0
		for i := range st.Nodes {
			usedCPU += max(0, r.tel[i].CPU*float64(st.Nodes[i].CPU)-st.Nodes[i].Background) // 0 when down
		}
	}
	sp := SeriesPoint{
		X:        x,
		AllocCPU: share(float64(st.Alloc.CPU), float64(c.CPU)),
		AllocMem: share(float64(st.Alloc.Mem), float64(c.Mem)),
		AllocGPU: share(float64(st.Alloc.GPU), float64(c.GPU)),
		UsedCPU:  share(usedCPU, float64(c.CPU)),
		UsedMem:  share(st.UsedMem, float64(c.Mem)),
	}
	r.series = append(r.series, sp)
	r.allocCPU = append(r.allocCPU, sp.AllocCPU)
	r.allocMem = append(r.allocMem, sp.AllocMem)
	r.allocGPU = append(r.allocGPU, sp.AllocGPU)
	r.usedCPU = append(r.usedCPU, sp.UsedCPU)
	r.usedMem = append(r.usedMem, sp.UsedMem)
	r.fragGPU = append(r.fragGPU, share(st.FragGPU, float64(c.GPU)))
	var activeUsed, activeCap float64
	var active int
	for i := range st.Nodes {
		if nd := &st.Nodes[i]; nd.Pods > 0 {
			active++
			if env.Dynamic {
				activeUsed += max(0, r.tel[i].CPU*float64(nd.CPU)-nd.Background)
			} else {
				activeUsed += nd.CPUUsed
			}
			activeCap += float64(nd.CPU)
		}
	}
	r.activeUtil = append(r.activeUtil, share(activeUsed, activeCap))
	r.activeNodes = append(r.activeNodes, float64(active))
	r.fragCPU = append(r.fragCPU, share(st.FragCPU, float64(c.CPU)))

	var rate float64
	for cz, w := range st.PowerByCarbonZone {
		if r.inflate {
			rate += w / 1000 * env.CarbonMean(int32(cz))
		} else {
			rate += w / 1000 * env.CarbonAt(int32(cz), st.Now)
		}
	}
	r.carbonRate = append(r.carbonRate, rate)

	if c, ok := st.CrossZoneShare(); ok {
		r.cross = append(r.cross, c)
	}

	// Latency proxy (sim.State.LatencyProxy): per running pod, base / (1 -
	// rho_eff) x memory factor + NIC delay + the call-rate weighted mean RTT
	// from its zone to its callees' replicas.
	Z := len(env.Zones)
	for s := range env.Services {
		for z := range Z {
			r.svcRTT[s*Z+z] = st.DependencyRTT(s, z)
		}
	}
	for _, id := range st.Running() {
		p := &st.Pods[id]
		n := st.Placements[id].Node
		nd := &st.Nodes[n]
		l := sim.NodeLatency(&r.tel[n], r.cfg.BaseLatencyMs)
		if r.tel[n].RhoEff >= r.cfg.MaxUtil {
			r.latencyCapped++
		}
		if p.Service >= 0 {
			l += r.svcRTT[int(p.Service)*Z+int(nd.Zone)]
		}
		r.latency.Add(l)
	}
}

func (r *recorder) curvePoint(st *sim.State, arrivedShare float64) {
	c := r.env.Capacity
	cp := CurvePoint{
		ArrivedShare:        arrivedShare,
		UnallocatedGPUShare: 1 - share(float64(st.Alloc.GPU), float64(c.GPU)),
		FailedPods:          r.nFailed,
		ArrivedPods:         r.nArrived,
		AllocCPUShare:       share(float64(st.Alloc.CPU), float64(c.CPU)),
		FragGPUShare:        share(st.FragGPU, float64(c.GPU)),
	}
	r.curve = append(r.curve, cp)
	if r.at100 == nil && arrivedShare >= 1-1e-9 {
		r.at100 = &r.curve[len(r.curve)-1]
	}
}

func (r *recorder) result() *Result {
	m := map[string]float64{
		"pods_arrived": float64(r.nArrived),
		"pods_placed":  float64(r.nPlaced),
		"pods_failed":  float64(r.nFailed),
		"failure_rate": share(float64(r.nFailed), float64(r.nArrived)),
	}
	if r.nFailed > 0 {
		m["failures_with_room"] = float64(r.nFailedWithRoom) / float64(r.nFailed)
	}
	hasGPU := r.env.Capacity.GPU > 0
	put := func(name string, num, den int64) {
		if den > 0 {
			m[name] = float64(num) / float64(den)
		}
	}
	put("alloc_cpu", r.placedDemand.CPU, r.arrivedDemand.CPU)
	put("alloc_mem", r.placedDemand.Mem, r.arrivedDemand.Mem)
	put("alloc_gpu", r.placedDemand.GPU, r.arrivedDemand.GPU)
	if r.inflate {
		if hasGPU && len(r.curve) > 0 {
			last := r.curve[len(r.curve)-1]
			m["unallocated_gpu_share"] = last.UnallocatedGPUShare
		}
		if r.at100 != nil && hasGPU {
			m["unallocated_gpu_share_at_100"] = r.at100.UnallocatedGPUShare
			m["failed_pods_at_100"] = float64(r.at100.FailedPods)
			m["frag_gpu_share_at_100"] = r.at100.FragGPUShare
		}
	} else {
		m["pods_pending"] = float64(r.nPending)
		m["carbon_g"] = r.carbonG
		if r.energyKWh > 0 {
			m["carbon_g_per_kwh"] = r.carbonG / r.energyKWh
		}
		if r.env.Disruptions.NodeFailures || slices.ContainsFunc(r.env.Uplinks, func(u disrupt.Uplink) bool { return u.FlapsPerDay > 0 }) {
			m["pods_evicted"], m["pods_lost"] = float64(r.evicted), float64(r.lost)
			m["node_failures"], m["uplink_flaps"] = float64(r.nodeFailures), float64(r.flaps)
		}
	}
	m["frag_cpu_share"] = stats.Mean(r.fragCPU)
	m["fragmentation"] = m["frag_cpu_share"]
	if hasGPU {
		m["frag_gpu_share"] = stats.Mean(r.fragGPU)
		if r.env.GPUPrimary {
			m["fragmentation"] = m["frag_gpu_share"]
		}
		m["util_alloc_gpu_mean"] = stats.Mean(r.allocGPU)
		m["util_alloc_gpu_p95"] = stats.Quantile(r.allocGPU, 0.95)
	}
	m["util_alloc_cpu_mean"] = stats.Mean(r.allocCPU)
	m["util_alloc_cpu_p95"] = stats.Quantile(r.allocCPU, 0.95)
	m["util_alloc_mem_mean"] = stats.Mean(r.allocMem)
	m["util_alloc_mem_p95"] = stats.Quantile(r.allocMem, 0.95)
	m["util_used_cpu_mean"] = stats.Mean(r.usedCPU)
	m["util_used_cpu_p95"] = stats.Quantile(r.usedCPU, 0.95)
	m["util_used_mem_mean"] = stats.Mean(r.usedMem)
	m["util_used_mem_p95"] = stats.Quantile(r.usedMem, 0.95)
	m["util_active_cpu_mean"] = stats.Mean(r.activeUtil)
	m["nodes_active_mean"] = stats.Mean(r.activeNodes)
	if r.latency.N > 0 {
		m["latency_mean_ms"] = r.latency.Mean()
		m["latency_p95_ms"] = r.latency.Quantile(0.95)
		m["latency_capped_share"] = float64(r.latencyCapped) / float64(r.latency.N)
	}
	if len(r.cross) > 0 {
		m["cross_zone_traffic"] = stats.Mean(r.cross)
	}
	m["carbon_g_per_h"] = stats.Mean(r.carbonRate)
	if len(r.decisions) > 0 {
		var sum int64
		for _, d := range r.decisions {
			sum += d
		}
		m["decision_us_mean"] = float64(sum) / float64(len(r.decisions)) / 1e3
		ds := slices.Clone(r.decisions)
		slices.Sort(ds)
		m["decision_us_p99"] = float64(ds[min(len(ds)-1, int(math.Ceil(0.99*float64(len(ds))))-1)]) / 1e3
	}
	return &Result{Measures: m, Curve: r.curve, Series: r.series, Failures: r.classes.top(r.env)}
}
