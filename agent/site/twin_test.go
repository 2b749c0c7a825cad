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
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/policy/ppo"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/scenario"
)

// TestTwinTrainer builds the twin from a recorded trace (two nodes, 12
// pods) and fine-tunes a small model in it with one PPO iteration of one
// episode: the weights move, on at most one decision per replayed pod.
func TestTwinTrainer(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	cfg := trace.DefaultStoreConfig(filepath.Join(t.TempDir(), "trace.db"))
	cfg.Now = func() time.Time { return t0.Add(time.Hour) }
	store, err := trace.OpenStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tr := &TwinTrainer{Trace: store, Dir: t.TempDir(), Config: ppo.DefaultConfig(), Now: cfg.Now}
	if _, err := tr.Build(); !errors.Is(err, ErrNoTwin) {
		t.Fatalf("empty trace: %v, want ErrNoTwin", err)
	}
	evs := []trace.Event{
		{Kind: trace.NodeInfo, Time: t0, Node: &trace.Node{Name: "n1", CPUMilli: 8000, MemoryMiB: 16384, Arch: sim.ArchAMD64}},
		{Kind: trace.NodeInfo, Time: t0, Node: &trace.Node{Name: "n2", CPUMilli: 4000, MemoryMiB: 8192, GPUs: 1, GPUModel: "T4", Arch: sim.ArchAMD64}},
	}
	for i := range 12 {
		evs = append(evs, trace.Event{Kind: trace.PodArrival, Time: t0.Add(time.Duration(i) * time.Minute),
			Pod: &trace.Pod{UID: fmt.Sprint(i), Namespace: "shop", Name: fmt.Sprintf("p-%d", i), CPUMilli: 500 + int64(i)*100, MemoryMiB: 256}})
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
