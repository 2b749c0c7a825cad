package policy_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/sage"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/scenario"
)

// uncached scores every candidate with a fresh Learned, so no cache entry
// can ever be reused: the reference for the cached policy.
type uncached struct {
	m   *nn.Model
	env *sim.Env
}

func (u *uncached) Name() string { return "uncached" }

func (u *uncached) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	l, err := nn.NewLearned("fresh", u.m, u.env)
	if err != nil {
		panic(err)
	}
	l.Score(st, p, nodes, scores)
}

func (u *uncached) PickGPUs(st *sim.State, p *sim.Pod, n int, dst []int) []int {
	l, _ := nn.NewLearned("fresh", u.m, u.env)
	return l.PickGPUs(st, p, n, dst)
}

func randomModel(t *testing.T, seed uint64) *nn.Model {
	t.Helper()
	net, err := nn.NewNet(policy.NumFeatures, 16, 8, 8, rand.New(rand.NewPCG(seed, 2)))
	if err != nil {
		t.Fatal(err)
	}
	return &nn.Model{Schema: policy.NewSchema(), Net: net}
}

// bindings runs f and records every binding as "pod@node".
func bindings(t *testing.T, env *sim.Env, f sim.Factory, cfg engine.RunConfig) []string {
	t.Helper()
	var out []string
	cfg.OnBind = func(st *sim.State, p *sim.Pod, n int, gpus []int) {
		out = append(out, fmt.Sprintf("%d@%d%v", p.Template, n, gpus))
	}
	if _, err := engine.Run(context.Background(), env, f, cfg); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLearnedCacheIsExact: the per-(node, shape) score cache must never
// change a decision. Replay on both built-in scenarios exercises node
// versions (binds and deletions), service placement (dependency
// features) and the carbon hour; every binding must match a policy that
// recomputes every score.
//
// The mixed variants give pods of one request shape different QoS
// classes and priorities (as openb's traces do), which the shape does not
// distinguish but the features read: a cache keyed by shape alone once
// changed openb decisions after about 1,700 bindings.
func TestLearnedCacheIsExact(t *testing.T) {
	for _, name := range scenario.Builtins() {
		for _, mixed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/mixed=%v", name, mixed), func(t *testing.T) {
				testLearnedCacheIsExact(t, name, mixed)
			})
		}
	}
}

func testLearnedCacheIsExact(t *testing.T, name string, mixed bool) {
	l, err := scenario.Load("builtin:" + name)
	if err != nil {
		t.Fatal(err)
	}
	if mixed {
		qos := []sim.QoS{sim.QoSLS, sim.QoSBurstable, sim.QoSBE}
		for i := range l.Workload.Pods {
			l.Workload.Pods[i].QoS = qos[i%3]
			l.Workload.Pods[i].Priority = int32(i % 2 * 1000)
		}
	}
	env, err := sage.NewEnv(l.Cluster, l.Workload)
	if err != nil {
		t.Fatal(err)
	}
	m := randomModel(t, 5)
	cfg := engine.DefaultRunConfig(engine.Replay)
	cached := bindings(t, env, nn.Factory("learned", m), cfg)
	fresh := bindings(t, env, sim.Factory{Name: "uncached", New: func(env *sim.Env) (sim.Policy, error) {
		return &uncached{m: m, env: env}, nil
	}}, cfg)
	if len(cached) == 0 {
		t.Fatal("no bindings")
	}
	if i := firstDiff(cached, fresh); i >= 0 {
		t.Fatalf("binding %d of %d differs: cached %s, fresh %s", i, len(cached), at(cached, i), at(fresh, i))
	}
}

func firstDiff(a, b []string) int {
	if slices.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "<none>"
}

func TestNewLearnedRefusesBadModels(t *testing.T) {
	l, err := scenario.Load("builtin:factory-vision")
	if err != nil {
		t.Fatal(err)
	}
	env, err := sage.NewEnv(l.Cluster, l.Workload)
	if err != nil {
		t.Fatal(err)
	}
	m := randomModel(t, 1)
	m.Schema.Std[3] = 0
	if _, err := nn.NewLearned("x", m, env); err == nil {
		t.Fatal("zero std accepted")
	}
	m = randomModel(t, 1)
	m.Net = nil
	if _, err := nn.NewLearned("x", m, env); err == nil {
		t.Fatal("missing network accepted")
	}
}
