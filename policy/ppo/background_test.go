package ppo

import (
	"slices"
	"testing"

	"github.com/edgesched/edgesched/sim"
)

// TestBackgroundLoadEnvs: with env.backgroundLoad every environment the
// trainer builds (the base, a training episode's, an evaluation's) has
// the nodes it marks busy outside Kubernetes, the episode's and the
// evaluation's drawn from their own seeds; without it none has.
func TestBackgroundLoadEnvs(t *testing.T) {
	cfg, err := ParseConfig([]byte("env: {scenarios: [builtin:retail-stores@v2], mode: replay, freshWorkloads: true, backgroundLoad: {share: 0.5, cpu: [0.5, 0.5]}}"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	plain := cfg
	plain.Env.BackgroundLoad = nil
	for _, c := range []struct {
		name string
		cfg  *Config
		want float64
	}{{"with", &cfg, 0.5}, {"without", &plain, 0}} {
		tr := &trainer{cfg: *c.cfg}
		if err := tr.loadEnv(); err != nil {
			t.Fatal(err)
		}
		ep, err := tr.episodeEnv(7, 1)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := tr.evalEnv(2)
		if err != nil {
			t.Fatal(err)
		}
		marked := func(e *sim.Env) (marks []bool) {
			for _, n := range e.Nodes {
				if n.Background != 0 && n.Background != c.want*float64(n.CPU) {
					t.Errorf("%s background load: a node busy for %v of %d milli-CPU, want %v of it", c.name, n.Background, n.CPU, c.want)
				}
				marks = append(marks, n.Background != 0)
			}
			return marks
		}
		bm, em, vm := marked(tr.base), marked(ep), marked(ev)
		if b, e, v := slices.Contains(bm, true), slices.Contains(em, true), slices.Contains(vm, true); (c.want > 0) != (b && e && v) || b != e || e != v {
			t.Errorf("%s background load: busy nodes in the base, episode and evaluation envs: %v %v %v", c.name, b, e, v)
		}
		if c.want > 0 && slices.Equal(em, vm) {
			t.Error("the episode's and the evaluation's busy nodes are the same: not drawn from their own seeds")
		}
	}
}
