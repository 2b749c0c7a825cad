package scenario

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/carbon"
	"github.com/edgesched/edgesched/sim/scenario/apps"
)

// loaded is a scenario using every field of the load model.
const loaded = `apiVersion: edgesched.io/v1alpha1
kind: Scenario
name: loaded
seed: 5
carbonZones:
  - {name: ca, grid: CISO, start: "2022-06-01", utcOffsetHours: -7}
zones:
  - {name: a, carbonZone: ca}
  - {name: b, carbonZone: ca, uplink: {lossRate: 0.01, flapsPerDay: 2, flapDuration: 10m, flapRTTMs: 900, flapLoss: 0.2}}
loadProfiles:
  - {name: web, amplitude: 0.4, peakHour: 14, burstsPerDay: 6, burstDuration: 10m, burstMultiplier: 2}
disruptions: {nodeFailures: true, meanRepair: 30m}
nodePools:
  - {name: ssd, count: 3, zone: a, cpuMilli: 8000, memoryMiB: 16384, labels: {site: s1, disk: ssd}, failureRate: 0.1, nicMbps: 1000}
  - {name: sd, count: 2, zone: b, arch: arm64, cpuMilli: 4000, memoryMiB: 8192, labels: {site: s1, disk: sd}, nicMbps: 100, backgroundCPU: 0.3}
workload:
  apps:
    - name: shop
      app: online-boutique
      replicas: 2
      rates: 2
      requests: 3
      template: {nodeSelector: {site: s1}, profile: web, usageSpread: 0.3}
      tierTemplates: {store: {nodeSelector: {disk: ssd}}}
    - {name: syn, synthetic: {shape: hubs, services: 12, seed: 4}, load: 1.5}
  generator:
    duration: 24h
    arrivals: {ratePerHour: 30}
    mix:
      - {name: job, weight: 1, lifetime: 20m, template: {cpuMilli: 500, memoryMiB: 256, usage: 0.8, usageSpread: 0.5, memUsage: 1.5, interference: 0.4, netMbps: 20}}
`

// TestAppsExpand: an Online Boutique instance becomes NAME/SERVICE
// services with scaled replicas, requests and rates; the site selector is
// merged with the store tier's; throughput follows the call rates. The
// expected values are read from the library file here, independently.
func TestAppsExpand(t *testing.T) {
	l, err := Parse([]byte(loaded), "l.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range l.Cluster.Nodes { // the sd pool's boards are busy outside Kubernetes
		if want := map[string]float64{"ssd": 0, "sd": 0.3}[n.Labels["disk"]]; n.Background != want {
			t.Errorf("node %s: background %v, want %v", n.Name, n.Background, want)
		}
	}
	var lib struct {
		Services []struct {
			Name     string
			Replicas int
			Tier     string
			Template struct {
				CPUMilli  int64   `yaml:"cpuMilli"`
				MemoryMiB int64   `yaml:"memoryMiB"`
				Usage     float64 `yaml:"usage"`
			}
		}
		Dependencies []struct {
			From, To       string
			CallsPerSecond float64 `yaml:"callsPerSecond"`
		}
	}
	src, _ := apps.Source("online-boutique")
	if err := yaml.Unmarshal(src, &lib); err != nil {
		t.Fatal(err)
	}
	pods := map[string]*sim.PodSpec{}
	for i := range l.Workload.Pods {
		pods[l.Workload.Pods[i].Name] = &l.Workload.Pods[i]
	}
	traffic := map[string]float64{}
	for _, d := range lib.Dependencies {
		traffic[d.From] += 2 * d.CallsPerSecond
		traffic[d.To] += 2 * d.CallsPerSecond
	}
	for _, s := range lib.Services {
		for r := range 2 * s.Replicas {
			p := pods["shop/"+s.Name+"-"+string(rune('0'+r))]
			if p == nil {
				t.Fatalf("no pod shop/%s-%d", s.Name, r)
			}
			if p.CPU != 3*s.Template.CPUMilli || p.Memory != 3*s.Template.MemoryMiB || p.Service != "shop/"+s.Name || p.Profile != "web" {
				t.Errorf("%s: %+v", p.Name, p)
			}
			if p.NodeSelector["site"] != "s1" || (s.Tier == "store") != (p.NodeSelector["disk"] == "ssd") {
				t.Errorf("%s (tier %q): selector %v", p.Name, s.Tier, p.NodeSelector)
			}
			if want := traffic[s.Name] * 4096 * 8 / 1e6 / float64(2*s.Replicas); math.Abs(p.NetMbps-want) > 1e-9 {
				t.Errorf("%s: %v Mbit/s, want %v", p.Name, p.NetMbps, want)
			}
		}
	}
	var found bool
	for _, d := range l.Workload.Dependencies {
		if d.From == "shop/frontend" && d.To == "shop/currencyservice" {
			found = d.CallsPerSecond == 2*49
		}
	}
	if !found {
		t.Error("shop/frontend -> shop/currencyservice at 98/s missing")
	}
	// the synthetic instance: 12 services s0..s11, usage x1.5
	syn, _ := apps.Synthetic(apps.Spec{Shape: apps.Hubs, Services: 12, Seed: 4})
	a, err := ParseApp(syn, "syn")
	if err != nil {
		t.Fatal(err)
	}
	if p := pods["syn/s0-0"]; p == nil || math.Abs(p.CPUUsage-1.5*a.Services[0].Template.Usage) > 1e-12 {
		t.Errorf("syn/s0-0: %+v, want usage 1.5 x %v", p, a.Services[0].Template.Usage)
	}
	if _, err := sim.NewEnv(l.Cluster, l.Workload, sim.EnvOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestLibraryApps: every library app parses, has the documented number
// of services, and every service but the entry points is called by one.
func TestLibraryApps(t *testing.T) {
	want := map[string]struct {
		services int
		entries  []string
	}{
		"online-boutique":     {11, []string{"frontend"}},
		"social-network":      {26, []string{"nginx-thrift", "media-frontend"}},
		"hotel-reservation":   {17, []string{"frontend"}},
		"media-microservices": {31, []string{"nginx-web-server"}},
		"train-ticket":        {64, []string{"ts-ui-dashboard"}},
	}
	if got := strings.Join(apps.Names(), ","); got != "hotel-reservation,media-microservices,online-boutique,social-network,train-ticket" {
		t.Fatalf("library %s", got)
	}
	for name, w := range want {
		src, _ := apps.Source(name)
		a, err := ParseApp(src, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Services) != w.services {
			t.Errorf("%s: %d services, want %d", name, len(a.Services), w.services)
		}
		called := map[string]bool{}
		for _, d := range a.Dependencies {
			if d.From == d.To || !(d.CallsPerSecond > 0) {
				t.Errorf("%s: edge %s -> %s at %v", name, d.From, d.To, d.CallsPerSecond)
			}
			called[d.To] = true
		}
		for _, s := range a.Services {
			entry := false
			for _, e := range w.entries {
				entry = entry || e == s.Name
			}
			if called[s.Name] == entry {
				t.Errorf("%s: %s called %v, entry %v", name, s.Name, called[s.Name], entry)
			}
		}
	}
	for _, shape := range apps.Shapes() {
		for _, n := range []int{2, 7, 40} {
			src, err := apps.Synthetic(apps.Spec{Shape: shape, Services: n, Seed: 9})
			if err != nil {
				t.Fatal(err)
			}
			a, err := ParseApp(src, shape)
			if err != nil || len(a.Services) != n {
				t.Fatalf("%s/%d: %v", shape, n, err)
			}
			again, _ := apps.Synthetic(apps.Spec{Shape: shape, Services: n, Seed: 9})
			if string(again) != string(src) {
				t.Errorf("%s/%d: not a function of the seed", shape, n)
			}
		}
	}
}

// TestGridCarbonZone: a grid carbon zone is the grid's window from the
// local start, as long as the trace (24 h: the generator's window plus
// lifetimes, rounded up to whole days).
func TestGridCarbonZone(t *testing.T) {
	l, err := Parse([]byte(loaded), "l.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	for _, p := range l.Workload.Pods {
		end = max(end, p.Create, p.Delete)
	}
	hours := int((end + 86399) / 86400 * 24)
	s, _ := carbon.Load("CISO")
	want, err := s.Window(time.Date(2022, 6, 1, 7, 0, 0, 0, time.UTC), hours)
	if err != nil {
		t.Fatal(err)
	}
	got := l.Cluster.CarbonZones[0].Curve
	if len(got) != hours || got[0] != want[0] || got[hours-1] != want[hours-1] {
		t.Errorf("curve of %d h (%v..%v), want %d h (%v..%v)", len(got), got[0], got[len(got)-1], hours, want[0], want[hours-1])
	}
}

func TestLoadFieldErrors(t *testing.T) {
	cases := []struct {
		name, from, to, want string
		base                 error
	}{
		{"grid over a long gap", `grid: CISO, start: "2022-06-01", utcOffsetHours: -7`, `grid: PJM, start: "2022-03-13", utcOffsetHours: -5`, "carbonZones[0].start: carbon: no data: PJM is missing 22 h", carbon.ErrGap},
		{"grid and curve", `grid: CISO,`, `grid: CISO, curve: [1],`, "give curve or grid", sim.ErrInvalid},
		{"bad start", `start: "2022-06-01"`, `start: "June"`, `"June", want 2022-MM-DD`, sim.ErrInvalid},
		{"unknown grid", `grid: CISO`, `grid: XXXX`, "carbon: unknown grid", ErrUnknownRef},
		{"past the year", `start: "2022-06-01"`, `start: "2022-12-31"`, "carbon: outside the data", carbon.ErrRange},
		{"unknown profile", `profile: web, usageSpread`, `profile: nosuch, usageSpread`, `"nosuch" is not declared in loadProfiles`, sim.ErrInvalid},
		{"amplitude", `amplitude: 0.4`, `amplitude: 1.4`, "loadProfiles[0]", sim.ErrInvalid},
		{"uplink loss", `lossRate: 0.01`, `lossRate: 1.5`, "zones[1].uplink", sim.ErrInvalid},
		{"repair", `meanRepair: 30m`, `meanRepair: 0`, "disruptions.meanRepair", sim.ErrInvalid},
		{"nic", `nicMbps: 100,`, `nicMbps: -1,`, "nodePools[1].nicMbps", sim.ErrInvalid},
		{"background", `backgroundCPU: 0.3}`, `backgroundCPU: 1.5}`, "nodePools[1].backgroundCPU", sim.ErrInvalid},
		{"interference", `interference: 0.4`, `interference: 9`, "interference: sim: invalid value: 9", sim.ErrInvalid},
		{"spread", `usageSpread: 0.5`, `usageSpread: 3`, "usageSpread", sim.ErrInvalid},
		{"unknown app", `app: online-boutique`, `app: nosuch`, "apps: unknown app", ErrUnknownRef},
		{"app and synthetic", `{name: syn, synthetic`, `{name: syn, app: online-boutique, synthetic`, "exactly one", sim.ErrInvalid},
		{"duplicate instance", `{name: syn,`, `{name: shop,`, `app instance "shop"`, sim.ErrDuplicate},
		{"bad shape", `shape: hubs`, `shape: ring`, `shape "ring"`, sim.ErrInvalid},
		{"bad load", `load: 1.5`, `load: -1`, "workload.apps[1].load", sim.ErrInvalid},
		{"unknown instance key", `load: 1.5`, `lod: 1.5`, "unknown field", ErrSyntax},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(loaded, c.from) {
				t.Fatalf("case does not apply: %q", c.from)
			}
			_, err := Parse([]byte(strings.Replace(loaded, c.from, c.to, 1)), "l.yaml", "")
			var le *sim.LineError
			if !errors.As(err, &le) || le.Line == 0 || !errors.Is(err, c.base) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want a line error wrapping %v naming %q", err, c.base, c.want)
			}
		})
	}
}

// TestUsageSpread: usages drawn with usageSpread are a function of the
// scenario seed and the pod's name, and average the template's usage.
func TestUsageSpread(t *testing.T) {
	usages := func(seed string) map[string]float64 {
		l, err := Parse([]byte(strings.Replace(loaded, "seed: 5", "seed: "+seed, 1)), "l.yaml", "")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, p := range l.Workload.Pods {
			out[p.Name] = p.CPUUsage
		}
		return out
	}
	a, b, c := usages("5"), usages("5"), usages("6")
	var sum float64
	var n int
	for name, u := range a {
		if b[name] != u {
			t.Fatalf("%s: %v then %v with the same seed", name, u, b[name])
		}
		if strings.HasPrefix(name, "job-") {
			sum += u
			n++
		}
	}
	// lognormal, mean 0.8, sigma 0.5: the sample mean of n draws is within
	// 5 standard errors (sd = 0.8 sqrt(e^0.25 - 1))
	sd := 0.8 * math.Sqrt(math.Exp(0.25)-1)
	if mean := sum / float64(n); n < 400 || math.Abs(mean-0.8) > 5*sd/math.Sqrt(float64(n)) {
		t.Errorf("mean usage %v over %d jobs, want 0.8", mean, n)
	}
	if a["shop/frontend-0"] == c["shop/frontend-0"] {
		t.Error("another seed draws the same usage")
	}
}

// TestBackgroundLoadKey: a scenario's backgroundLoad marks some of its
// nodes busy outside Kubernetes, from the scenario's seed (the same
// nodes for the same seed, others for another), keeping a pool's own
// backgroundCPU; Options.Background replaces it; bad ranges are refused
// at their line.
func TestBackgroundLoadKey(t *testing.T) {
	doc := loaded + "backgroundLoad: {share: 0.5, cpu: [0.2, 0.4]}\n"
	busy := func(opt Options, src string) []float64 {
		l, err := ParseWith([]byte(src), "l.yaml", "", opt)
		if err != nil {
			t.Fatal(err)
		}
		var out []float64
		for _, n := range l.Cluster.Nodes {
			if n.Labels["disk"] == "sd" && n.Background != 0.3 {
				t.Errorf("node %s: its pool's 0.3 became %v", n.Name, n.Background)
			}
			out = append(out, n.Background)
		}
		return out
	}
	a, again := busy(Options{}, doc), busy(Options{}, doc)
	seed := uint64(99)
	other := busy(Options{Seed: &seed}, doc)
	marked := 0
	for i, v := range a {
		if v != 0 && v != 0.3 {
			marked++
			if v < 0.2 || v > 0.4 {
				t.Errorf("node %d: %v outside [0.2, 0.4]", i, v)
			}
		}
	}
	if marked == 0 || !slices.Equal(a, again) || slices.Equal(a, other) {
		t.Errorf("background %v (again %v, seed 99 %v): want some nodes marked, the same for the seed, others for another", a, again, other)
	}
	if all := busy(Options{Background: &sim.BackgroundLoad{Share: 1, Min: 0.7, Max: 0.7}}, doc); all[0] != 0.7 || all[len(all)-1] != 0.3 {
		t.Errorf("Options.Background share 1 at 0.7: %v", all)
	}
	for _, bad := range []string{"{share: 0.5, cpu: [0.2]}", "{share: 2, cpu: [0.2, 0.4]}", "{share: 0.5, cpu: [0.5, 0.4]}"} {
		_, err := Parse([]byte(loaded+"backgroundLoad: "+bad+"\n"), "l.yaml", "")
		var le *sim.LineError
		if !errors.As(err, &le) || le.Line == 0 || !errors.Is(err, sim.ErrInvalid) || !strings.Contains(err.Error(), "backgroundLoad") {
			t.Errorf("backgroundLoad %s: %v, want a line error naming it", bad, err)
		}
	}
}
