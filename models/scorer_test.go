package models

import (
	"context"
	"math"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/sage"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/scenario"
)

// netScorer scores as the float scorer did before its shortcuts: every
// row held within the model's bounds and normalised whole, then
// Net.Scores (gonum's Sgemm over every input).
type netScorer struct {
	m   *nn.Model
	net *nn.Net
}

func (s *netScorer) Scores(raw []float32, k int, out []float32) error {
	x := append([]float32(nil), raw...)
	for i := range k {
		s.m.Schema.Clamp(x[i*policy.NumFeatures : (i+1)*policy.NumFeatures])
		s.m.Schema.Normalize(x[i*policy.NumFeatures : (i+1)*policy.NumFeatures])
	}
	sc, err := s.net.Scores(x, k)
	copy(out, sc)
	return err
}

// scoreLog keeps every score a scorer gives, in order.
type scoreLog struct {
	inner  policy.Scorer
	scores []float32
}

func (l *scoreLog) Scores(raw []float32, k int, out []float32) error {
	err := l.inner.Scores(raw, k, out)
	l.scores = append(l.scores, out[:k]...)
	return err
}

// TestFloatScorerSweepMatchesNet: through whole simulator runs, the float
// scorer the simulator and training use (nn.FloatScorer: pod features
// summed once per call, left-out inputs skipped, and under
// GOEXPERIMENT=simd on amd64 the AVX2 kernel) gives every score of the
// plain path bit for bit, so every figure measured before it stands and
// `make train` reproduces the models: each shipped model on a workload it
// was made for (default on a quarter of the openb cluster under gpuspec10,
// where a third of the pods name GPU models; the edge models on a loaded
// family, edge-loaded reading the telemetry features).
func TestFloatScorerSweepMatchesNet(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: two simulator runs per shipped model")
	}
	openbEnv := quarterEnv(t, "openb:gpuspec10")
	fam, err := scenario.Load("builtin:telco-pops")
	if err != nil {
		t.Fatal(err)
	}
	famEnv, err := sage.NewEnv(fam.Cluster, fam.Workload)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			m, err := Load(name)
			if err != nil {
				t.Fatal(err)
			}
			env, cfg := famEnv, engine.DefaultRunConfig(engine.Replay)
			if name == "default" {
				env, cfg = openbEnv, engine.DefaultRunConfig(engine.Inflate)
			}
			fs, err := nn.NewFloatScorer(m)
			if err != nil {
				t.Fatal(err)
			}
			fast := &scoreLog{inner: fs}
			plain := &scoreLog{inner: &netScorer{m: m, net: m.Net.Clone()}}
			for _, sc := range []*scoreLog{fast, plain} {
				f := sim.Factory{Name: name, New: func(env *sim.Env) (sim.Policy, error) {
					return policy.NewLearnedScorer(name, sc, m.Decision, env), nil
				}}
				if _, err := engine.Run(context.Background(), env, f, cfg); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%s: %d scores, kernel %s", name, len(fast.scores), fs.Kernel())
			if len(fast.scores) < 1000 || len(fast.scores) != len(plain.scores) {
				t.Fatalf("%d scores, the plain path %d (want equal, and at least 1,000)", len(fast.scores), len(plain.scores))
			}
			for i := range fast.scores {
				if math.Float32bits(fast.scores[i]) != math.Float32bits(plain.scores[i]) {
					t.Fatalf("score %d: %v, the plain path %v", i, fast.scores[i], plain.scores[i])
				}
			}
		})
	}
}
