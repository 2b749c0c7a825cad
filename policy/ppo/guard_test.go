package ppo

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
	"github.com/edgesched/edgesched/sim/openb"
)

// TestPPOEpochsHonourContext: an iteration's update checks the context
// once per epoch, not only per minibatch, so an iteration whose batch has
// no decisions (no minibatch at all) does not run its epochs, up to
// MaxEpochs of them, after a cancellation.
func TestPPOEpochsHonourContext(t *testing.T) {
	net, err := nn.NewNet(policy.NumFeatures, 4, 4, 4, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.PPO.Epochs = 3
	tr := &trainer{cfg: cfg, net: net, opt: newAdam(net), rng: rand.New(rand.NewPCG(3, 4))}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, _, _, _, err := tr.ppoEpochs(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("ppoEpochs after a cancellation: %v, want context.Canceled", err)
	}
	// Not cancelled, the same empty batch runs its epochs and learns from
	// nothing (n 0).
	if _, _, _, _, n, err := tr.ppoEpochs(context.Background(), nil); err != nil || n != 0 {
		t.Fatalf("ppoEpochs: n %d, err %v, want 0, nil", n, err)
	}
}

// TestResumeRefusesBadOptimiserState: a checkpoint whose optimiser state
// or counters cannot come from training is refused before it is used. A
// NaN or infinite moment, a negative second moment or a negative Adam
// step (step -1 makes the bias correction 1 - b^0 = 0, so the first
// update divides by zero) would make every weight NaN after one update;
// negative counters would replay iterations. The file's own damage is
// refused by nn.Decode, the optimiser's meaning by resume; both wrap
// nn.ErrModel.
func TestResumeRefusesBadOptimiserState(t *testing.T) {
	cfg := tinyConfig(3)
	net, err := nn.NewNet(policy.NumFeatures, cfg.Net.Hidden1, cfg.Net.Hidden2, cfg.Net.CriticHidden, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	perNet := net.NumParams()
	// checkpoint encodes a valid checkpoint with state edited by edit
	// (Adam's moments: m 0.01, v 0.0001 everywhere).
	checkpoint := func(edit func(st *ckState)) []byte {
		t.Helper()
		opt := newAdam(net)
		for _, p := range opt.m.Params() {
			for i := range p.Values() {
				p.Values()[i] = 0.01
			}
		}
		for _, p := range opt.v.Params() {
			for i := range p.Values() {
				p.Values()[i] = 1e-4
			}
		}
		rng, err := rand.NewPCG(5, 6).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		st := ckState{ConfigYAML: string(cfg.ckKey()), Iter: 1, Episodes: 4, RNG: rng, AdamStep: 7}
		edit(&st)
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		m := &nn.Model{Schema: policy.NewSchema(), Net: net}
		if err := nn.Encode(&buf, m, "checkpoint", map[string]*nn.Net{"adam_m": opt.m, "adam_v": opt.v}, b); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	// poke writes v over element i of section s (sections are sorted:
	// 0 adam_m, 1 adam_v) and reseals the checksum, as a damaged or
	// hand-made file would have it.
	poke := func(b []byte, s, i int, v float32) []byte {
		b = bytes.Clone(b)
		hl := int(binary.LittleEndian.Uint32(b[4:8]))
		binary.LittleEndian.PutUint32(b[8+hl+((s+1)*perNet+i)*4:], math.Float32bits(v))
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
		return b
	}
	same := func(*ckState) {}
	good := checkpoint(same)
	for _, tc := range []struct {
		name string
		file []byte
		want string // "" = resumed
	}{
		{"valid", good, ""},
		{"zero Adam step (nothing applied yet)", checkpoint(func(st *ckState) { st.AdamStep, st.Iter = 0, 0 }), ""},
		{"NaN first moment", poke(good, 0, 0, float32(math.NaN())), "section adam_m: w1[0] is NaN"},
		{"infinite second moment", poke(good, 1, 5, float32(math.Inf(1))), "section adam_v: w1[5] is +Inf"},
		{"negative second moment", poke(good, 1, 0, -1), "adam_v: w1[0] is -1, a second moment is never negative"},
		{"negative Adam step", checkpoint(func(st *ckState) { st.AdamStep = -1 }), "adam_step -1, want >= 0"},
		{"negative iteration", checkpoint(func(st *ckState) { st.Iter = -1 }), "iteration -1, want 0.."},
		{"iteration beyond the cap", checkpoint(func(st *ckState) { st.Iter = 1_000_001 }), "iteration 1000001, want 0..1000000"},
		{"negative episodes", checkpoint(func(st *ckState) { st.Episodes = -4 }), "episodes -4, want >= 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), CheckpointFile)
			if err := os.WriteFile(path, tc.file, 0o644); err != nil {
				t.Fatal(err)
			}
			tr := &trainer{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil)), pcg: rand.NewPCG(0, 0)}
			err := tr.resume(path)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, nn.ErrModel) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("resume: %v, want nn.ErrModel naming %q", err, tc.want)
			}
		})
	}
}

// TestLookaheadHonoursContext: the planning teacher plays TopK x Samples x
// Horizon future pods per decision (here 2 x 2 x 50 = 200, on the small
// learning cluster), and none once the
// episode's context is cancelled: the decision is then FGD's own.
func TestLookaheadHonoursContext(t *testing.T) {
	nodes, pods := learningCluster(t)
	env, err := openb.LoadEnv(nodes, pods)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Lookahead{TopK: 2, Horizon: 50, Samples: 2}
	p := env.Pods[0] // half a GPU: the eight GPU nodes are the candidates
	var cand []int32
	for i := range env.Nodes {
		if sim.NewState(env).Feasible(i, &p) {
			cand = append(cand, int32(i))
		}
	}
	if len(cand) != 8 {
		t.Fatalf("%d candidates, want the 8 GPU nodes", len(cand))
	}
	fgd := make([]float64, len(cand))
	baseline.NewFGD(env).Score(sim.NewState(env), &p, cand, fgd)
	for _, tc := range []struct {
		name      string
		cancelled bool
		played    int
	}{{"running", false, 2 * 2 * 50}, {"cancelled", true, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			l := newLookahead(ctx, cfg, env, 7)
			sc := make([]float64, len(cand))
			l.Score(sim.NewState(env), &p, cand, sc)
			if l.played != tc.played {
				t.Fatalf("played %d future pods, want %d", l.played, tc.played)
			}
			lifted := 0
			for i := range sc {
				switch sc[i] - fgd[i] {
				case 0:
				case 1000:
					lifted++
				default:
					t.Fatalf("node %d: score %v, FGD's %v", i, sc[i], fgd[i])
				}
			}
			if want := map[bool]int{false: 1, true: 0}[tc.cancelled]; lifted != want {
				t.Fatalf("%d candidates lifted above FGD's scores, want %d", lifted, want)
			}
		})
	}
}
