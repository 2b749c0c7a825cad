package site

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/edgesched/edgesched/agent/trace"
	"github.com/edgesched/edgesched/agent/trace/tracefmt"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/ppo"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/scenario"
)

// TestTwinTrainer builds the twin from a recorded trace (two nodes, 12
// pods) and fine-tunes a small model in it with one PPO iteration of one
// episode: the weights move, on at most one decision per replayed pod.
func TestTwinTrainer(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	store, cfg := twinStore(t, t0)
	tr := &TwinTrainer{Trace: store, Dir: t.TempDir(), Config: ppo.DefaultConfig(), Now: cfg.Now}
	if _, err := tr.Build(); !errors.Is(err, ErrNoTwin) {
		t.Fatalf("empty trace: %v, want ErrNoTwin", err)
	}
	evs := []tracefmt.Event{
		{Kind: tracefmt.NodeInfo, Time: t0, Node: &tracefmt.Node{Name: "n1", CPUMilli: 8000, MemoryMiB: 16384, Arch: sim.ArchAMD64}},
		{Kind: tracefmt.NodeInfo, Time: t0, Node: &tracefmt.Node{Name: "n2", CPUMilli: 4000, MemoryMiB: 8192, GPUs: 1, GPUModel: "T4", Arch: sim.ArchAMD64}},
	}
	for i := range 12 {
		evs = append(evs, tracefmt.Event{Kind: tracefmt.PodArrival, Time: t0.Add(time.Duration(i) * time.Minute),
			Pod: &tracefmt.Pod{UID: fmt.Sprint(i), Namespace: "shop", Name: fmt.Sprintf("p-%d", i), CPUMilli: 500 + int64(i)*100, MemoryMiB: 256}})
	}
	if _, err := store.Append(evs...); err != nil {
		t.Fatal(err)
	}
	path, err := tr.Build()
	if err != nil {
		t.Fatal(err)
	}
	l, err := scenario.Load(path)
	if err != nil || len(l.Workload.Pods) != 12 || len(l.Cluster.Nodes) != 2 {
		t.Fatalf("twin %s: %v", path, err)
	}
	tr.Config.Workers = 1
	tr.Config.Env.Mode = "replay"
	base := smallModel(t, 3)
	trained, samples, err := tr.Train(context.Background(), base, federated.LocalTraining{Iterations: 1, Episodes: 1, LR: 1e-2}, 7)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	bf, tf := base.Net.Flat(), trained.Net.Flat()
	for i := range bf {
		if bf[i] != tf[i] {
			moved++
		}
	}
	// one episode replays the 12 pods: at most one decision each
	if moved == 0 || samples < 1 || samples > 12 {
		t.Fatalf("training moved %d weights on %d samples; want some, on 1..12", moved, samples)
	}
	// The reference: the same round through the file, as the trainer
	// did before it trained in memory (ppo.Train on the exported
	// scenario, the round's settings in the config): the same weights,
	// bit for bit, on the same samples.
	cfg2 := tr.Config
	cfg2.Env.Scenario, cfg2.Env.Nodes, cfg2.Env.Pods, cfg2.Seed, cfg2.BC.Episodes, cfg2.Eval.Seeds = path, "", "", 7, 0, nil
	cfg2.PPO.Iterations, cfg2.PPO.EpisodesPerIter, cfg2.PPO.LR = 1, 1, 1e-2
	cfg2.Net.Hidden1, cfg2.Net.Hidden2, cfg2.Net.CriticHidden = base.Net.H1, base.Net.H2, base.Net.HC
	ref, err := ppo.Train(context.Background(), cfg2, ppo.Options{Init: base})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ref.Model.Net.Flat(), tf) || int64(ref.Decisions) != samples {
		t.Fatalf("in memory: %d samples, weights differ from the file's run (%d samples): %v", samples, ref.Decisions, !slices.Equal(ref.Model.Net.Flat(), tf))
	}
	// without Dir nothing is written, and training still runs
	tr.Dir = ""
	if _, _, err := tr.Train(context.Background(), base, federated.LocalTraining{Iterations: 1, Episodes: 1, LR: 1e-2}, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Build(); err == nil {
		t.Fatal("Build without a directory succeeded")
	}
}

// TestTwinTrainsGraphSAGE: when the round's model carries GraphSAGE
// weights and the twin has calls between services, the twin trains the
// weights on that call graph too (link prediction, seeded with the
// round's seed: two runs agree bit for bit), so the update covers them;
// the network is trained as without them.
func TestTwinTrainsGraphSAGE(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	store, cfg := twinStore(t, t0)
	evs := []tracefmt.Event{{Kind: tracefmt.NodeInfo, Time: t0, Node: &tracefmt.Node{Name: "n1", CPUMilli: 8000, MemoryMiB: 16384, Arch: sim.ArchAMD64}},
		{Kind: tracefmt.NodeInfo, Time: t0, Node: &tracefmt.Node{Name: "n2", CPUMilli: 8000, MemoryMiB: 16384, Arch: sim.ArchARM64}}}
	services := []string{"web", "cart", "stock", "pay"}
	for i := range 8 {
		evs = append(evs, tracefmt.Event{Kind: tracefmt.PodArrival, Time: t0.Add(time.Duration(i) * time.Minute),
			Pod: &tracefmt.Pod{UID: fmt.Sprint(i), Namespace: "shop", Name: fmt.Sprintf("p-%d", i), Service: services[i%4], CPUMilli: 300, MemoryMiB: 256}})
	}
	// web -> cart -> stock, web -> pay
	for _, e := range [][2]int{{0, 1}, {1, 2}, {0, 3}} {
		evs = append(evs, tracefmt.Event{Kind: tracefmt.EdgeRate, Time: t0.Add(10 * time.Minute),
			Edge: &tracefmt.Edge{Src: tracefmt.PodRef{Namespace: "shop", Name: fmt.Sprintf("p-%d", e[0])}, Dst: tracefmt.PodRef{Namespace: "shop", Name: fmt.Sprintf("p-%d", e[1])}, CallsPerSecond: 20, Reporter: "n1"}})
	}
	if _, err := store.Append(evs...); err != nil {
		t.Fatal(err)
	}
	tr := &TwinTrainer{Trace: store, Config: ppo.DefaultConfig(), Now: cfg.Now}
	tr.Config.Workers, tr.Config.Env.Mode = 1, "replay"
	local := federated.LocalTraining{Iterations: 1, Episodes: 1, LR: 1e-2}
	plain := smallModel(t, 3)
	base := plain.Clone()
	base.Sage = policy.DefaultSage()
	trained, _, err := tr.Train(context.Background(), base, local, 7)
	if err != nil {
		t.Fatal(err)
	}
	if trained.Sage == nil || trained.Sage.ID() == base.Sage.ID() || base.Sage.ID() != policy.AffinityEncoder {
		t.Fatalf("the GraphSAGE weights after the round: %v (base %s)", trained.Sage, base.Sage.ID())
	}
	moved := 0
	bf, tf := base.Flat(), trained.Flat()
	k := base.Net.NumParams()
	for i := k; i < len(bf); i++ {
		if bf[i] != tf[i] {
			moved++
		}
	}
	if len(tf) != len(bf) || moved == 0 {
		t.Fatalf("update of %d values (base %d); %d GraphSAGE values moved", len(tf), len(bf), moved)
	}
	again, _, err := tr.Train(context.Background(), base, local, 7)
	if err != nil || !slices.Equal(again.Flat(), tf) {
		t.Fatalf("the same round again: %v, equal %v", err, err == nil && slices.Equal(again.Flat(), tf))
	}
	// a model without weights of its own: the network alone, as before
	alone, _, err := tr.Train(context.Background(), plain, local, 7)
	if err != nil || alone.Sage != nil || len(alone.Flat()) != k {
		t.Fatalf("a model without GraphSAGE weights: %v, %d values", err, len(alone.Flat()))
	}
}

// twinStore opens a trace store in a temporary directory whose clock
// reads an hour after t0 (closed when the test ends).
func twinStore(t *testing.T, t0 time.Time) (*trace.Store, trace.StoreConfig) {
	t.Helper()
	cfg := trace.DefaultStoreConfig(filepath.Join(t.TempDir(), "trace.db"))
	cfg.Now = func() time.Time { return t0.Add(time.Hour) }
	store, err := trace.OpenStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store, cfg
}
