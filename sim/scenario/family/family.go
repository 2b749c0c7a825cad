// Package family generates the loaded edge-fleet scenario families: for a
// family name and a seed, a scenario document (YAML in the format of
// docs/scenario.md) of a heterogeneous fleet — several sites, each a K3s
// cluster of a core zone (amd64 mini-PCs and servers, a small GPU box) and
// an edge zone behind a flaky uplink (arm64 boards, Jetson-class GPUs) —
// running published microservice benchmarks (sim/scenario/apps) pinned
// to their site, plus generated batch, vision and report jobs, on real
// grids (sim/carbon), with load profiles, interference, node failures and
// uplink flaps.
//
// The seed draws the fleet (sites, node counts), which apps each site
// runs, their sizes, the grids and the week of 2022, and the workload
// (the scenario's generator seed), so `--scenario-seeds` gives different
// fleets and workloads. Families are calibrated (docs/scenario.md) so that
// the kube-scheduler's default scoring sees 50-70% CPU use, 1-4%
// scheduling failures and 20-35% cross-zone dependency traffic.
//
// Roles: Training families may be used to train and select; HeldOut ones
// (with held-out apps and grids) only to evaluate.
//
// Generate is a pure function of its arguments; everything here is safe
// for concurrent use.
package family

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgesched/edgesched/sim/scenario/apps"
)

// ErrUnknown is returned for a name that is not a family.
var ErrUnknown = errors.New("family: unknown family")

// Role says what a family may be used for.
type Role string

// Roles.
const (
	Training Role = "training"
	HeldOut  Role = "held-out"
)

// pool is a kind of node; count nodes per site, drawn in [Min, Max].
type pool struct {
	name, zone, arch, class string
	cpu, mem                int64
	gpus                    int
	gpuModel                string
	min, max                int
	failures                float64 // per day
	nic                     float64 // Mbit/s
	idle, perCore           float64 // watts
}

// job is a kind of generated pod.
type job struct {
	name, lifetime, arch, qos, profile string
	weight                             float64
	cpu, mem, gpuMilli                 int64
	usage, spread, interference, net   float64
}

// spec is a family's recipe.
type spec struct {
	name, description string
	role              Role
	sites             [2]int
	pools             []pool
	// appSets: each site runs one app of every group (drawn).
	appSets [][]string
	// synthetic: each site also runs this many synthetic graphs.
	synthetic int
	// appRates scales the apps' call rates, appLoad their usage shares
	// (the sites' traffic against the apps' nominal load).
	appRates, appLoad float64
	grids             []string
	utcOffset         map[string]int
	jobs              []job
	// Load, as shares of a site's general capacity (every node but the
	// tainted GPU boxes): the apps' requests (svcShare), the mean requests
	// of CPU jobs (batchShare); gpuShare is the GPU jobs' mean share of the
	// site's GPUs; edgeFill the camera pipeline's share of the edge zone.
	svcShare, batchShare, gpuShare, edgeFill float64
	// pipelineRate is the camera pipeline's frames/s per ingest replica.
	pipelineRate float64
	edgeUplink   uplink
	coreRTT      float64 // ms between a site's zones
}

type uplink struct {
	loss, flapsPerDay, flapRTT, flapLoss float64
	flapMinutes                          int
}

// Info describes a family.
type Info struct {
	Name, Description string
	Role              Role
	// Apps and Grids are the library apps and grids it may draw.
	Apps, Grids []string
}

// Names lists the families, sorted.
func Names() []string {
	out := make([]string, 0, len(specs))
	for _, s := range specs {
		out = append(out, s.name)
	}
	slices.Sort(out)
	return out
}

// Lookup describes a family.
func Lookup(name string) (Info, error) {
	s, err := find(name)
	if err != nil {
		return Info{}, err
	}
	var a []string
	for _, set := range s.appSets {
		for _, x := range set {
			if !slices.Contains(a, x) {
				a = append(a, x)
			}
		}
	}
	if s.synthetic > 0 {
		a = append(a, "synthetic")
	}
	return Info{Name: s.name, Description: s.description, Role: s.role, Apps: a, Grids: slices.Clone(s.grids)}, nil
}

func find(name string) (*spec, error) {
	for i := range specs {
		if specs[i].name == name {
			return &specs[i], nil
		}
	}
	return nil, fmt.Errorf("%w %q (have %s)", ErrUnknown, name, strings.Join(Names(), ", "))
}

// DefaultSeed is the seed of a family loaded without one.
const DefaultSeed = 1

// familyStream separates the fleet draws from the workload generator's.
const familyStream = 0xf1ee7

// Generate writes the scenario of a family for a seed.
func Generate(name string, seed uint64) ([]byte, error) {
	s, err := find(name)
	if err != nil {
		return nil, err
	}
	return s.generate(seed), nil
}

// site is one drawn site.
type site struct {
	id     string
	grid   string
	counts []int
	apps   []string
	synth  []string // "shape:services:seed"
	// general and edge capacity (milli-CPU), edge nodes, GPUs (milli)
	cap, edgeCap        int64
	edgeNodes, gpuMilli int
	appScale            []float64 // per app, then per synthetic graph
	cpuRate, gpuRate    float64   // job arrivals per hour
}

func (s *spec) generate(seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, familyStream))
	n := s.sites[0] + rng.IntN(s.sites[1]-s.sites[0]+1)
	// a week-long window of summer or autumn 2022 (no long grid gaps there)
	day := 151 + rng.IntN(120) // 1 June .. 28 September
	start := fmt.Sprintf("2022-%s", dayOfYear(day))
	grids := slices.Clone(s.grids)
	rng.Shuffle(len(grids), func(i, j int) { grids[i], grids[j] = grids[j], grids[i] })
	sites := make([]site, n)
	for i := range sites {
		st := &sites[i]
		st.id = fmt.Sprintf("s%d", i+1)
		st.grid = grids[i%len(grids)]
		for _, p := range s.pools {
			st.counts = append(st.counts, p.min+rng.IntN(p.max-p.min+1))
		}
		for _, set := range s.appSets { // one of each group, no app twice at a site
			left := slices.DeleteFunc(slices.Clone(set), func(a string) bool { return slices.Contains(st.apps, a) })
			st.apps = append(st.apps, left[rng.IntN(len(left))])
		}
		for range s.synthetic {
			shapes := []string{"chain", "fanout", "hubs", "tree"}
			st.synth = append(st.synth, fmt.Sprintf("%s:%d:%d", shapes[rng.IntN(len(shapes))], 6+rng.IntN(20), rng.Uint64()%1000))
		}
	}
	rateJitter := 0.95 + 0.1*rng.Float64()
	for i := range sites {
		s.size(&sites[i], rateJitter)
	}

	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Generated by sim/scenario/family (family %s, seed %d): edit a copy, not this.\n", s.name, seed)
	w("# %s\n", s.description)
	w("apiVersion: edgesched.io/v1alpha1\nkind: Scenario\nname: %s\n", s.name)
	w("description: %q\n", fmt.Sprintf("%s (%s family, seed %d): %d sites", s.description, s.role, seed, n))
	w("seed: %d\n", seed) // the workload generator's; the fleet draws use another stream
	w("carbonZones:\n")
	for _, st := range sites {
		w("  - {name: %s-grid, grid: %s, start: %q, utcOffsetHours: %d}\n", st.id, st.grid, start, s.utcOffset[st.grid])
	}
	w("zones:\n")
	u := s.edgeUplink
	for _, st := range sites {
		w("  - {name: %s-core, carbonZone: %s-grid, uplink: {lossRate: 0.0005}}\n", st.id, st.id)
		w("  - {name: %s-edge, carbonZone: %s-grid, uplink: {lossRate: %g, flapsPerDay: %g, flapDuration: %dm, flapRTTMs: %g, flapLoss: %g}}\n",
			st.id, st.id, u.loss, u.flapsPerDay, u.flapMinutes, u.flapRTT, u.flapLoss)
	}
	w("network:\n  intraZoneMs: 0.3\n  interZoneMs: 45\n  pairs:\n")
	for _, st := range sites {
		w("    - {a: %s-core, b: %s-edge, ms: %g}\n", st.id, st.id, s.coreRTT)
	}
	w("gpuModels:\n  - {name: T4, memoryMiB: 15109, watts: 70}\n  - {name: Orin, memoryMiB: 16384, watts: 25}\n")
	w("loadProfiles:\n")
	w("  - {name: web, amplitude: 0.35, peakHour: 14, burstsPerDay: 8, burstDuration: 10m, burstMultiplier: 1.8}\n")
	w("  - {name: vision, amplitude: 0.2, peakHour: 11, burstsPerDay: 12, burstDuration: 5m, burstMultiplier: 2.2}\n")
	w("  - {name: batch, burstsPerDay: 4, burstDuration: 20m, burstMultiplier: 1.5}\n")
	w("disruptions: {nodeFailures: true, meanRepair: 30m}\n")
	w("nodePools:\n")
	for _, st := range sites {
		for i, p := range s.pools {
			if st.counts[i] == 0 {
				continue
			}
			w("  - name: %s-%s\n    count: %d\n    zone: %s-%s\n    arch: %s\n    cpuMilli: %d\n    memoryMiB: %d\n", st.id, p.name, st.counts[i], st.id, p.zone, p.arch, p.cpu, p.mem)
			if p.gpus > 0 {
				w("    gpus: %d\n    gpuModel: %s\n", p.gpus, p.gpuModel)
			}
			disk := "ssd"
			if p.zone == "edge" {
				disk = "sd"
			}
			w("    labels: {edgesched.io/site: %s, edgesched.io/tier: %s, class: %s, disk: %s}\n", st.id, p.zone, p.class, disk)
			if p.gpus > 0 && p.arch == "amd64" {
				w("    taints: [{key: edgesched.io/gpu, value: \"true\", effect: NoSchedule}]\n")
			}
			w("    failureRate: %g\n    nicMbps: %g\n    power: {idleWatts: %g, wattsPerCore: %g}\n", p.failures, p.nic, p.idle, p.perCore)
		}
	}
	w("workload:\n  services:\n")
	for _, st := range sites { // the site's camera pipeline: ingest on every edge node
		w("    - {name: %s-cam-ingest, replicas: %d, template: {cpuMilli: %d, memoryMiB: 512, usage: 0.9, usageSpread: 0.2, profile: vision, netMbps: 40, nodeSelector: {edgesched.io/site: %s, edgesched.io/tier: edge}}}\n",
			st.id, st.edgeNodes, int64(s.edgeFill*float64(st.edgeCap)/float64(st.edgeNodes)), st.id)
		w("    - {name: %s-cam-decode, replicas: %d, template: {cpuMilli: 500, memoryMiB: 1024, usage: 0.9, usageSpread: 0.2, profile: vision, interference: 0.3, nodeSelector: {edgesched.io/site: %s}}}\n",
			st.id, max(1, st.edgeNodes/2), st.id)
		w("    - {name: %s-cam-events, replicas: 1, template: {cpuMilli: 250, memoryMiB: 512, usage: 0.6, memUsage: 1.5, nodeSelector: {edgesched.io/site: %s, disk: ssd}}}\n", st.id, st.id)
	}
	w("  apps:\n")
	for _, st := range sites {
		for k, a := range st.apps {
			w("    - {name: %s-%s, app: %s, replicas: 3, requests: %g, rates: %g, load: %g, template: {nodeSelector: {edgesched.io/site: %s}, profile: web, usageSpread: 0.3}, %s}\n",
				st.id, a, a, round(st.appScale[k]/3), round(s.appRates*rateJitter), round(s.appLoad*rateJitter), st.id, storesOnSSD)
		}
		for k, sy := range st.synth {
			f := strings.Split(sy, ":")
			w("    - {name: %s-syn%d, synthetic: {shape: %s, services: %s, seed: %s, rate: 10}, replicas: 3, requests: %g, load: %g, template: {nodeSelector: {edgesched.io/site: %s}, profile: web, usageSpread: 0.3}, %s}\n",
				st.id, k, f[0], f[1], f[2], round(st.appScale[len(st.apps)+k]/3), round(s.appLoad*rateJitter), st.id, storesOnSSD)
		}
	}
	var total float64
	for _, st := range sites {
		total += st.cpuRate + st.gpuRate
	}
	w("  generator:\n    duration: 48h\n    arrivals: {process: poisson, ratePerHour: %g}\n", round(total))
	w("    diurnal: {amplitude: 0.3, peakHour: 13}\n")
	w("    bursts:\n      - {at: 9h, duration: 1h, multiplier: 1.5}\n      - {at: 33h, duration: 90m, multiplier: 1.6}\n")
	w("    mix:\n")
	cpuW, gpuW := s.jobWeights()
	for _, st := range sites {
		for _, j := range s.jobs {
			weight := st.cpuRate * j.weight / cpuW
			if j.gpuMilli > 0 {
				weight = st.gpuRate * j.weight / gpuW
			}
			w("      - name: %s-%s\n        weight: %g\n        lifetime: %s\n", st.id, j.name, round(weight), j.lifetime)
			w("        template: {cpuMilli: %d, memoryMiB: %d", j.cpu, j.mem)
			if j.gpuMilli > 0 {
				w(", gpus: 1, gpuMilli: %d, tolerations: [{key: edgesched.io/gpu, operator: Exists}]", j.gpuMilli)
			}
			if j.arch != "" {
				w(", arch: %s", j.arch)
			}
			if j.qos != "" {
				w(", qos: %s", j.qos)
			}
			w(", usage: %g, usageSpread: %g, profile: %s", j.usage, j.spread, j.profile)
			if j.interference > 0 {
				w(", interference: %g", j.interference)
			}
			if j.net > 0 {
				w(", netMbps: %g", j.net)
			}
			w(", nodeSelector: {edgesched.io/site: %s", st.id)
			w("}}\n")
		}
	}
	w("dependencies:\n")
	for _, st := range sites {
		r := s.pipelineRate * float64(st.edgeNodes) * rateJitter
		w("  - {from: %s-cam-ingest, to: %s-cam-decode, callsPerSecond: %g}\n", st.id, st.id, round(r))
		w("  - {from: %s-cam-decode, to: %s-cam-events, callsPerSecond: %g}\n", st.id, st.id, round(r/10))
	}
	return []byte(b.String())
}

// jobWeights sums the CPU jobs' and the GPU jobs' weights.
func (s *spec) jobWeights() (cpu, gpu float64) {
	for _, j := range s.jobs {
		if j.gpuMilli > 0 {
			gpu += j.weight
		} else {
			cpu += j.weight
		}
	}
	return cpu, gpu
}

// size computes a site's capacities and scales its load to them: the
// apps' requests to svcShare of the general capacity (split evenly among
// its apps), CPU job arrivals to batchShare of it and GPU job arrivals to
// gpuShare of its GPUs, all times the seed's jitter.
func (s *spec) size(st *site, jitter float64) {
	for i, p := range s.pools {
		c := int64(st.counts[i])
		if p.gpus > 0 && p.arch == "amd64" {
			st.gpuMilli += st.counts[i] * p.gpus * 1000
			continue
		}
		st.cap += c * p.cpu
		if p.zone == "edge" {
			st.edgeCap += c * p.cpu
			st.edgeNodes += st.counts[i]
		}
		st.gpuMilli += st.counts[i] * p.gpus * 1000
	}
	var bases []int64
	for _, a := range st.apps {
		src, _ := apps.Source(a)
		r, _ := apps.Requests(src)
		bases = append(bases, r)
	}
	for _, sy := range st.synth {
		f := strings.Split(sy, ":")
		k, _ := strconv.Atoi(f[1])
		sd, _ := strconv.ParseUint(f[2], 10, 64)
		src, _ := apps.Synthetic(apps.Spec{Shape: f[0], Services: k, Seed: sd, Rate: 10})
		r, _ := apps.Requests(src)
		bases = append(bases, r)
	}
	for _, r := range bases {
		st.appScale = append(st.appScale, s.svcShare*jitter*float64(st.cap)/float64(len(bases))/float64(max(r, 1)))
	}
	var cpuWork, gpuWork, cpuW, gpuW float64 // per job: milli x hours
	for _, j := range s.jobs {
		h := hours(j.lifetime)
		if j.gpuMilli > 0 {
			gpuWork += j.weight * float64(j.gpuMilli) * h
			gpuW += j.weight
		} else {
			cpuWork += j.weight * float64(j.cpu) * h
			cpuW += j.weight
		}
	}
	if cpuWork > 0 {
		st.cpuRate = s.batchShare * jitter * float64(st.cap) / (cpuWork / cpuW)
	}
	if gpuWork > 0 && st.gpuMilli > 0 {
		st.gpuRate = s.gpuShare * jitter * float64(st.gpuMilli) / (gpuWork / gpuW)
	}
}

func hours(d string) float64 {
	t, err := time.ParseDuration(d)
	if err != nil {
		panic(fmt.Sprintf("family: bad lifetime %q", d))
	}
	return t.Hours()
}

// storesOnSSD keeps databases and caches on the core zone's SSD nodes.
const storesOnSSD = "tierTemplates: {store: {nodeSelector: {disk: ssd}}}"

func round(x float64) float64 { return math.Round(x*1000) / 1000 }

// dayOfYear formats day d (0-based) of 2022 as MM-DD.
func dayOfYear(d int) string {
	months := []int{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	m := 0
	for d >= months[m] {
		d -= months[m]
		m++
	}
	return fmt.Sprintf("%02d-%02d", m+1, d+1)
}

// Band is a calibration target: the kube-scheduler default scoring's
// Measure must lie in [Lo, Hi] on every family.
type Band struct {
	Measure string
	Lo, Hi  float64
}

// Bands are the calibration targets (issue 18: the seed's case study,
// a fleet at 58% utilisation, 2.3% failures and 27% cross-zone traffic).
func Bands() []Band {
	return []Band{
		{"util_used_cpu_mean", 0.50, 0.70},
		{"failure_rate", 0.01, 0.04},
		{"cross_zone_traffic", 0.20, 0.35},
	}
}
