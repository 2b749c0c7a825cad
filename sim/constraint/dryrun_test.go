package constraint

import (
	"context"
	"testing"

	"github.com/edgesched/edgesched/policydoc"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/scenario"
)

func loadEnv(t testing.TB, name string) *sim.Env {
	t.Helper()
	l, err := scenario.LoadWith(name, scenario.Options{})
	if err != nil {
		t.Fatal(err)
	}
	env, err := sim.NewEnv(l.Cluster, l.Workload, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func mustDoc(t testing.TB, y string) *policydoc.Document {
	t.Helper()
	d, err := policydoc.Decode([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func measure(r *Report, name string) MeasureDiff {
	for _, m := range r.Measures {
		if m.Name == name {
			return m
		}
	}
	return MeasureDiff{}
}

// TestDryRunRetailFleet: on builtin:retail-fleet (3 store zones with
// different grids), a co-location rule between checkoutservice and
// paymentservice drops that pair's cross-zone share to 0, with no
// placement breaking it; a carbon preference lowers gCO2.
func TestDryRunRetailFleet(t *testing.T) {
	env := loadEnv(t, "builtin:retail-fleet")
	base, err := baseline.Lookup(baseline.K8sDefault)
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.DefaultRunConfig(engine.Replay)
	coloc := mustDoc(t, `apiVersion: edgesched.policy/v1
kind: SchedulingPolicy
rules:
- {kind: colocate, effect: required, pods: {services: [checkoutservice, paymentservice]}, scope: zone}
`)
	rep, err := DryRun(context.Background(), env, base, coloc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Pairs) != 1 {
		t.Fatalf("pairs = %+v", rep.Pairs)
	}
	p := rep.Pairs[0]
	t.Logf("co-location: pair cross-zone share %.3f -> %.3f; %d of %d pods moved; baseline broke the rule %d times; blocked %d", p.Before, p.After, rep.Moved, rep.Pods, rep.Rules[0].BrokenBefore, rep.Rules[0].BlockedAfter)
	if p.Before <= 0 {
		t.Errorf("baseline pair share %v: the test needs a baseline that splits the pair", p.Before)
	}
	if b := rep.Rules[0].BrokenAfter; b != 0 {
		t.Errorf("%d bindings with the rule in force break it", b)
	}
	if p.After != 0 {
		t.Errorf("pair cross-zone share with the rule = %v, want 0", p.After)
	}
	carbon := mustDoc(t, `apiVersion: edgesched.policy/v1
kind: SchedulingPolicy
rules:
- {kind: carbon, effect: preferred, weight: 100, pods: {}}
`)
	rep, err = DryRun(context.Background(), env, base, carbon, cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := measure(rep, "carbon_g")
	t.Logf("carbon preference: carbon_g %.1f -> %.1f (%.1f%%); moved %d of %d", g.Before, g.After, 100*g.Change/g.Before, rep.Moved, rep.Pods)
	if !(g.After < g.Before) {
		t.Errorf("carbon_g %v -> %v: want lower", g.Before, g.After)
	}
}

// TestCarbonReference: the carbon preference's reference node is the
// simulator's default amd64 power and default GPU power, so a node
// without figures of its own and one at the defaults rank alike.
func TestCarbonReference(t *testing.T) {
	if got := sim.DefaultPower(sim.ArchAMD64).WattsPerCore; got != policydoc.RefWattsPerCore {
		t.Errorf("sim's amd64 watts per core %v, policydoc.RefWattsPerCore %v", got, policydoc.RefWattsPerCore)
	}
	if sim.DefaultGPUWatts != policydoc.RefWattsPerGPU {
		t.Errorf("sim.DefaultGPUWatts %v, policydoc.RefWattsPerGPU %v", sim.DefaultGPUWatts, policydoc.RefWattsPerGPU)
	}
	if sim.GPUWatts("Orin") != 25 || sim.GPUWatts("T4") != 70 || sim.GPUWatts("no-such") != sim.DefaultGPUWatts {
		t.Errorf("GPUWatts: Orin %v, T4 %v, unknown %v", sim.GPUWatts("Orin"), sim.GPUWatts("T4"), sim.GPUWatts("no-such"))
	}
}

// TestDryRunCountsOnlyRulesThatBlocked: a pod that fits no node for lack
// of resources never meets the document's rules, so it is not counted as
// blocked by one (the run's failure measures may look at the nodes of a
// pod that fitted nowhere; they must not ask the filter about them).
// Two 4-core amd64 nodes: a 6-core pod fits neither; a required arm64 rule
// would refuse both.
func TestDryRunCountsOnlyRulesThatBlocked(t *testing.T) {
	c := &sim.Cluster{Nodes: []sim.NodeSpec{
		{Name: "n0", CPU: 4000, Memory: 4096, Arch: sim.ArchAMD64},
		{Name: "n1", CPU: 4000, Memory: 4096, Arch: sim.ArchAMD64},
	}}
	w := &sim.Workload{Pods: []sim.PodSpec{{Name: "big", CPU: 6000, Memory: 1024, Create: 0, Delete: 10}}}
	env, err := sim.NewEnv(c, w, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base, err := baseline.Lookup(baseline.K8sDefault)
	if err != nil {
		t.Fatal(err)
	}
	doc := mustDoc(t, `apiVersion: edgesched.policy/v1
kind: SchedulingPolicy
rules:
- {kind: arch, effect: required, arch: [arm64], pods: {}}
`)
	rep, err := DryRun(context.Background(), env, base, doc, engine.DefaultRunConfig(engine.Replay))
	if err != nil {
		t.Fatal(err)
	}
	if rep.BlockedPods != 0 || rep.Rules[0].BlockedAfter != 0 {
		t.Errorf("blocked pods %d, rule blocked %d decisions; want 0 and 0 (the pod fitted no node before any rule)", rep.BlockedPods, rep.Rules[0].BlockedAfter)
	}
}
