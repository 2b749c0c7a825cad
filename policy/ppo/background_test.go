package ppo

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/edgesched/edgesched/policy"
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
		ep, err := tr.episodeEnv(7, 1, nil)
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

// TestCloningBackgroundLoad: bc.backgroundLoad marks busy nodes in the
// cloning episodes' environments (episodeEnv's bg, which collect passes in
// teacher mode) and nowhere else: not in the base, not in a PPO episode's
// environment, not in an evaluation's. With fixed workloads
// (freshWorkloads off) the cloning episode still gets its own stressed
// environment, the PPO episode the base.
func TestCloningBackgroundLoad(t *testing.T) {
	for _, fresh := range []bool{true, false} {
		cfg, err := ParseConfig([]byte(fmt.Sprintf("env: {scenario: builtin:retail-stores@v2, mode: replay, freshWorkloads: %v}\nbc: {teacher: dep-load, episodes: 1, epochs: 1, lr: 0.001, backgroundLoad: {share: 0.5, cpu: [0.5, 0.5]}}", fresh)), "t.yaml")
		if err != nil {
			t.Fatal(err)
		}
		tr := &trainer{cfg: cfg}
		if err := tr.loadEnv(); err != nil {
			t.Fatal(err)
		}
		busy := func(e *sim.Env) (n int) {
			for _, nd := range e.Nodes {
				if nd.Background != 0 {
					n++
				}
			}
			return n
		}
		clone, err := tr.episodeEnv(7, 1, cfg.BC.BackgroundLoad)
		if err != nil {
			t.Fatal(err)
		}
		own, err := tr.episodeEnv(7, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := tr.evalEnv(2)
		if err != nil {
			t.Fatal(err)
		}
		if busy(clone) == 0 || busy(own) != 0 || busy(tr.base) != 0 || busy(ev) != 0 {
			t.Errorf("fresh workloads %v: busy nodes in the cloning, PPO, base and evaluation envs: %d %d %d %d; want only the cloning one's",
				fresh, busy(clone), busy(own), busy(tr.base), busy(ev))
		}
		if !fresh && own != tr.base {
			t.Error("with fixed workloads a PPO episode no longer replays the base environment")
		}
	}
}

// TestCloningBackgroundLoadReachesEpisodes: the stress reaches the
// episodes the cloning stages collect (collect passes bc's and refine's
// own backgroundLoad in teacher mode). Every node 90% busy outside
// Kubernetes holds the cpu_busy feature at 0.9 or more on every row, so
// the trained model's input range (Schema.Lo) starts there; a stage
// without it collects idle nodes too.
func TestCloningBackgroundLoadReachesEpisodes(t *testing.T) {
	const stress = "backgroundLoad: {share: 1, cpu: [0.9, 0.9]}"
	stage := func(bg string) string {
		if bg != "" {
			bg = ", " + bg
		}
		return "{teacher: dep-load, episodes: 1, epochs: 1, lr: 0.001" + bg + "}"
	}
	for _, c := range []struct {
		name, bc, refine string
		busy             bool
	}{
		{"cloning stressed", stage(stress), "", true},
		{"cloning as generated", stage(""), "", false},
		{"both stages stressed", stage(stress), stage(stress), true},
		{"refine as generated", stage(stress), stage(""), false},
	} {
		doc := "seed: 3\nworkers: 1\nenv: {scenario: builtin:retail-fleet, mode: replay}\nppo: {iterations: 0}\neval: {seeds: []}\nbc: " + c.bc
		if c.refine != "" {
			doc += "\nrefine: " + c.refine
		}
		cfg, err := ParseConfig([]byte(doc), "t.yaml")
		if err != nil {
			t.Fatal(err)
		}
		res, err := Train(context.Background(), cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		lo := res.Model.Schema.Lo[policy.FirstTelemetryFeature] // cpu_busy
		if got := lo >= 0.85; got != c.busy {
			t.Errorf("%s: the lowest cpu_busy collected is %v; want every node busy: %v", c.name, lo, c.busy)
		}
	}
}
