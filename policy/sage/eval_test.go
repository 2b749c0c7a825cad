package sage

import (
	"context"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/edgesched/edgesched/sim/scenario/apps"
)

// heldOutGraphs are the graphs pre-training never sees: the held-out
// library apps and synthetic graphs of every shape at three sizes (seeds
// 401+, not used elsewhere).
func heldOutGraphs(t testing.TB, sizes []int) (names []string, graphs []*Graph) {
	for _, n := range apps.Names() {
		if apps.HeldOut(n) {
			names, graphs = append(names, n), append(graphs, appGraph(t, n))
		}
	}
	for i, shape := range apps.Shapes() {
		for j, size := range sizes {
			s := apps.Spec{Shape: shape, Services: size, Seed: uint64(401 + i*len(sizes) + j)}
			names, graphs = append(names, s.Name()), append(graphs, syntheticGraph(t, s))
		}
	}
	return names, graphs
}

// TestHeldOutEval is the held-out evaluation (SAGE_EVAL=1): pre-train on
// the three training apps with five seeds, then per held-out graph the
// link-prediction AUC of the trained encoder, of its untrained start and
// of a trained one-layer encoder, with the paired difference's standard
// error over the seeds.
func TestHeldOutEval(t *testing.T) {
	if os.Getenv("SAGE_EVAL") == "" {
		t.Skip("held-out evaluation run: set SAGE_EVAL=1")
	}
	_, train := trainingApps(t)
	names, graphs := heldOutGraphs(t, []int{12, 40, 150})
	const seeds = 5
	type run struct{ trained, untrained, one, frozen float64 }
	res := make([][seeds]run, len(graphs))
	for s := range seeds {
		cfg := DefaultPretrainConfig()
		cfg.Seed = uint64(s + 1)
		enc, err := Pretrain(context.Background(), train, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := Untrained(cfg)
		one := cfg
		one.Encoder.Layers, one.Encoder.Fanouts = 1, cfg.Encoder.Fanouts[:1]
		enc1, err := Pretrain(context.Background(), train, one, nil)
		if err != nil {
			t.Fatal(err)
		}
		fr := cfg
		fr.FrozenEncoder = true
		frozen, err := Pretrain(context.Background(), train, fr, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, g := range graphs {
			a, err := LinkAUC(enc.Encoder, enc.Decoder, g)
			if err != nil {
				t.Fatalf("%s: %v", names[i], err)
			}
			b, _ := LinkAUC(u, nil, g)
			c, _ := LinkAUC(enc1.Encoder, enc1.Decoder, g)
			f, _ := LinkAUC(frozen.Encoder, frozen.Decoder, g)
			res[i][s] = run{a, b, c, f}
		}
	}
	mean := func(f func(run) float64, rs [seeds]run) (m, se float64) {
		for _, r := range rs {
			m += f(r)
		}
		m /= seeds
		var v float64
		for _, r := range rs {
			v += (f(r) - m) * (f(r) - m)
		}
		return m, math.Sqrt(v / (seeds - 1) / seeds)
	}
	t.Logf("| graph | services | trained 2 layers | untrained | trained - untrained (se) | decoder only | trained - decoder only (se) | trained 1 layer | 2 layers - 1 layer (se) |")
	var all [seeds]run
	for i, rs := range res {
		tr, _ := mean(func(r run) float64 { return r.trained }, rs)
		un, _ := mean(func(r run) float64 { return r.untrained }, rs)
		on, _ := mean(func(r run) float64 { return r.one }, rs)
		d1, se1 := mean(func(r run) float64 { return r.trained - r.untrained }, rs)
		d2, se2 := mean(func(r run) float64 { return r.trained - r.one }, rs)
		fz, _ := mean(func(r run) float64 { return r.frozen }, rs)
		d3, se3 := mean(func(r run) float64 { return r.trained - r.frozen }, rs)
		t.Logf("| %s | %d | %.3f | %.3f | %+.3f (%.3f) | %.3f | %+.3f (%.3f) | %.3f | %+.3f (%.3f) |", names[i], len(graphs[i].Services), tr, un, d1, se1, fz, d3, se3, on, d2, se2)
		for s := range seeds {
			all[s].trained += rs[s].trained / float64(len(res))
			all[s].untrained += rs[s].untrained / float64(len(res))
			all[s].one += rs[s].one / float64(len(res))
			all[s].frozen += rs[s].frozen / float64(len(res))
		}
	}
	d1, se1 := mean(func(r run) float64 { return r.trained - r.untrained }, all)
	d2, se2 := mean(func(r run) float64 { return r.trained - r.one }, all)
	d3, se3 := mean(func(r run) float64 { return r.trained - r.frozen }, all)
	tr, _ := mean(func(r run) float64 { return r.trained }, all)
	t.Log(fmt.Sprintf("mean over %d graphs, %d seeds: trained %.3f, trained - untrained %+.3f (se %.3f), trained - decoder only %+.3f (se %.3f), 2 - 1 layers %+.3f (se %.3f)", len(res), seeds, tr, d1, se1, d3, se3, d2, se2))
}
