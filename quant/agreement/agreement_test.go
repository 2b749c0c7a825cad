package agreement

import (
	"context"
	"testing"

	"github.com/edgesched/edgesched/internal/testutil/modeltest"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/sage"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/int8net"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/scenario"
)

// TestMeasure: the int8 policy agrees with the float policy on most
// decisions of a replay, and on all of them when a wide band hands every
// decision to the rule.
func TestMeasure(t *testing.T) {
	l, err := scenario.Load("builtin:factory-vision")
	if err != nil {
		t.Fatal(err)
	}
	env, err := sage.NewEnv(l.Cluster, l.Workload)
	if err != nil {
		t.Fatal(err)
	}
	m := modeltest.Random(t, 32, 32, 21)
	rows, seen, err := quant.CollectRows(context.Background(), env, m.Float(), []engine.RunConfig{engine.DefaultRunConfig(engine.Replay)}, 5000, 1)
	if err != nil || seen == 0 || len(rows) != min(seen, 5000)*policy.NumFeatures {
		t.Fatalf("CollectRows: %d rows of %d seen, %v", len(rows)/policy.NumFeatures, seen, err)
	}
	a, err := quant.Quantize(m.Float(), rows, quant.DefaultCalibration(), quant.Info{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := int8net.New(a)
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.DefaultRunConfig(engine.Replay)
	cfg.Seed = 2
	ag, err := Measure(context.Background(), env, m.Float(), n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("agreement %.4f over %d decisions", ag.Rate(), ag.Decisions)
	if ag.Decisions == 0 || ag.Rate() < 0.8 || ag.SameArgmax != ag.Same {
		t.Fatalf("agreement %.3f (argmax %d of %d) over %d decisions", ag.Rate(), ag.SameArgmax, ag.Same, ag.Decisions)
	}
	// A band wider than any score range hands every decision to FGD's
	// score, computed alike on both paths: full agreement by the rule.
	// (Without the scenario's dependencies: the rule leaves pods with a
	// placed dependency neighbour to the networks.)
	l.Workload.Dependencies = nil
	if env, err = sage.NewEnv(l.Cluster, l.Workload); err != nil {
		t.Fatal(err)
	}
	wide := *m
	wide.Decision = policy.Decision{Band: policy.MaxBand}
	a.Header.Decision = wide.Decision
	nw, err := int8net.New(a)
	if err != nil {
		t.Fatal(err)
	}
	aw, err := Measure(context.Background(), env, wide.Float(), nw, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wide band: agreement %.4f, networks' argmax %.4f, over %d decisions", aw.Rate(), aw.ArgmaxRate(), aw.Decisions)
	if aw.Decisions == 0 || aw.Same != aw.Decisions {
		t.Fatalf("wide band: %d of %d decisions agree", aw.Same, aw.Decisions)
	}
	if _, err := engine.Run(context.Background(), env, int8net.Factory("int8", n), cfg); err != nil {
		t.Fatal(err)
	}
}
