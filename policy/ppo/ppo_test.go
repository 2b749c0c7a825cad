package ppo

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
	"github.com/edgesched/edgesched/sim/openb"
	"github.com/edgesched/edgesched/sim/scenario"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want string // "" = accepted
	}{
		{"empty keeps defaults", "", ""},
		{"scenario replaces the default trace", "env: {scenario: builtin:retail-fleet, mode: replay}", ""},
		{"scenario and pods", "env: {scenario: builtin:retail-fleet, pods: openb:default}", "env: give scenario"},
		{"several scenarios", "env: {scenarios: [builtin:retail-stores, builtin:telco-pops], mode: replay, freshWorkloads: true}", ""},
		{"scenarios without fresh workloads", "env: {scenarios: [builtin:retail-stores], mode: replay}", "env.scenarios"},
		{"scenario and scenarios", "env: {scenario: builtin:retail-fleet, scenarios: [builtin:telco-pops], mode: replay, freshWorkloads: true}", "env.scenarios"},
		{"versioned training families", "env: {scenarios: [builtin:retail-stores@v1, builtin:telco-pops@v2], mode: replay, freshWorkloads: true}", ""},
		{"held-out family", "env: {scenarios: [builtin:retail-stores, builtin:rail-stations@v1], mode: replay, freshWorkloads: true}", "builtin:rail-stations@v1 is a held-out family"},
		{"held-out family as the scenario", "env: {scenario: builtin:media-campus, mode: replay}", "builtin:media-campus is a held-out family"},
		{"excluded telemetry", "network: {exclude: [telemetry, dep_rtt]}", ""},
		{"unknown excluded feature", "network: {exclude: [telemetri]}", "network.exclude"},
		{"unknown field", "ppo:\n  iterationz: 3\n", "line 2: field iterationz not found"},
		{"wrong kind", "kind: Deployment", "kind"},
		{"bad mode", "env: {mode: batch}", "env.mode"},
		{"node fraction zero", "env: {nodeFraction: 0}", "env.nodeFraction"},
		{"clip out of range", "ppo: {clip: 1.5}", "ppo.clip"},
		{"negative reward weight", "reward: {crossZone: -1}", "reward"},
		{"negative per-pod cross-zone weight", "reward: {crossZonePod: -1}", "reward"},
		{"NaN learning rate", "ppo: {lr: .nan}", "ppo"},
		{"bc without teacher", "bc: {teacher: '', episodes: 3}", "bc"},
		{"lookahead out of range", "bc: {teacher: fgd-lookahead, lookahead: {topK: 1, horizon: 10, samples: 1}}", "lookahead"},
		// 64 x 64 x 10,000 pods a decision: hours each on openb
		{"lookahead too dear", "bc: {teacher: fgd-lookahead, lookahead: {topK: 64, horizon: 10000, samples: 64}}", "40960000 pods a decision, above 1000000"},
		{"warm start without bounds order", "env: {warmStart: [0.9, 0.5]}", "env.warmStart"},
		{"too many workers", "workers: 1000", "workers"},
		{"background load", "env: {scenarios: [builtin:retail-stores@v2], mode: replay, freshWorkloads: true, backgroundLoad: {share: 0.25, cpu: [0.2, 0.8]}}", ""},
		{"background load on openb", "env: {backgroundLoad: {share: 0.25, cpu: [0.2, 0.8]}}", "env.backgroundLoad"},
		{"background load range", "env: {scenario: builtin:retail-fleet, mode: replay, backgroundLoad: {share: 0.25, cpu: [0.8, 0.2]}}", "env.backgroundLoad"},
		{"background load without a range", "env: {scenario: builtin:retail-fleet, mode: replay, backgroundLoad: {share: 0.25}}", "cpu [], want [min, max]"},
		{"background load in cloning", "env: {scenarios: [builtin:retail-stores@v2], mode: replay, freshWorkloads: true}\nbc: {teacher: dep-load, episodes: 1, epochs: 1, lr: 0.001, backgroundLoad: {share: 0.25, cpu: [0.2, 0.8]}}", ""},
		{"background load without cloning", "env: {scenario: builtin:retail-fleet, mode: replay}\nbc: {teacher: dep-load, episodes: 0, backgroundLoad: {share: 0.25, cpu: [0.2, 0.8]}}", "bc.episodes is 0"},
		{"background load in cloning on openb", "bc: {teacher: fgd, episodes: 1, epochs: 1, lr: 0.001, backgroundLoad: {share: 0.25, cpu: [0.2, 0.8]}}", "bc.backgroundLoad"},
		{"background load in cloning, range", "env: {scenario: builtin:retail-fleet, mode: replay}\nbc: {teacher: dep-load, episodes: 1, epochs: 1, lr: 0.001, backgroundLoad: {share: 2, cpu: [0.2, 0.8]}}", "bc.backgroundLoad"},
		{"background load in refining, range", "env: {scenario: builtin:retail-fleet, mode: replay}\nrefine: {teacher: dep-load, episodes: 1, epochs: 1, lr: 0.001, backgroundLoad: {share: 0.2, cpu: [0.9, 0.2]}}", "refine.backgroundLoad"},
		{"decision band", "decision: {band: 4}", ""},
		{"negative decision band", "decision: {band: -1}", "decision"},
		{"NaN decision band", "decision: {band: .nan}", "decision"},
		{"whole-GPU band", "decision: {band: 4, wholeGPUBand: 8}", ""},
		{"negative whole-GPU band", "decision: {band: 4, wholeGPUBand: -8}", "wholeGPUBand -8"},
		{"strand weight", "decision: {band: 6, pressureWeight: 10, strandWeight: 20}\nbc: {teacher: fgd-strand, strandWeight: 5, episodes: 1, epochs: 1, lr: 0.001}", ""},
		{"negative strand weight", "decision: {band: 6, strandWeight: -1}", "strandWeight -1"},
		{"strand weight beside a cap", "decision: {cpuCap: 0.8, strandWeight: 20}", "not both"},
		{"negative teacher strand weight", "bc: {teacher: fgd-strand, strandWeight: -1, episodes: 1, epochs: 1, lr: 0.001}", "strandWeight in [0, 1e6]"},
		{"CPU cap", "decision: {cpuCap: 0.8}", ""},
		{"CPU cap above 1", "decision: {cpuCap: 1.2}", "cpuCap 1.2"},
		{"CPU cap beside a band", "decision: {band: 4, cpuCap: 0.8}", "not both"},
		{"CPU and busy caps", "decision: {cpuCap: 0.8, busyCap: 0.9}", ""},
		{"busy cap above 1", "decision: {busyCap: 1.5}", "busyCap 1.5"},
		{"busy cap beside a band", "decision: {band: 4, busyCap: 0.9}", "not both"},
		{"not yaml", "{{{", "ppo: bad config"},
		// The counts are capped (MaxEpisodes, MaxEpochs, MaxIterations,
		// MaxMinibatch): training sizes slices by them up front, so 1e15
		// episodes panicked in makeslice and 1e10 asked for 80 GB.
		{"bc episodes beyond the cap", "bc: {episodes: 1000000000000000}", "bc.episodes: 1000000000000000, want at most 10000"},
		{"bc epochs beyond the cap", "bc: {epochs: 1000001}", "bc.epochs: 1000001, want at most 1000000"},
		{"refine episodes beyond the cap", "refine: {teacher: fgd, episodes: 10001, epochs: 1, lr: 0.001}", "refine.episodes: 10001, want at most 10000"},
		{"refine epochs beyond the cap", "refine: {teacher: fgd, episodes: 1, epochs: 1000001, lr: 0.001}", "refine.epochs: 1000001, want at most 1000000"},
		{"ppo iterations beyond the cap", "ppo: {iterations: 1000001}", "ppo.iterations: 1000001, want at most 1000000"},
		{"ppo episodes beyond the cap", "ppo: {episodesPerIteration: 10000000000}", "ppo.episodesPerIteration: 10000000000, want at most 10000"},
		{"ppo epochs beyond the cap", "ppo: {epochs: 1000001}", "ppo.epochs: 1000001, want at most 1000000"},
		{"ppo minibatch beyond the cap", "ppo: {minibatch: 1000001}", "ppo.minibatch: 1000001, want at most 1000000"},
		// every cap is itself accepted
		{"counts at their caps", "bc: {episodes: 10000, epochs: 1000000}\nrefine: {teacher: fgd, episodes: 10000, epochs: 1000000, lr: 0.001}\nppo: {iterations: 1000000, episodesPerIteration: 10000, epochs: 1000000, minibatch: 1000000}", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.yaml), "t.yaml")
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(tc.yaml, "scenario") && (c.Env.Nodes != "" || c.Env.Pods != "") {
					t.Fatalf("default trace kept beside the scenario: %+v", c.Env)
				}
				// The recorded YAML parses back to the same configuration.
				c2, err := ParseConfig(c.YAML(), "again")
				if err != nil || !bytes.Equal(c.YAML(), c2.YAML()) {
					t.Fatalf("round trip: %v\n%s\n%s", err, c.YAML(), c2.YAML())
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "t.yaml") {
				t.Fatalf("err %v, want ErrConfig naming t.yaml and %q", err, tc.want)
			}
		})
	}
}

func TestConfigFilesInRepo(t *testing.T) {
	paths, _ := filepath.Glob("../../configs/train-*.yaml")
	if len(paths) == 0 {
		t.Fatal("no configs/train-*.yaml found")
	}
	for _, p := range paths {
		if _, err := LoadConfig(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func episodeOf(rewards, values []float32) *episode {
	ep := &episode{}
	for i := range rewards {
		ep.steps = append(ep.steps, step{reward: rewards[i], value: values[i]})
	}
	return ep
}

func TestGAE(t *testing.T) {
	// rewards 1, 0, 2; values 0.5, 0.4, 1.0; gamma 0.9, lambda 0.8; the
	// value after the last step is 0.
	//   delta2 = 2 - 1.0                  = 1.0   adv2 = 1.0
	//   delta1 = 0 + 0.9*1.0 - 0.4        = 0.5   adv1 = 0.5 + 0.72*1.0   = 1.22
	//   delta0 = 1 + 0.9*0.4 - 0.5        = 0.86  adv0 = 0.86 + 0.72*1.22 = 1.7384
	// returns = adv + value: 2.2384, 1.62, 2.0.
	// With lambda 1 GAE is the Monte Carlo return minus the value:
	//   returns 1 + 0.9*(0 + 0.9*2) = 2.62, 0.9*2 = 1.8, 2.
	for _, tc := range []struct {
		name          string
		lambda        float64
		wantAdv, wRet []float64
	}{
		{"lambda 0.8", 0.8, []float64{1.7384, 1.22, 1.0}, []float64{2.2384, 1.62, 2.0}},
		{"lambda 1 is Monte Carlo", 1, []float64{2.12, 1.4, 1.0}, []float64{2.62, 1.8, 2.0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := episodeOf([]float32{1, 0, 2}, []float32{0.5, 0.4, 1.0})
			gae([]*episode{ep}, 0.9, tc.lambda)
			for i, s := range ep.steps {
				if math.Abs(float64(s.adv)-tc.wantAdv[i]) > 1e-5 || math.Abs(float64(s.ret)-tc.wRet[i]) > 1e-5 {
					t.Errorf("step %d: adv %v ret %v, want %v %v", i, s.adv, s.ret, tc.wantAdv[i], tc.wRet[i])
				}
			}
			mc := episodeOf([]float32{1, 0, 2}, []float32{0.5, 0.4, 1.0})
			returnsToGo([]*episode{mc}, 0.9)
			for i, s := range mc.steps {
				// returnsToGo is the lambda-1 return whatever the values
				if want := []float64{2.62, 1.8, 2.0}[i]; math.Abs(float64(s.ret)-want) > 1e-5 {
					t.Errorf("returnsToGo step %d: %v, want %v", i, s.ret, want)
				}
			}
		})
	}
}

// surrogate is the PPO loss for one decision computed from the logits
// directly (independently of policyGrad's closed-form gradient).
func surrogate(logits []float64, action int, oldLogp, adv, clip, ent float64) float64 {
	mx := math.Inf(-1)
	for _, l := range logits {
		mx = math.Max(mx, l)
	}
	var z float64
	for _, l := range logits {
		z += math.Exp(l - mx)
	}
	lp := func(i int) float64 { return logits[i] - mx - math.Log(z) }
	var h float64
	for i := range logits {
		h -= math.Exp(lp(i)) * lp(i)
	}
	r := math.Exp(lp(action) - oldLogp)
	return -math.Min(r*adv, math.Max(math.Min(r, 1+clip), 1-clip)*adv) - ent*h
}

func TestPolicyGradFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, tc := range []struct {
		name         string
		oldShift     float64 // old log-prob = current + shift: ratio = exp(-shift)
		adv, entropy float64
	}{
		{"inside the clip, positive advantage", 0.05, 1.3, 0},
		{"inside the clip, negative advantage", -0.05, -0.7, 0},
		{"clipped above, positive advantage", -0.5, 1.0, 0},   // ratio 1.65 > 1.2: no surrogate gradient
		{"above the clip, negative advantage", -0.5, -1.0, 0}, // pessimistic branch keeps the gradient
		{"clipped below, negative advantage", 0.5, -1.0, 0},
		{"entropy only", 0.5, -1.0, 0.3},
		{"everything", 0.02, 0.8, 0.05},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := 5
			logits := make([]float64, k)
			for i := range logits {
				logits[i] = rng.NormFloat64()
			}
			action := 2
			var buf []float64
			l32 := make([]float32, k)
			for i := range l32 {
				l32[i] = float32(logits[i])
			}
			lp := append([]float64(nil), logSoftmax(l32, &buf)...)
			old := lp[action] + tc.oldShift
			d := make([]float32, k)
			loss, _ := policyGrad(lp, action, old, tc.adv, 0.2, tc.entropy, d)
			if want := surrogate(logits, action, old, tc.adv, 0.2, tc.entropy); math.Abs(loss-tc.entropy*entropyOf(lp)-want) > 1e-5 {
				t.Fatalf("loss %v, reference %v", loss-tc.entropy*entropyOf(lp), want)
			}
			const h = 1e-6
			for i := range logits {
				up := append([]float64(nil), logits...)
				dn := append([]float64(nil), logits...)
				up[i] += h
				dn[i] -= h
				num := (surrogate(up, action, old, tc.adv, 0.2, tc.entropy) - surrogate(dn, action, old, tc.adv, 0.2, tc.entropy)) / (2 * h)
				if math.Abs(num-float64(d[i])) > 1e-4 {
					t.Errorf("d/dlogit %d: analytic %v, numeric %v", i, d[i], num)
				}
			}
		})
	}
}

func entropyOf(lp []float64) float64 {
	var h float64
	for _, l := range lp {
		h -= math.Exp(l) * l
	}
	return h
}

func TestAdamAndClip(t *testing.T) {
	net, err := nn.NewNet(policy.NumFeatures, 2, 2, 2, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	before := net.Clone()
	g := net.Clone()
	g.Zero()
	b1 := data(g.Params()[1]) // b1, 2 entries
	b1[0], b1[1] = 3, -4
	// global norm 5; clipped to 1 the gradient is (0.6, -0.8).
	if n := clipNorm(g, 1); math.Abs(n-5) > 1e-6 || math.Abs(float64(b1[0])-0.6) > 1e-6 || math.Abs(float64(b1[1])+0.8) > 1e-6 {
		t.Fatalf("clipNorm: norm %v, gradient %v", n, b1)
	}
	// Adam's first step moves each parameter by lr * g / |g| (bias
	// correction makes m = g, v = g^2): +-0.01 here; untouched where g=0.
	opt := newAdam(net)
	opt.apply(net, g, 0.01)
	after := data(net.Params()[1])
	orig := data(before.Params()[1])
	if math.Abs(float64(after[0]-orig[0])+0.01) > 1e-6 || math.Abs(float64(after[1]-orig[1])-0.01) > 1e-6 {
		t.Fatalf("adam step: %v -> %v", orig, after)
	}
	if data(net.Params()[0])[0] != data(before.Params()[0])[0] {
		t.Fatal("adam moved a parameter with zero gradient")
	}
}

// tinyConfig trains on a 2% slice of the openb cluster (~24 nodes) to a
// 40% fill: seconds, not minutes.
func tinyConfig(iterations int) Config {
	c := DefaultConfig()
	c.Name = "tiny"
	c.Seed = 5
	c.Env.NodeFraction = 0.02
	c.Env.InflateTarget = 0.4
	c.BC.Episodes, c.BC.Epochs = 2, 2
	c.PPO.Iterations, c.PPO.EpisodesPerIter, c.PPO.Epochs, c.PPO.Minibatch = iterations, 2, 2, 64
	c.Eval = Eval{Seeds: []uint64{1001}, Every: 1, Measure: "reward", Maximize: true, InflateTarget: 0.05}
	c.CheckpointEvery = 1
	c.Decision.Band = 2.5
	return c
}

// TestTrainResumeIsExact: a run of 3 iterations equals a run of 1
// iteration resumed to 3, byte for byte, and the outputs are all there.
func TestTrainResumeIsExact(t *testing.T) {
	if testing.Short() {
		t.Skip("trains three tiny policies (-short)")
	}
	ctx := context.Background()
	full, part := t.TempDir(), t.TempDir()
	res, err := Train(ctx, tinyConfig(3), Options{Out: full})
	if err != nil {
		t.Fatal(err)
	}
	if res.Iterations != 3 || len(res.History) != 2+3 { // 2 cloning epochs, 3 PPO iterations
		t.Fatalf("iterations %d, history %d rows", res.Iterations, len(res.History))
	}
	for _, f := range []string{ModelFile, CheckpointFile, HistoryFile, ConfigFile} {
		if st, err := os.Stat(filepath.Join(full, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}
	d, err := nn.ReadFile(res.ModelPath)
	if err != nil {
		t.Fatal(err)
	}
	if d.Model.Meta["name"] != "tiny" || d.Model.Meta["seed"] != float64(5) {
		t.Fatalf("provenance %v", d.Model.Meta)
	}
	// The decision rule is written into the final model only; training
	// and selection decide by argmax, so the weights do not depend on it.
	if d.Model.Decision.Band != 2.5 {
		t.Fatalf("decision %+v, want band 2.5", d.Model.Decision)
	}
	noBand := tinyConfig(3)
	noBand.Decision.Band = 0
	res0, err := Train(ctx, noBand, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res0.Model.Net.Flat(), d.Model.Net.Flat()) || res0.Model.Decision.Band != 0 {
		t.Fatal("the decision band changed the trained weights")
	}
	if _, err := Train(ctx, tinyConfig(1), Options{Out: part}); err != nil {
		t.Fatal(err)
	}
	res2, err := Train(ctx, tinyConfig(3), Options{Out: part, Resume: filepath.Join(part, CheckpointFile)})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(res.ModelPath)
	b, _ := os.ReadFile(res2.ModelPath)
	if !bytes.Equal(a, b) {
		t.Fatal("resumed training differs from the uninterrupted run")
	}
	// The final checkpoints hold the same network, optimiser moments and
	// best network (their histories differ only in wall-clock seconds).
	weights := func(dir string) []byte {
		d, err := nn.ReadFile(filepath.Join(dir, CheckpointFile))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := nn.Encode(&buf, d.Model, "checkpoint", d.Sections, nil); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	if !bytes.Equal(weights(full), weights(part)) {
		t.Fatal("final checkpoints differ")
	}

	// A checkpoint refuses a different configuration, and a model file is
	// not a checkpoint.
	other := tinyConfig(3)
	other.PPO.LR *= 2
	if _, err := Train(ctx, other, Options{Out: t.TempDir(), Resume: filepath.Join(part, CheckpointFile)}); !errors.Is(err, ErrConfig) {
		t.Fatalf("resume with another lr: %v, want ErrConfig", err)
	}
	if _, err := Train(ctx, tinyConfig(3), Options{Out: t.TempDir(), Resume: res.ModelPath}); !errors.Is(err, nn.ErrModel) {
		t.Fatalf("resume from a model: %v, want ErrModel", err)
	}
}

// TestCloningImitatesTheTeacher: after cloning FGD the greedy network
// mostly picks the node FGD picks; before, it does not.
func TestCloningImitatesTheTeacher(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a tiny policy (-short)")
	}
	c := tinyConfig(0)
	c.BC.Episodes, c.BC.Epochs = 6, 8
	c.Eval.Seeds = nil
	res, err := Train(context.Background(), c, Options{Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	first, last := res.History[0].PolicyLoss, res.History[len(res.History)-1].PolicyLoss
	// Cross-entropy to the teacher's choice must fall clearly: the
	// untrained network is near uniform over ~24 candidates (ln 24 = 3.2).
	if !(last < 0.7*first) {
		t.Fatalf("cloning cross-entropy %v -> %v, want a fall of 30%%+", first, last)
	}
}

// FuzzParseConfig: no input crashes the parser, every refusal wraps
// ErrConfig, and an accepted config is valid and survives its own YAML.
func FuzzParseConfig(f *testing.F) {
	paths, _ := filepath.Glob("../../configs/train-*.yaml")
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("ppo: {clip: 0.3}\nreward: {carbon: 1}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b, "fuzz.yaml")
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("unwrapped error %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config does not validate: %v", err)
		}
		if _, err := ParseConfig(c.YAML(), "again"); err != nil {
			t.Fatalf("accepted config's YAML refused: %v", err)
		}
	})
}

// TestFedProxKeepsTheModelNear: with a large proximal coefficient the
// fine-tuned model stays much closer to where it started.
func TestFedProxKeepsTheModelNear(t *testing.T) {
	if testing.Short() {
		t.Skip("trains tiny policies (-short)")
	}
	start, err := Train(context.Background(), tinyConfig(0), Options{})
	if err != nil {
		t.Fatal(err)
	}
	dist := func(mu float64) float64 {
		cfg := tinyConfig(3)
		cfg.Eval.Seeds = nil
		cfg.PPO.LR = 3e-3
		res, err := Train(context.Background(), cfg, Options{Init: start.Model, ProxMu: mu})
		if err != nil {
			t.Fatal(err)
		}
		if res.Decisions == 0 {
			t.Fatal("no decisions counted")
		}
		a, b := start.Model.Net.Flat(), res.Model.Net.Flat()
		var d float64
		for i := range a {
			d += float64(a[i]-b[i]) * float64(a[i]-b[i])
		}
		return math.Sqrt(d)
	}
	free, prox := dist(0), dist(1000)
	if !(prox < 0.5*free) {
		t.Fatalf("distance from the start: %v without the proximal term, %v with mu=1000", free, prox)
	}
}

// TestFineTune: FineTune on the configuration's environment equals Train
// with the same settings (the entry point only narrows Train), keeps
// base's decision rule, and refuses a missing base or empty settings.
func TestFineTune(t *testing.T) {
	if testing.Short() {
		t.Skip("trains tiny policies (-short)")
	}
	start, err := Train(context.Background(), tinyConfig(0), Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := *start.Model
	base.Decision = policy.Decision{Band: 1.5} // not the config's 2.5
	o := FineTuneOptions{Iterations: 2, Episodes: 2, LR: 3e-3, ProxMu: 0.5, Seed: 9}
	got, n, err := FineTune(context.Background(), nil, &base, tinyConfig(7), o)
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig(2)
	cfg.Seed, cfg.BC.Episodes, cfg.Eval.Seeds, cfg.PPO.EpisodesPerIter, cfg.PPO.LR = 9, 0, nil, 2, 3e-3
	want, err := Train(context.Background(), cfg, Options{Init: &base, ProxMu: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Net.Flat(), want.Model.Net.Flat()) || n != want.Decisions || n == 0 {
		t.Fatalf("FineTune: %d decisions, Train %d; weights equal: %v", n, want.Decisions, slices.Equal(got.Net.Flat(), want.Model.Net.Flat()))
	}
	if got.Decision != base.Decision {
		t.Errorf("decision rule %+v, want base's %+v", got.Decision, base.Decision)
	}
	for _, c := range []struct {
		name string
		base *nn.Model
		o    FineTuneOptions
	}{
		{"no base", nil, o},
		{"no iterations", &base, FineTuneOptions{Episodes: 1, LR: 1e-3}},
		{"no episodes", &base, FineTuneOptions{Iterations: 1, LR: 1e-3}},
		{"no lr", &base, FineTuneOptions{Iterations: 1, Episodes: 1}},
		{"negative mu", &base, FineTuneOptions{Iterations: 1, Episodes: 1, LR: 1e-3, ProxMu: -1}},
	} {
		if _, _, err := FineTune(context.Background(), nil, c.base, tinyConfig(1), c.o); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", c.name, err)
		}
	}
}

// TestConstantInputsAreNotRead: the tiny openb training data has no pod
// priority, no arm64 node, one carbon intensity and no dependencies, so
// the trained network must not read those inputs (their first-layer rows
// are zero) while it reads the pod's CPU and the node's free CPU; and a
// pod given a priority is then scored exactly as without.
// Without the exclusion the rows keep their random initial weights, and
// priority 1000 (tanh 0.76, 762 standard deviations of MinStd) moves the
// scores.
func TestConstantInputsAreNotRead(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a tiny policy (-short)")
	}
	c := tinyConfig(1)
	c.Eval.Seeds = nil
	res, err := Train(context.Background(), c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Model
	for _, name := range []string{"pod_priority", "arch_arm64", "carbon", "dep_zone_colocation", "dep_rtt"} {
		f := policy.FeatureIndex(name)
		if m.Net.ReadsInput(f) || m.Schema.Std[f] != policy.MinStd {
			t.Errorf("%s, constant in training: read %v, std %v (want unread, %v)", name, m.Net.ReadsInput(f), m.Schema.Std[f], policy.MinStd)
		}
	}
	for _, name := range []string{"pod_cpu", "cpu_free_after"} {
		if !m.Net.ReadsInput(policy.FeatureIndex(name)) {
			t.Errorf("%s varies in training but is not read", name)
		}
	}

	spec := func(name string, cpu int64) sim.NodeSpec {
		return sim.NodeSpec{Name: name, CPU: cpu, Memory: 64 << 10, Arch: sim.ArchAMD64, Zone: "z"}
	}
	cluster := &sim.Cluster{Name: "three", Zones: []sim.Zone{{Name: "z"}}, Nodes: []sim.NodeSpec{spec("a", 8000), spec("b", 32000), spec("c", 96000)}}
	plain := sim.PodSpec{Name: "p", CPU: 4000, Memory: 4096}
	urgent := plain
	urgent.Priority = 1000
	scores := func(p sim.PodSpec) []float64 {
		env, err := sim.NewEnv(cluster, &sim.Workload{Name: "one", Pods: []sim.PodSpec{p}}, sim.EnvOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l, err := nn.NewLearned("tiny", m, env)
		if err != nil {
			t.Fatal(err)
		}
		st := sim.NewState(env)
		id, err := st.AddPod(env.Pods[0])
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float64, 3)
		l.NetworkScores(st, &st.Pods[id], []int32{0, 1, 2}, out)
		return out
	}
	if a, b := scores(plain), scores(urgent); !slices.Equal(a, b) {
		t.Fatalf("scores %v without priority, %v with priority 1000: want equal", a, b)
	}
}

// TestUnreadConstants: resuming or fine-tuning (orMask of
// nn.Model.UnreadConstants) keeps unread the inputs a network does not
// read whose statistics are MinStd's, and only those.
func TestUnreadConstants(t *testing.T) {
	net, err := nn.NewNetExcluding(policy.NumFeatures, 4, 4, 4, rand.New(rand.NewPCG(1, 2)), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := policy.NewSchema()
	zero := make([]bool, policy.NumFeatures)
	zero[3], zero[7] = true, true
	net.MaskInputs(zero) // inputs 3 and 7 not read
	s.Std[3], s.Std[5] = policy.MinStd, policy.MinStd
	exclude := make([]bool, policy.NumFeatures)
	exclude[9] = true // from the configuration
	exclude = orMask(exclude, (&nn.Model{Schema: s, Net: net}).UnreadConstants())
	if got := orMask(nil, (&nn.Model{Schema: policy.NewSchema(), Net: net}).UnreadConstants()); got != nil {
		t.Errorf("no input at MinStd: mask %v, want nil", got)
	}
	for f, x := range exclude {
		// 3: unread and constant; 5: constant but read; 7: unread, varied
		// (excluded by another configuration); 9: the configuration's
		if want := f == 3 || f == 9; x != want {
			t.Errorf("input %d: excluded %v, want %v", f, x, want)
		}
	}
}

// TestFineTuneKeepsConstantInputsUnread: a model cloned on an openb slice
// (no arm64 node, one carbon intensity, no dependencies) fine-tuned on the
// retail fleet, where those inputs vary, still does not read them: its
// statistics, fitted where they were constant, do not describe them.
// Without the mask of nn.Model.UnreadConstants on the fine-tune path they get gradients and are
// read after one iteration.
func TestFineTuneKeepsConstantInputsUnread(t *testing.T) {
	if testing.Short() {
		t.Skip("trains tiny policies (-short)")
	}
	start, err := Train(context.Background(), tinyConfig(0), Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig(1)
	cfg.Env.Scenario, cfg.Env.Nodes, cfg.Env.Pods, cfg.Env.NodeFraction, cfg.Env.Mode = "builtin:retail-fleet", "", "", 1, "replay"
	got, _, err := FineTune(context.Background(), nil, start.Model, cfg, FineTuneOptions{Iterations: 1, Episodes: 1, LR: 3e-3, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"arch_arm64", "carbon", "dep_zone_colocation"} {
		f := policy.FeatureIndex(name)
		if start.Model.Net.ReadsInput(f) || got.Net.ReadsInput(f) {
			t.Errorf("%s: read by the start %v, by the fine-tuned model %v; want neither", name, start.Model.Net.ReadsInput(f), got.Net.ReadsInput(f))
		}
	}
	if slices.Equal(got.Net.Flat(), start.Model.Net.Flat()) {
		t.Fatal("fine-tuning changed nothing")
	}
	// a fine-tune clones nothing, so a training config's stress for its
	// cloning episodes does not apply, also on an environment of the
	// caller's (the site twin's), where the config has no scenario left
	l, err := scenario.LoadWith("builtin:retail-fleet", scenario.Options{})
	if err != nil {
		t.Fatal(err)
	}
	env, err := sim.NewEnv(l.Cluster, l.Workload, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.BC.BackgroundLoad = &scenario.BackgroundLoad{Share: 0.5, CPU: []float64{0.5, 0.5}}
	if _, _, err := FineTune(context.Background(), env, start.Model, cfg, FineTuneOptions{Iterations: 1, Episodes: 1, LR: 3e-3, Seed: 4}); err != nil {
		t.Errorf("fine-tune with bc.backgroundLoad on the caller's environment: %v", err)
	}
}

// TestTrainedBounds: a trained model carries the range of the rows its
// training collected as input bounds (policy.Schema.Lo, Hi): they hold
// the normalisation means (fitted on a sample of those rows); training
// itself never clamps, so a fine-tune from a model with bounds trains the
// same network as from the same model without them, and its bounds cover
// the initial model's; unless it keeps them (Options.KeepBounds), when
// it trains on rows held within them.
func TestTrainedBounds(t *testing.T) {
	if testing.Short() {
		t.Skip("trains three tiny policies (-short)")
	}
	ctx := context.Background()
	c := tinyConfig(1)
	c.Eval.Seeds = nil
	res, err := Train(ctx, c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Model.Schema
	if s.Lo == nil || s.Hi == nil {
		t.Fatal("the trained model has no input bounds")
	}
	for i, name := range s.Names {
		if m := s.Mean[i]; !(s.Lo[i] <= m && m <= s.Hi[i]) && math.Abs(float64(m-s.Lo[i])) > 1e-6 && math.Abs(float64(m-s.Hi[i])) > 1e-6 {
			t.Errorf("%s: mean %v outside the bounds [%v, %v]", name, m, s.Lo[i], s.Hi[i])
		}
	}
	// pin the start's bounds of a feature that varies to one value (a
	// trainer that clamped would see it constant), widen another's past
	// anything training sees, then fine-tune with and without them
	f := policy.FeatureIndex("pod_cpu")
	wide := *res.Model
	wide.Schema.Lo, wide.Schema.Hi = slices.Clone(s.Lo), slices.Clone(s.Hi)
	g := policy.NumFeatures - 1
	wide.Schema.Lo[g], wide.Schema.Hi[g] = -1e6, 1e6
	wide.Schema.Lo[f], wide.Schema.Hi[f] = s.Mean[f], s.Mean[f]
	plain := *res.Model
	plain.Schema.Lo, plain.Schema.Hi = nil, nil
	ft := tinyConfig(1)
	ft.Eval.Seeds, ft.BC.Episodes, ft.Seed = nil, 0, 9
	a, err := Train(ctx, ft, Options{Init: &wide})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Train(ctx, ft, Options{Init: &plain})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Model.Net.Flat(), b.Model.Net.Flat()) {
		t.Error("the initial model's bounds changed the fine-tuned network")
	}
	if a.Model.Schema.Lo[g] != -1e6 || a.Model.Schema.Hi[g] != 1e6 {
		t.Errorf("the fine-tune's bounds [%v, %v] do not cover the initial model's", a.Model.Schema.Lo[g], a.Model.Schema.Hi[g])
	}
	if lo, hi := a.Model.Schema.Lo[f], a.Model.Schema.Hi[f]; !(lo < hi) {
		t.Errorf("pod_cpu: the fine-tune's bounds [%v, %v] do not cover the rows it collected", lo, hi)
	}
	if b.Model.Schema.Lo == nil {
		t.Error("a fine-tune from a model without bounds has none")
	}
	// KeepBounds (a federated round's local training): the pinned
	// feature is held at its one value, so the network trains on other
	// inputs, and the result keeps the start's bounds; held within bounds
	// its rows never leave (a's, which cover every row of this run), it
	// trains the network it trains without them
	kept, err := Train(ctx, ft, Options{Init: &wide, KeepBounds: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kept.Model.Schema.Lo, wide.Schema.Lo) || !slices.Equal(kept.Model.Schema.Hi, wide.Schema.Hi) {
		t.Error("KeepBounds: the fine-tune's bounds are not the initial model's")
	}
	if slices.Equal(kept.Model.Net.Flat(), b.Model.Net.Flat()) {
		t.Error("KeepBounds: holding pod_cpu at one value did not change the fine-tuned network (the rows were not clamped)")
	}
	loose := *res.Model
	loose.Schema.Lo, loose.Schema.Hi = a.Model.Schema.Lo, a.Model.Schema.Hi
	same, err := Train(ctx, ft, Options{Init: &loose, KeepBounds: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(same.Model.Net.Flat(), b.Model.Net.Flat()) {
		t.Error("KeepBounds: bounds no row reaches changed the fine-tuned network")
	}
}

// TestTeacherWeights: bc's weights reach the fgd-pressure and fgd-strand
// teachers (0: each policy's default).
func TestTeacherWeights(t *testing.T) {
	env, err := openb.LoadEnv("openb:"+openb.AllNodes, "openb:"+openb.Default)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		bc               BCConfig
		pressure, strand float64 // 0: not an fgd-strand teacher
	}{
		{BCConfig{Teacher: baseline.FGDStrand}, baseline.DefaultPressureWeight, baseline.DefaultStrandWeight},
		{BCConfig{Teacher: baseline.FGDStrand, PressureWeight: 3, StrandWeight: 5}, 3, 5},
		{BCConfig{Teacher: baseline.FGDPressure, PressureWeight: 3}, 3, 0},
	} {
		p, err := newTeacher(context.Background(), tc.bc, env, 1)
		if err != nil {
			t.Fatal(err)
		}
		switch pol := p.(type) {
		case *baseline.FGDStrandPolicy:
			if pol.Weight != tc.strand || pol.FGDPressurePolicy.Weight != tc.pressure {
				t.Errorf("%+v: strand %v, pressure %v; want %v, %v", tc.bc, pol.Weight, pol.FGDPressurePolicy.Weight, tc.strand, tc.pressure)
			}
		case *baseline.FGDPressurePolicy:
			if tc.strand != 0 || pol.Weight != tc.pressure {
				t.Errorf("%+v: fgd-pressure with weight %v; want strand %v, pressure %v", tc.bc, pol.Weight, tc.strand, tc.pressure)
			}
		default:
			t.Errorf("%+v: teacher %T", tc.bc, p)
		}
	}
}
