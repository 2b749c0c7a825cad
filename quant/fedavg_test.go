package quant_test

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/ppo"
	"github.com/edgesched/edgesched/quant/esu"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/openb"
)

// fedRun is federated averaging simulated in one process: every round,
// each site fine-tunes the global model with PPO on its own data, encodes
// its weight delta with enc (int8 with error feedback: each site keeps a
// esu.Residual), and the coordinator decodes and averages the deltas
// into the global model.
func fedRun(t *testing.T, start *nn.Model, enc esu.Encoding, sites, rounds int, siteCfg func(seed uint64) ppo.Config) (*nn.Model, int, int) {
	t.Helper()
	g := &nn.Model{Schema: start.Schema, Net: start.Net.Clone()}
	var floatBytes, sent int
	residuals := make([]esu.Residual, sites)
	for r := range rounds {
		sum := make([]float32, g.Net.NumParams())
		base := g.Net.Flat()
		for s := range sites {
			cfg := siteCfg(uint64(1000*r + s + 1)) // the site's data and sampling this round
			res, err := ppo.Train(context.Background(), cfg, ppo.Options{Init: g})
			if err != nil {
				t.Fatal(err)
			}
			local := res.Model.Net.Flat()
			delta := make([]float32, len(local))
			for i := range local {
				delta[i] = local[i] - base[i]
			}
			id := "55d223a22dc037138a593bd99c6b5490256007c06af1e7c122c912b8f86a0c7b"
			b, err := residuals[s].Encode(&esu.Update{Base: id, Values: delta}, esu.Options{Encoding: enc, ChunkSize: esu.DefaultChunkSize, Seed: cfg.Seed})
			if err != nil {
				t.Fatal(err)
			}
			fb, _ := esu.Encode(&esu.Update{Base: id, Values: delta}, esu.Options{Encoding: esu.Float32})
			sent, floatBytes = sent+len(b), floatBytes+len(fb)
			u, err := esu.Decode(b, len(delta))
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range u.Values {
				sum[i] += v / float32(sites)
			}
		}
		if err := g.Net.AddFlat(sum, 1); err != nil {
			t.Fatal(err)
		}
	}
	return g, sent, floatBytes
}

// TestFederatedInt8Updates: federated training whose sites send int8
// updates reaches the quality of float32 updates (within 2% of the float
// result's unallocated GPU share, or better), for a quarter of the bytes,
// and moves the network as far and the same way.
// The two arms' trajectories part after the first rounding, so the gap is
// one of two training runs, not of the codec alone: on the ten evaluation
// seeds it measured 1.4% before the trainer stopped reading inputs that
// were constant in its data (5 December 2026) and 1.5% after; on the two
// seeds the test used before, +0.4% and then 1.8%, which a 1% bound
// could not tell from noise.
// Both arms start from the same cloned policy and use the same seeds; only
// the update codec differs.
func TestFederatedInt8Updates(t *testing.T) {
	if testing.Short() {
		t.Skip("federated training simulation: 2 arms x 3 sites x 4 rounds of PPO (-short)")
	}
	env, err := openb.LoadEnv("openb:"+openb.AllNodes, "openb:"+openb.Default)
	if err != nil {
		t.Fatal(err)
	}
	// The common starting point: a policy cloned from FGD on small slices.
	cfg := ppo.DefaultConfig()
	cfg.Seed = 3
	cfg.Env.NodeFraction = 0.04
	cfg.BC.Episodes, cfg.BC.Epochs = 6, 4
	cfg.PPO.Iterations = 0
	cfg.Eval.Seeds = nil
	// openb has no architectures: the network leaves the arch features
	// out, as the shipped default model does (the same weights and run as
	// before they existed)
	cfg.Net.Exclude = []string{"arch"}
	start, err := ppo.Train(context.Background(), cfg, ppo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eval := func(m *nn.Model) float64 {
		var sum float64
		seeds := []uint64{2001, 2002, 2003, 2004, 2005, 2006, 2007, 2008, 2009, 2010}
		for _, seed := range seeds {
			rc := engine.DefaultRunConfig(engine.Inflate)
			rc.Seed, rc.InflateTarget = seed, 1.05
			res, err := engine.Run(context.Background(), env, nn.Factory("g", m), rc)
			if err != nil {
				t.Fatal(err)
			}
			sum += res.Measures["unallocated_gpu_share_at_100"] / float64(len(seeds))
		}
		return sum
	}
	site := func(seed uint64) ppo.Config {
		cfg := ppo.DefaultConfig()
		cfg.Name, cfg.Seed = "site", seed
		cfg.Env.NodeFraction, cfg.Env.InflateTarget = 0.04, 1.0
		cfg.BC.Episodes = 0
		cfg.PPO.Iterations, cfg.PPO.EpisodesPerIter, cfg.PPO.Epochs, cfg.PPO.LR = 2, 2, 2, 1e-3
		cfg.Eval.Seeds = nil
		cfg.Net.Exclude = []string{"arch"}
		return cfg
	}
	f32, fBytes, _ := fedRun(t, start.Model, esu.Float32, 3, 4, site)
	i8, iBytes, _ := fedRun(t, start.Model, esu.Int8, 3, 4, site)
	ef, ei := eval(f32), eval(i8)
	t.Logf("start %.4f; after 4 rounds: float32 updates %.4f (%d bytes sent), int8 updates %.4f (%d bytes, %.2fx less)", eval(start.Model), ef, fBytes, ei, iBytes, float64(fBytes)/float64(iBytes))
	// Lower is better: int8 may not be more than 2% worse.
	if rel := (ei - ef) / ef; rel > 0.02 {
		t.Fatalf("int8 updates reach %.4f, float32 updates %.4f: %.1f%% worse", ei, ef, 100*rel)
	}
	// The federations barely change the measure from the start (a fine-tune
	// of a cloned policy), so the measure alone would pass a codec that
	// delivered nothing. Both federations must have moved the network as
	// far and the same way: the int8 one's distance from the start within
	// 20% of the float one's, and the cosine of the two displacements above
	// 0.7 (measured: distances 0.437 and 0.453, cosine 0.863; not 1, since
	// the trajectories part after the first rounding; a codec sending noise
	// of the right size would give a cosine near 0, one sending nothing a
	// distance of 0).
	dist, cos := displacement(start.Model, f32, i8)
	t.Logf("distance from the start: float32 federation %.4f, int8 %.4f; cosine of the two displacements %.3f", dist[0], dist[1], cos)
	if r := dist[1] / dist[0]; !(r > 0.8 && r < 1.25) || !(cos > 0.7) {
		t.Fatalf("the int8 federation moved the network %.4f from the start, the float32 one %.4f (ratio %.3f), cosine %.3f: want a ratio in (0.8, 1.25) and a cosine above 0.7", dist[1], dist[0], r, cos)
	}
}

// displacement returns the Euclidean distances of a's and b's parameters
// from start's, and the cosine between the two displacements.
func displacement(start, a, b *nn.Model) ([2]float64, float64) {
	s, x, y := start.Net.Flat(), a.Net.Flat(), b.Net.Flat()
	var dx, dy, dot float64
	for i := range s {
		u, v := float64(x[i]-s[i]), float64(y[i]-s[i])
		dx, dy, dot = dx+u*u, dy+v*v, dot+u*v
	}
	return [2]float64{math.Sqrt(dx), math.Sqrt(dy)}, dot / math.Sqrt(dx*dy)
}

// TestFederatedInt8UpdatesEdge is the same comparison where federated
// training learns a lot: the retail fleet from an untrained network, the
// edge reward of configs/train-edge.yaml. It takes minutes, so it runs
// only with EDGESCHED_LONG=1.
func TestFederatedInt8UpdatesEdge(t *testing.T) {
	if os.Getenv("EDGESCHED_LONG") == "" {
		t.Skip("minutes of federated PPO on the retail fleet; set EDGESCHED_LONG=1 to run it")
	}
	base, err := ppo.LoadConfig("../configs/train-edge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	site := func(seed uint64) ppo.Config {
		cfg := base
		cfg.Seed = seed
		cfg.PPO.Iterations = 3
		cfg.Eval.Seeds = nil
		return cfg
	}
	net, err := nn.NewNet(policy.NumFeatures, base.Net.Hidden1, base.Net.Hidden2, base.Net.CriticHidden, rand.New(rand.NewPCG(42, 1)))
	if err != nil {
		t.Fatal(err)
	}
	// Normalisation from one untrained episode, as training from scratch does.
	stats := base
	stats.PPO.Iterations, stats.Eval.Seeds = 0, nil
	first, err := ppo.Train(context.Background(), stats, ppo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := &nn.Model{Schema: first.Model.Schema, Net: net}
	eval := func(m *nn.Model) float64 {
		cfg := base
		cfg.PPO.Iterations = 0
		cfg.Eval.Seeds = []uint64{101, 102, 103}
		res, err := ppo.Train(context.Background(), cfg, ppo.Options{Init: m})
		if err != nil {
			t.Fatal(err)
		}
		return res.Best
	}
	// Three federations per arm (site seeds offset by 0, 500, 1000), so the
	// comparison is not one run's luck.
	const sites, rounds = 3, 8
	e0 := eval(start)
	var ef, ei float64
	var fBytes, iBytes int
	for _, off := range []uint64{0, 500, 1000} {
		shifted := func(seed uint64) ppo.Config { return site(seed + off) }
		f32, fb, _ := fedRun(t, start, esu.Float32, sites, rounds, shifted)
		i8, ib, _ := fedRun(t, start, esu.Int8, sites, rounds, shifted)
		vf, vi := eval(f32), eval(i8)
		t.Logf("federation %d: float32 updates %.2f, int8 updates %.2f", off, vf, vi)
		ef, ei, fBytes, iBytes = ef+vf/3, ei+vi/3, fBytes+fb, iBytes+ib
	}
	t.Logf("greedy reward on held-out workloads 101-103 (mean of 3 federations): start %.2f; after %d rounds x %d sites: float32 updates %.2f (%d bytes), int8 updates %.2f (%d bytes, %.2fx less)", e0, rounds, sites, ef, fBytes, ei, iBytes, float64(fBytes)/float64(iBytes))
	// Higher is better; int8 may fall short of float32 by 1% of its value.
	if ei < ef-0.01*math.Abs(ef) {
		t.Fatalf("int8 updates reach %.3f, float32 updates %.3f (start %.3f)", ei, ef, e0)
	}
}
