package ppo

import "testing"

// TestBackgroundLoadEnvs: with env.backgroundLoad every environment the
// trainer builds (the base, a training episode's, an evaluation's) has
// the nodes it marks busy outside Kubernetes, the episode's and the
// evaluation's drawn from their own seeds; without it none has.
func TestBackgroundLoadEnvs(t *testing.T) {
	cfg, err := ParseConfig([]byte("env: {scenarios: [builtin:retail-stores@v2], mode: replay, freshWorkloads: true, backgroundLoad: {share: 1, cpu: [0.5, 0.5]}}"), "t.yaml")
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
		for _, e := range [...]struct {
			what       string
			nodes, cpu int
			bg         float64
		}{
			{"base", len(tr.base.Nodes), int(tr.base.Nodes[0].CPU), tr.base.Nodes[0].Background},
			{"episode", len(ep.Nodes), int(ep.Nodes[0].CPU), ep.Nodes[0].Background},
			{"evaluation", len(ev.Nodes), int(ev.Nodes[0].CPU), ev.Nodes[0].Background},
		} {
			if want := c.want * float64(e.cpu); e.bg != want || e.nodes == 0 {
				t.Errorf("%s background load: %s env's first node is busy outside Kubernetes for %v milli-CPU, want %v", c.name, e.what, e.bg, want)
			}
		}
	}
}
