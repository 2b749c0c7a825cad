package ppo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/openb"
)

// learningCluster writes a small openb cluster and pod list where placement
// decides failures: 8 nodes with two GPUs, 8 without; pods sharing half a
// GPU, taking one or two whole GPUs, or none. Random placement scatters
// the half-GPU pods over the devices and CPU-only pods over the GPU nodes,
// so the two-GPU pods fail; a policy that packs does not.
func learningCluster(t testing.TB) (nodes, pods string) {
	dir := t.TempDir()
	var nb strings.Builder
	nb.WriteString("sn,cpu_milli,memory_mib,gpu,model\n")
	for i := range 16 {
		g, m := 2, "T4"
		if i >= 8 {
			g, m = 0, ""
		}
		fmt.Fprintf(&nb, "node-%02d,32000,131072,%d,%s\n", i, g, m)
	}
	var pb strings.Builder
	pb.WriteString("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n")
	kinds := []struct {
		n, cpu, gpus, milli int
	}{{6, 4000, 1, 500}, {3, 8000, 1, 1000}, {3, 6000, 2, 1000}, {6, 12000, 0, 0}}
	i := 0
	for _, k := range kinds {
		for range k.n {
			fmt.Fprintf(&pb, "pod-%03d,%d,8192,%d,%d,,LS,Running,0,100,0\n", i, k.cpu, k.gpus, k.milli)
			i++
		}
	}
	nodes, pods = filepath.Join(dir, "nodes.csv"), filepath.Join(dir, "pods.csv")
	if err := os.WriteFile(nodes, []byte(nb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pods, []byte(pb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return nodes, pods
}

// learningConfig is PPO from a random network (no cloning) on the whole
// small cluster; no evaluation, so the final network is the last one.
func learningConfig(nodes, pods string) Config {
	c := DefaultConfig()
	c.Name = "learning"
	c.Seed = 11
	c.Env = EnvConfig{Nodes: nodes, Pods: pods, Mode: "inflate", InflateTarget: 1, NodeFraction: 1}
	// the trace has no services and no architectures: dep_affinity and
	// the arch features are 0 throughout, and the network leaves them out
	// as the shipped default model does, and emission with them (the same
	// initial weights and run as before the inputs existed)
	c.Net = NetConfig{Hidden1: 16, Hidden2: 16, CriticHidden: 16, Exclude: []string{"affinity", "arch", "emission"}}
	c.BC = BCConfig{}
	c.PPO = PPOConfig{Iterations: 16, EpisodesPerIter: 6, Epochs: 4, Minibatch: 64, Clip: 0.2, Gamma: 1, Lambda: 0.95, LR: 3e-3, ValueCoef: 0.5, EntropyCoef: 0.001, MaxGradNorm: 0.5}
	c.Reward = Reward{Fragmentation: 1, Failure: 1}
	c.Eval = Eval{Measure: "reward"}
	c.Workers = 2
	c.CheckpointEvery = 0
	return c
}

// heldOutReturn is the mean return of net on workload seeds the training
// never drew (training seeds come from the config's stream), greedy, or
// sampled from the softmax when sample is set.
func heldOutReturn(t *testing.T, c Config, net *nn.Net, schema policy.Schema, sample bool) float64 {
	t.Helper()
	env, err := openb.LoadEnv(c.Env.Nodes, c.Env.Pods)
	if err != nil {
		t.Fatal(err)
	}
	mode := actGreedy
	if sample {
		mode = actSample
	}
	var sum float64
	const n = 24
	for s := range uint64(n) {
		rc := engine.DefaultRunConfig(engine.Inflate)
		rc.InflateTarget = c.Env.InflateTarget
		rc.Seed = 90_000 + s
		ep, err := runEpisode(context.Background(), env, net.Clone(), schema, mode, c.BC, rc, c.Reward, 90_000+s, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		sum += ep.ret
	}
	return sum / n
}

// TestPPOLearns: from a fixed random initialisation, PPO raises the
// held-out return clearly above the initial network's and above random
// placement's. A sabotaged update (gradient ascent on the loss, or
// advantages detached from their decisions) must not get there: that is
// what shows the test can fail. (Here the clip never binds: the policy
// ratio stays inside [0.8, 1.2], so a broken clip would pass; the clipped
// branch is checked against finite differences in
// TestPolicyGradFiniteDifferences.)
func TestPPOLearns(t *testing.T) {
	if testing.Short() {
		t.Skip("trains small policies for ~10 s each (-short)")
	}
	nodes, pods := learningCluster(t)
	c := learningConfig(nodes, pods)
	mask, err := policy.ExcludeMask(c.Net.Exclude)
	if err != nil {
		t.Fatal(err)
	}
	init, err := nn.NewNetExcluding(policy.NumFeatures, c.Net.Hidden1, c.Net.Hidden2, c.Net.CriticHidden, rand.New(rand.NewPCG(c.Seed, 1)), mask)
	if err != nil {
		t.Fatal(err)
	}
	// Random placement: a network whose scores are all equal, sampled.
	flat := init.Clone()
	flat.Zero()
	run := func(f fault) (*Result, error) {
		faultInjected = f
		defer func() { faultInjected = faultNone }()
		return Train(context.Background(), c, Options{})
	}
	res, err := run(faultNone)
	if err != nil {
		t.Fatal(err)
	}
	schema := res.Model.Schema
	initRet := heldOutReturn(t, c, init, schema, false)
	randRet := heldOutReturn(t, c, flat, schema, true)
	learned := heldOutReturn(t, c, res.Model.Net, schema, false)
	// Returns are minus (fragmented share + failed demand share), so 0 is
	// perfect; the margin is a tenth of the distance from random to 0.
	margin := -randRet / 10
	t.Logf("held-out return: random placement %.4f, initial network %.4f, after PPO %.4f (margin %.4f)", randRet, initRet, learned, margin)
	if !(learned > initRet+margin && learned > randRet+margin) {
		t.Fatalf("PPO did not learn: %.4f, want above initial %.4f and random %.4f by %.4f", learned, initRet, randRet, margin)
	}
	for _, f := range []fault{faultGradientSign, faultAdvantageShuffle} {
		t.Run(f.String(), func(t *testing.T) {
			res, err := run(f)
			if err != nil {
				t.Fatal(err)
			}
			got := heldOutReturn(t, c, res.Model.Net, schema, false)
			t.Logf("%s: held-out return %.4f (healthy PPO %.4f)", f, got, learned)
			if got > initRet+margin && got > randRet+margin {
				t.Fatalf("with %s PPO still reached %.4f: the test cannot tell a broken update", f, got)
			}
		})
	}
}
