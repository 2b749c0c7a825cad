package ppo

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
)

// FuzzResume: no trainer state in a checkpoint (the JSON nn.Decode hands
// over as it is: counters, the generator's state, the history, the best
// value) makes resume panic; a refusal wraps nn.ErrModel or ErrConfig;
// what resumes has counters training can have written, and the trainer
// checkpoints it again to a file that resumes to the same state.
// (nn.FuzzDecode covers the file around it.) Seeded with the state
// TestResumeRefusesBadOptimiserState resumes, with and without a best
// network and history.
func FuzzResume(f *testing.F) {
	cfg := tinyConfig(3)
	net, err := nn.NewNet(policy.NumFeatures, cfg.Net.Hidden1, cfg.Net.Hidden2, cfg.Net.CriticHidden, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		f.Fatal(err)
	}
	opt := newAdam(net)
	for _, p := range opt.v.Params() {
		for i := range p.Values() {
			p.Values()[i] = 1e-4
		}
	}
	rng, err := rand.NewPCG(5, 6).MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	for _, st := range []ckState{
		{ConfigYAML: string(cfg.ckKey()), Iter: 1, Episodes: 4, RNG: rng, AdamStep: 7},
		{ConfigYAML: string(cfg.ckKey()), Iter: 2, Episodes: 8, RNG: rng, AdamStep: 14, HaveBest: true, BestVal: -3.5,
			History: []Row{{Phase: "bc", Episodes: 2}, {Phase: "ppo", Iteration: 1, Episodes: 4, MeanReturn: -1.5, Eval: -3.5, EvalSet: true, Seconds: 0.25}}},
	} {
		b, err := json.Marshal(st)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, st.HaveBest)
	}
	f.Add([]byte(`{"config":"","iteration":-1,"rng":"AAAA","adam_step":-1}`), false)
	f.Add([]byte(`null`), true)
	newTrainer := func() *trainer {
		return &trainer{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil)), pcg: rand.NewPCG(0, 0)}
	}
	f.Fuzz(func(t *testing.T, state []byte, best bool) {
		sections := map[string]*nn.Net{"adam_m": opt.m, "adam_v": opt.v}
		if best {
			sections["best"] = net
		}
		var buf bytes.Buffer
		if err := nn.Encode(&buf, &nn.Model{Schema: policy.NewSchema(), Net: net}, "checkpoint", sections, state); err != nil {
			return // not JSON: no checkpoint carries it
		}
		dir := t.TempDir()
		path := filepath.Join(dir, CheckpointFile)
		if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		tr := newTrainer()
		if err := tr.resume(path); err != nil {
			if !errors.Is(err, nn.ErrModel) && !errors.Is(err, ErrConfig) {
				t.Fatalf("refusal %v wraps neither nn.ErrModel nor ErrConfig", err)
			}
			return
		}
		if tr.iter < 0 || tr.iter > MaxIterations || tr.episodes < 0 || tr.opt.step < 0 || (tr.haveBest && tr.best == nil) {
			t.Fatalf("resumed iteration %d, episodes %d, Adam step %d, best %v/%v", tr.iter, tr.episodes, tr.opt.step, tr.haveBest, tr.best != nil)
		}
		again := filepath.Join(dir, "again")
		if err := os.Mkdir(again, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := tr.saveCheckpoint(again); err != nil {
			t.Fatalf("a resumed trainer does not checkpoint: %v", err)
		}
		back := newTrainer()
		if err := back.resume(filepath.Join(again, CheckpointFile)); err != nil {
			t.Fatalf("its checkpoint does not resume: %v", err)
		}
		r1, _ := tr.pcg.MarshalBinary()
		r2, _ := back.pcg.MarshalBinary()
		if back.iter != tr.iter || back.episodes != tr.episodes || back.opt.step != tr.opt.step || back.haveBest != tr.haveBest ||
			back.bestVal != tr.bestVal || !bytes.Equal(r1, r2) || !reflect.DeepEqual(back.history, tr.history) {
			t.Fatalf("checkpointed again, the state changed:\n first %d %d %d %v %v %+v\nsecond %d %d %d %v %v %+v", tr.iter, tr.episodes, tr.opt.step,
				tr.haveBest, tr.bestVal, tr.history, back.iter, back.episodes, back.opt.step, back.haveBest, back.bestVal, back.history)
		}
	})
}
