package scenario

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/openb"
)

func TestBuiltins(t *testing.T) {
	names := Builtins()
	if len(names) < 2 {
		t.Fatalf("builtins = %v, want at least two", names)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			l, err := Load("builtin:" + name)
			if err != nil {
				t.Fatal(err)
			}
			env, err := sim.NewEnv(l.Cluster, l.Workload, sim.EnvOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(env.Zones) < 3 || len(env.Edges) == 0 || !env.HasTimes {
				t.Errorf("%s: %d zones, %d edges, timed %v; want >= 3 zones, a call graph, times", name, len(env.Zones), len(env.Edges), env.HasTimes)
			}
			var arm, amd, gpu int
			for _, n := range env.Nodes {
				switch {
				case n.GPUs > 0:
					gpu++
				case n.Arch == sim.ArchARM64:
					arm++
				default:
					amd++
				}
			}
			if arm+amd == 0 || gpu == 0 {
				t.Errorf("%s: %d arm64, %d amd64, %d GPU nodes; want a mix", name, arm, amd, gpu)
			}
			again, err := Load("builtin:" + name)
			if err != nil {
				t.Fatal(err)
			}
			if len(again.Workload.Pods) != len(l.Workload.Pods) {
				t.Fatal("second load differs")
			}
			for i := range l.Workload.Pods {
				a, b := l.Workload.Pods[i], again.Workload.Pods[i]
				if a.Name != b.Name || a.Create != b.Create || a.Delete != b.Delete {
					t.Fatalf("pod %d differs between loads: %+v vs %+v", i, a, b)
				}
			}
		})
	}
	l, err := Load("builtin:retail-fleet")
	if err != nil {
		t.Fatal(err)
	}
	// 12 boards + 9 mini-PCs + 3 GPU boxes = 24 nodes; Online Boutique's 11 services.
	svcs := map[string]bool{}
	for _, p := range l.Workload.Pods {
		if p.Service != "" {
			svcs[p.Service] = true
		}
	}
	if len(l.Cluster.Nodes) != 24 || len(svcs) != 11 || len(l.Workload.Dependencies) != 15 || l.Seed != 7 {
		t.Errorf("retail-fleet: %d nodes, %d services, %d dependencies, seed %d", len(l.Cluster.Nodes), len(svcs), len(l.Workload.Dependencies), l.Seed)
	}
	if _, err := Load("builtin:nosuch"); !errors.Is(err, ErrUnknownBuiltin) {
		t.Errorf("unknown builtin: %v", err)
	}
	// a family's version: the first loads, one that does not exist is
	// refused with the family's reason
	if l, err := Load("builtin:retail-stores@v1"); err != nil || !IsFamily("builtin:retail-stores@v1") || len(l.Cluster.Nodes) == 0 {
		t.Errorf("retail-stores@v1: %v", err)
	}
	if _, err := Load("builtin:retail-stores@v9"); !errors.Is(err, ErrUnknownBuiltin) || !strings.Contains(err.Error(), `version "v9"`) {
		t.Errorf("retail-stores@v9: %v", err)
	}
}

const minimal = `apiVersion: edgesched.io/v1alpha1
kind: Scenario
name: t
zones: [{name: a}, {name: b}]
nodePools:
  - {name: n, count: 2, zones: [a, b], cpuMilli: 4000, memoryMiB: 4096}
workload:
  pods:
    - {name: p, cpuMilli: 100, memoryMiB: 64, service: web}
`

func TestParseMinimal(t *testing.T) {
	l, err := Parse([]byte(minimal), "t.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	c, w := l.Cluster, l.Workload
	if len(c.Nodes) != 2 || c.Nodes[0].Zone != "a" || c.Nodes[1].Zone != "b" || c.Nodes[1].Name != "n-1" || c.Nodes[0].Arch != sim.ArchAMD64 {
		t.Errorf("nodes = %+v", c.Nodes)
	}
	if len(w.Pods) != 1 || w.Pods[0].Delete != sim.NoDeletion || w.Pods[0].Service != "web" {
		t.Errorf("pods = %+v", w.Pods)
	}
	if c.Network != nil {
		t.Errorf("network = %+v, want nil (the simulator's default)", c.Network)
	}
	// An explicit all-zero network stays zero; a partial one keeps the
	// defaults for the keys left out.
	for _, tt := range []struct {
		doc          string
		intra, inter float64
	}{
		{"network: {intraZoneMs: 0, interZoneMs: 0}\n", 0, 0},
		{"network: {interZoneMs: 12}\n", sim.DefaultNetwork().IntraZoneMs, 12},
	} {
		l, err := Parse([]byte(minimal+tt.doc), "t.yaml", "")
		if err != nil {
			t.Fatal(err)
		}
		if nw := l.Cluster.Network; nw == nil || nw.IntraZoneMs != tt.intra || nw.InterZoneMs != tt.inter {
			t.Errorf("%q: network %+v, want intra %v inter %v", tt.doc, nw, tt.intra, tt.inter)
		}
	}
	// A partial power block keeps the architecture's defaults elsewhere.
	l, err = Parse([]byte(strings.Replace(minimal, "memoryMiB: 4096}", "memoryMiB: 4096, power: {wattsPerGPU: 99}}", 1)), "t.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if pw, def := l.Cluster.Nodes[0].Power, sim.DefaultPower(sim.ArchAMD64); pw == nil || pw.WattsPerGPU != 99 || pw.WattsPerCore != def.WattsPerCore || pw.IdleWatts != def.IdleWatts {
		t.Errorf("power = %+v, want defaults with 99 W per GPU", pw)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(string) string
		base error
		want string
	}{
		{"not yaml", func(string) string { return "a: [1, 2" }, ErrSyntax, "t.yaml"},
		{"empty", func(string) string { return "" }, ErrSyntax, "t.yaml: scenario: syntax: empty document"},
		{"list at top", func(string) string { return "- a\n- b\n" }, ErrSyntax, "t.yaml:1: scenario: syntax: expected a mapping, got a list"},
		{"wrong api version", func(s string) string { return strings.Replace(s, "v1alpha1", "v9", 1) }, ErrSyntax, `t.yaml:1: field apiVersion: scenario: syntax: "edgesched.io/v9", want edgesched.io/v1alpha1`},
		{"unknown field", func(s string) string { return s + "colour: blue\n" }, ErrSyntax, "t.yaml:10: field colour: scenario: syntax: unknown field (allowed: apiVersion, backgroundLoad, carbonZones"},
		{"unknown nested field", func(s string) string {
			return strings.Replace(s, "memoryMiB: 4096}", "memoryMiB: 4096, cores: 4}", 1)
		}, ErrSyntax, "t.yaml:6: field cores: scenario: syntax: unknown field"},
		{"duplicate key", func(s string) string { return s + "name: again\n" }, ErrSyntax, "t.yaml:10: field name: scenario: syntax: key given twice"},
		{"wrong type", func(s string) string { return strings.Replace(s, "count: 2", "count: two", 1) }, ErrSyntax, "t.yaml:6: scenario: syntax: cannot unmarshal !!str `two` into int"},
		{"negative cpu", func(s string) string { return strings.Replace(s, "cpuMilli: 4000", "cpuMilli: -4000", 1) }, sim.ErrInvalid, "t.yaml:6: field nodePools[0].cpuMilli: sim: invalid value: -4000, want > 0"},
		{"unknown zone", func(s string) string { return strings.Replace(s, "zones: [a, b], cpu", "zones: [a, c], cpu", 1) }, ErrUnknownRef, `t.yaml:6: field nodePools[0].zones[1]: scenario: unknown reference: zone "c" is not declared in zones`},
		{"unknown gpu model", func(s string) string {
			return strings.Replace(s, "memoryMiB: 4096}", "memoryMiB: 4096, gpus: 1, gpuModel: H100}", 1)
		}, sim.ErrUnknownModel, `t.yaml:6: field nodePools[0].gpuModel: sim: unknown GPU model: "H100" (declare it in gpuModels)`},
		{"pod unknown gpu spec", func(s string) string {
			return strings.Replace(s, "memoryMiB: 64,", "memoryMiB: 64, gpus: 1, gpuMilli: 200, gpuSpec: [H100],", 1)
		}, sim.ErrUnknownModel, `t.yaml:9: field workload.pods[0].gpuSpec[0]: sim: unknown GPU model: "H100"`},
		{"negative memory", func(s string) string { return strings.Replace(s, "memoryMiB: 64", "memoryMiB: -64", 1) }, sim.ErrInvalid, "t.yaml:9: field workload.pods[0].memoryMiB: sim: invalid value: -64 is negative"},
		{"NaN usage", func(s string) string { return strings.Replace(s, "memoryMiB: 64", "memoryMiB: 64, usage: .nan", 1) }, sim.ErrInvalid, "t.yaml:9: field workload.pods[0].usage"},
		{"dependency to unknown service", func(s string) string {
			return s + "dependencies:\n  - {from: web, to: db, callsPerSecond: 3}\n"
		}, ErrUnknownRef, `t.yaml:11: field dependencies[0].to: scenario: unknown reference: service "db" is not in the workload`},
		{"negative call rate", func(s string) string {
			return s + "dependencies:\n  - {from: web, to: web, callsPerSecond: -3}\n"
		}, sim.ErrInvalid, "t.yaml:11: field dependencies[0].callsPerSecond"},
		{"bad duration", func(s string) string { return strings.Replace(s, "service: web}", "service: web, create: soon}", 1) }, sim.ErrInvalid, `t.yaml:9: sim: invalid value: bad duration "soon"`},
		{"delete before create", func(s string) string {
			return strings.Replace(s, "service: web}", "service: web, create: 1h, delete: 30m}", 1)
		}, sim.ErrInvalid, "t.yaml:9: field workload.pods[0].delete: sim: invalid value: 1800s is before create 3600s"},
		{"no pools", func(s string) string {
			return strings.Replace(s, "  - {name: n, count: 2, zones: [a, b], cpuMilli: 4000, memoryMiB: 4096}\n", "", 1)
		}, sim.ErrInvalid, "field nodePools"},
		{"capacity with openb", func(s string) string {
			return strings.Replace(s, "{name: n, count: 2,", "{openb: \"openb:all_node\", count: 2,", 1)
		}, sim.ErrInvalid, "t.yaml:6: field nodePools[0].count: sim: invalid value: not allowed with openb"},
		{"relative trace in builtin", func(s string) string {
			return strings.Replace(s, "  pods:", "  openb: pods.csv\n  pods:", 1)
		}, ErrUnknownRef, `t.yaml:8: field workload.openb: scenario: unknown reference: "pods.csv": built-in scenarios may only use embedded traces`},
		{"zone twice", func(s string) string { return strings.Replace(s, "{name: b}", "{name: a}", 1) }, sim.ErrDuplicate, `t.yaml:4: field zones[1].name: sim: duplicate name: "a"`},
		{"alias bomb", func(string) string {
			// each level doubles: 2^30 nodes once expanded
			doc := "a0: &a0 [x, x]\n"
			for i := 1; i <= 30; i++ {
				doc += fmt.Sprintf("a%d: &a%d [*a%d, *a%d]\n", i, i, i-1, i-1)
			}
			return doc
		}, ErrTooLarge, "once aliases are expanded"},
		{"bad taint effect", func(s string) string {
			return strings.Replace(s, "memoryMiB: 4096}", "memoryMiB: 4096, taints: [{key: k, effect: Sometimes}]}", 1)
		}, sim.ErrInvalid, "t.yaml:6: field nodePools[0].taints[0].effect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.edit(minimal)), "t.yaml", "")
			if !errors.Is(err, tt.base) {
				t.Fatalf("error = %v, want %v", err, tt.base)
			}
			var le *sim.LineError
			if !errors.As(err, &le) || le.File != "t.yaml" {
				t.Fatalf("error %v is not a LineError in t.yaml", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error\n  %q\ndoes not contain\n  %q", err, tt.want)
			}
		})
	}
}

func TestOpenBScenarioFromDisk(t *testing.T) {
	dir := t.TempDir()
	pods := "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\n" +
		"a,1000,1024,1,500,0,100\n" +
		"b,1000,1024,0,0,5,\n"
	if err := os.WriteFile(filepath.Join(dir, "pods.csv"), []byte(pods), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := `apiVersion: edgesched.io/v1alpha1
kind: Scenario
name: slice
zones: [{name: a}, {name: b}, {name: c}]
nodePools:
  - {openb: "openb:all_node", stride: 10, limit: 50, zones: [a, b, c], labels: {site: x}}
workload:
  openb: pods.csv
`
	path := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := openb.LoadNodes("openb:all_node", nil)
	// Every 10th node, first 50 of them: nodes 0, 10, ..., 490.
	if len(l.Cluster.Nodes) != 50 || l.Cluster.Nodes[1].Name != all[10].Name || l.Cluster.Nodes[2].Zone != "c" || l.Cluster.Nodes[0].Labels["site"] != "x" {
		t.Errorf("nodes: %d, second %s (want %s), third zone %s", len(l.Cluster.Nodes), l.Cluster.Nodes[1].Name, all[10].Name, l.Cluster.Nodes[2].Zone)
	}
	if len(l.Workload.Pods) != 2 || l.Workload.Pods[1].Delete != sim.NoDeletion || l.Workload.Untimed {
		t.Errorf("pods = %+v", l.Workload.Pods)
	}
	// A broken trace reports the scenario line and the trace's own line.
	if err := os.WriteFile(filepath.Join(dir, "pods.csv"), []byte(pods+"c,-1,1,0,0,0,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	if err == nil || !strings.Contains(err.Error(), "s.yaml:8: field workload.openb: ") || !strings.Contains(err.Error(), "pods.csv:4: field cpu_milli: openb: bad value: -1 is negative") {
		t.Errorf("broken trace error = %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file error = %v", err)
	}
}

func generated(t *testing.T, gen string) []sim.PodSpec {
	t.Helper()
	doc := `apiVersion: edgesched.io/v1alpha1
kind: Scenario
name: gen
seed: 3
nodePools: [{name: n, count: 1, cpuMilli: 1000, memoryMiB: 1000}]
workload:
  generator:
` + gen
	l, err := Parse([]byte(doc), "gen.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	return l.Workload.Pods
}

func TestGeneratorPoissonRate(t *testing.T) {
	pods := generated(t, `    duration: 10h
    arrivals: {ratePerHour: 3600}
    mix: [{name: j, weight: 1, lifetime: 60, template: {cpuMilli: 1}}]
`)
	// Poisson with mean 3600/h * 10h = 36000 and sd sqrt(36000) ≈ 190:
	// 5 sd = 950.
	if math.Abs(float64(len(pods))-36000) > 950 {
		t.Errorf("%d arrivals, want 36000 ± 950", len(pods))
	}
	// Exponential lifetimes with mean 60 s: the sample mean of 36000 has sd
	// 60/sqrt(36000) ≈ 0.32 s; rounding to whole seconds (min 1) shifts it
	// by < 0.5 s. Allow 2.5 s.
	var life float64
	for _, p := range pods {
		life += float64(p.Delete - p.Create)
	}
	if m := life / float64(len(pods)); math.Abs(m-60) > 2.5 {
		t.Errorf("mean lifetime %.2f s, want 60", m)
	}
}

func TestGeneratorUniformDiurnalBurst(t *testing.T) {
	// Even arrivals at 60/h for 2h: exactly 120 (the rate integral).
	even := generated(t, `    duration: 2h
    arrivals: {process: uniform, ratePerHour: 60}
    mix: [{name: j, weight: 1, lifetime: 60, fixed: true, template: {cpuMilli: 1}}]
`)
	if len(even) != 120 {
		t.Errorf("uniform process gave %d arrivals, want 120", len(even))
	}
	for _, p := range even {
		if p.Delete-p.Create != 60 {
			t.Fatalf("fixed lifetime %d, want 60", p.Delete-p.Create)
		}
	}
	// Daily cycle with amplitude .8 peaking at 12:00: the hour around the
	// peak has rate 1.8x base, the hour around midnight 0.2x: ratio ≈ 9.
	// Over 20 days at 600/h the two hours get ≈ 21600 and 2400 arrivals.
	d := generated(t, `    duration: 480h
    arrivals: {ratePerHour: 600}
    diurnal: {amplitude: 0.8, peakHour: 12}
    mix: [{name: j, weight: 1, lifetime: 60, template: {cpuMilli: 1}}]
`)
	var peak, trough float64
	for _, p := range d {
		h := math.Mod(float64(p.Create)/3600, 24)
		if h >= 11.5 && h < 12.5 {
			peak++
		}
		if h >= 23.5 || h < 0.5 {
			trough++
		}
	}
	if r := peak / trough; r < 7 || r > 11.5 {
		t.Errorf("peak/trough arrivals = %.0f/%.0f = %.2f, want ≈ 9", peak, trough, r)
	}
	// A 4x burst between 1h and 2h: ≈ 4x the arrivals of the hour before.
	b := generated(t, `    duration: 3h
    arrivals: {ratePerHour: 2000}
    bursts: [{at: 1h, duration: 1h, multiplier: 4}]
    mix:
      - {name: a, weight: 3, lifetime: 60, template: {cpuMilli: 1}}
      - {name: b, weight: 1, lifetime: 60, template: {cpuMilli: 2}}
`)
	var before, during, kindA float64
	for _, p := range b {
		switch {
		case p.Create < 3600:
			before++
		case p.Create < 7200:
			during++
		}
		if p.CPU == 1 {
			kindA++
		}
	}
	if r := during / before; r < 3.5 || r > 4.5 {
		t.Errorf("burst ratio %.0f/%.0f = %.2f, want ≈ 4", during, before, r)
	}
	// Overlapping bursts multiply: 2x on [0, 2h) and 3x on [1h, 3h) give
	// 2, 6 and 3 over the three hours.
	bt := newBurstTimeline([]Burst{{At: 0, Duration: 7200, Multiplier: 2}, {At: 3600, Duration: 7200, Multiplier: 3}})
	for _, tt := range []struct{ t, want float64 }{{-1, 1}, {0, 2}, {3599, 2}, {3600, 6}, {7199, 6}, {7200, 3}, {10799, 3}, {10800, 1}} {
		if got := bt.at(tt.t); got != tt.want {
			t.Errorf("burst multiplier at %v = %v, want %v", tt.t, got, tt.want)
		}
	}
	// Mix weights 3:1 -> 75% of kind a (n ≈ 12000, sd of the share ≈ .004).
	if s := kindA / float64(len(b)); math.Abs(s-0.75) > 0.02 {
		t.Errorf("share of kind a = %.3f, want .75", s)
	}
}

func TestGeneratorErrors(t *testing.T) {
	for _, tt := range []struct{ gen, want string }{
		{"    duration: 0\n    arrivals: {ratePerHour: 1}\n    mix: [{name: j, weight: 1, lifetime: 60}]\n", "workload.generator.duration"},
		{"    duration: 1h\n    arrivals: {ratePerHour: -1}\n    mix: [{name: j, weight: 1, lifetime: 60}]\n", "workload.generator.arrivals.ratePerHour"},
		{"    duration: 1h\n    arrivals: {ratePerHour: 1, process: hawkes}\n    mix: [{name: j, weight: 1, lifetime: 60}]\n", "workload.generator.arrivals.process"},
		{"    duration: 1h\n    arrivals: {ratePerHour: 1}\n    diurnal: {amplitude: 2}\n    mix: [{name: j, weight: 1, lifetime: 60}]\n", "workload.generator.diurnal.amplitude"},
		{"    duration: 1h\n    arrivals: {ratePerHour: 1}\n    mix: [{name: j, weight: 0, lifetime: 60}]\n", "workload.generator.mix[0].weight"},
		{"    duration: 1h\n    arrivals: {ratePerHour: 1}\n    mix: []\n", "workload.generator.mix"},
		{"    duration: 9000h\n    arrivals: {ratePerHour: 1000}\n    mix: [{name: j, weight: 1, lifetime: 60}]\n", "too large"},
		{"    duration: 10000h\n    arrivals: {ratePerHour: 1}\n    mix: [{name: j, weight: 1, lifetime: 60}]\n", "400 days"},
	} {
		doc := "apiVersion: edgesched.io/v1alpha1\nkind: Scenario\nname: g\nnodePools: [{name: n, count: 1, cpuMilli: 1, memoryMiB: 1}]\nworkload:\n  generator:\n" + tt.gen
		_, err := Parse([]byte(doc), "g.yaml", "")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("generator %q: error %v, want it to name %s", tt.gen, err, tt.want)
		}
	}
}

// fastRates is the review's scenario: a synthetic chain at 1e6 requests
// per second makes edges of up to 10 x 1e6 calls per second (apps.Synthetic
// bounds the compounding), and rates: 1000 scales them past
// sim.MaxCallRate (1e9).
const fastRates = `apiVersion: edgesched.io/v1alpha1
kind: Scenario
name: r
nodePools: [{name: n, count: 4, cpuMilli: 64000, memoryMiB: 262144}]
workload:
  apps:
    - {name: a, synthetic: {shape: chain, services: 3, rate: 1000000}, rates: 1000, template: {netMbps: 1}}
`

// TestAppRatesWithinMaxCallRate: an app instance's rates scale its call
// rates; a scaled rate beyond sim.MaxCallRate is refused by Parse at the
// instance's rates (line 7), not later by sim.NewEnv without a line, and
// what Parse accepts NewEnv accepts.
func TestAppRatesWithinMaxCallRate(t *testing.T) {
	for _, tc := range []struct {
		name, rates string
		want        string // "" = accepted
	}{
		// edges of the chain s0->s1->s2 at 1e6 x factor, capped at 1e7: x 1000 is above 1e9
		{"x1000", "rates: 1000", "r.yaml:7: field workload.apps[0].rates: sim: invalid value: dependency a/s0->a/s1: 1000 x "},
		// x 100 stays at or under 1e9 (1e7 x 100)
		{"x100", "rates: 100", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Parse([]byte(strings.Replace(fastRates, "rates: 1000", tc.rates, 1)), "r.yaml", "")
			if tc.want != "" {
				var le *sim.LineError
				if !errors.As(err, &le) || le.Line != 7 || !errors.Is(err, sim.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Parse: %v, want a line error at 7 naming %q", err, tc.want)
				}
				if !strings.Contains(err.Error(), "calls per second, want at most 1e+09") {
					t.Fatalf("Parse: %v, want it to name the limit", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sim.NewEnv(l.Cluster, l.Workload, sim.EnvOptions{}); err != nil {
				t.Fatalf("NewEnv refuses what Parse accepted: %v", err)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range Builtins() {
		b, err := BuiltinSource(name)
		if err != nil {
			f.Fatal(err)
		}
		// Shorter generators keep each execution fast enough to fuzz.
		b = []byte(strings.NewReplacer("duration: 48h", "duration: 2h", "duration: 24h", "duration: 2h").Replace(string(b)))
		f.Add(b)
	}
	f.Add([]byte(minimal))
	f.Add([]byte(strings.Replace(loaded, "duration: 24h", "duration: 2h", 1)))
	f.Add([]byte(strings.Replace(loaded, "duration: 24h", "duration: 2h", 1) + "backgroundLoad: {share: 0.3, cpu: [0.4, 0.9]}\n"))
	f.Add([]byte("a: &x [*x, *x]\n"))
	f.Add([]byte(fastRates)) // Parse accepted it, NewEnv refused it
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := Parse(b, "fuzz.yaml", "")
		if err != nil {
			return
		}
		if len(l.Cluster.Nodes) > MaxNodes || len(l.Workload.Pods) > MaxPods {
			t.Fatalf("%d nodes, %d pods exceed the limits", len(l.Cluster.Nodes), len(l.Workload.Pods))
		}
		// Whatever Parse accepts must compile.
		if _, err := sim.NewEnv(l.Cluster, l.Workload, sim.EnvOptions{}); err != nil {
			t.Fatalf("Parse accepted a scenario NewEnv refuses: %v", err)
		}
	})
}
