package models

import (
	"context"
	"testing"

	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/agreement"
	"github.com/edgesched/edgesched/quant/int8net"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/openb"
)

// agreementFloor is the least share of decisions in which the shipped
// default model's int8 twin must pick the float policy's node, both
// deciding by the model's rule (issue 17 asks for 99%; the full openb
// cluster measured 99.5%+, docs/quant.md "Fidelity").
const agreementFloor = 0.99

// TestShippedDefaultInt8Agreement quantizes models/default.esm as
// `edgectl model quantize` does (calibration rows from the float policy's
// own replay) and counts, over a replay of openb default on every fourth
// node of the cluster (for time under the race detector) with a seed the
// calibration did not use, how often the int8 policy picks the float
// policy's node. The networks alone (no rule) are logged beside it.
func TestShippedDefaultInt8Agreement(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: replays openb default twice (float and int8)")
	}
	m, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	env := quarterEnv(t, "openb:default")
	cal := engine.DefaultRunConfig(engine.Inflate)
	cal.Seed = 1
	rows, _, err := quant.CollectRows(context.Background(), env, m.Float(), []engine.RunConfig{cal}, 5000, 1)
	if err != nil {
		t.Fatal(err)
	}
	a, err := quant.Quantize(m.Float(), rows, quant.DefaultCalibration(), quant.Info{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := int8net.New(a)
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.DefaultRunConfig(engine.Inflate)
	cfg.Seed = 2
	ag, err := agreement.Measure(context.Background(), env, m.Float(), n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("int8 vs float over %d decisions: %.4f by the rule, %.4f by the networks alone; the rule changes the float network's choice in %.4f", ag.Decisions, ag.Rate(), ag.ArgmaxRate(), float64(ag.RuleChanged)/float64(ag.Decisions))
	if ag.Decisions < 500 {
		t.Fatalf("only %d decisions with two or more candidates", ag.Decisions)
	}
	if ag.Rate() < agreementFloor {
		t.Errorf("int8 agreement by the rule %.4f < %.2f over %d decisions", ag.Rate(), agreementFloor, ag.Decisions)
	}
}

// quarterEnv is every fourth node of the openb cluster under the given
// openb pod list (a quarter of the full sweep's time).
func quarterEnv(t *testing.T, pods string) *sim.Env {
	t.Helper()
	nodes, err := openb.LoadNodes("openb:all_node", nil)
	if err != nil {
		t.Fatal(err)
	}
	var sub []sim.NodeSpec
	for i := 0; i < len(nodes); i += 4 {
		sub = append(sub, nodes[i])
	}
	pl, err := openb.LoadPods(pods, nil)
	if err != nil {
		t.Fatal(err)
	}
	env, err := sim.NewEnv(&sim.Cluster{Name: "openb-quarter", Nodes: sub}, &sim.Workload{Name: pods, Pods: pl.Pods, Untimed: !pl.Timed}, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return env
}
