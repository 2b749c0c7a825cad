package simulate_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl"
)

// tinyTrain is a training config small enough for a unit test: a 2% slice
// of the openb cluster filled to 40%, two cloning epochs, two PPO
// iterations.
const tinyTrain = `apiVersion: edgesched.io/v1alpha1
kind: TrainConfig
name: tiny
seed: 9
env: {nodeFraction: 0.02, inflateTarget: 0.4}
bc: {episodes: 2, epochs: 2}
ppo: {iterations: 2, episodesPerIteration: 2, epochs: 1, minibatch: 64}
eval: {seeds: [1001], every: 1, measure: reward, maximize: true, inflateTarget: 0.05}
`

// tinyConfig writes tinyTrain into a fresh directory and returns both.
func tinyConfig(t *testing.T) (dir, cfg string) {
	t.Helper()
	dir = t.TempDir()
	cfg = filepath.Join(dir, "tiny.yaml")
	if err := os.WriteFile(cfg, []byte(tinyTrain), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, cfg
}

func TestTrainThenSimulate(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a tiny policy (-short)")
	}
	dir, cfg := tinyConfig(t)
	out := filepath.Join(dir, "out")
	stdout, stderr, err := run(t, "train", "--config", cfg, "--out", out, "--iterations", "3", "--progress", "always")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`training "tiny" (seed 9): 2 behaviour-cloning episodes, 3 PPO iterations x 2 episodes`, "3 PPO iterations", "best reward", "model.esm",
		// the tiny slice has no pod priority, no arm64 node, no dependencies
		"inputs constant in the training data, not read: ", "pod_priority", "arch_arm64", "dep_rtt"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "ppo 3/3") {
		t.Errorf("stderr lacks the progress bar:\n%s", stderr)
	}
	// every output of the run, the curve (drawn by edgectl, not ppo.Train) included
	for _, f := range []string{"model.esm", "checkpoint.esc", "history.csv", "training_curve.png", "config.yaml"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}
	if !strings.Contains(stdout, "training_curve.png") {
		t.Errorf("stdout does not name the curve:\n%s", stdout)
	}
	model := filepath.Join(out, "model.esm")
	stdout, _, err = run(t, "sim", "--scenario", "builtin:factory-vision", "--policies", "k8s-default,learned:"+model, "--progress", "never")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "learned:"+model) {
		t.Errorf("sim output lacks the trained model:\n%s", stdout)
	}
}

func TestTrainErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("ppo:\n  clip: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notModel := filepath.Join(dir, "junk.esc")
	if err := os.WriteFile(notModel, []byte("not a checkpoint"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"train", "--epochz", "3"}, "unknown flag: --epochz"},
		{"missing config", []string{"train", "--config", filepath.Join(dir, "nope.yaml")}, "open config"},
		{"bad config names the field", []string{"train", "--config", bad}, "ppo.clip"},
		{"unknown trace", []string{"train", "--pods", "openb:nope", "--out", dir}, "nope"},
		{"bad progress", []string{"train", "--progress", "sometimes"}, "progress"},
		{"resume from junk", []string{"train", "--resume", notModel, "--out", filepath.Join(dir, "o"), "--progress", "never"}, "magic"},
		{"zero workers", []string{"train", "--workers", "0"}, "workers"},
		{"out is a file", []string{"train", "--out", notModel, "--progress", "never"}, "--out " + notModel + ": exists and is not a directory"},
		// episodes and iterations are capped (ppo.MaxEpisodes, MaxIterations):
		// 1e15 episodes panicked in makeslice
		{"episodes beyond the cap", []string{"train", "--episodes", "1000000000000000"}, "ppo.episodesPerIteration: 1000000000000000, want at most 10000"},
		{"iterations beyond the cap", []string{"train", "--iterations", "1000001"}, "ppo.iterations: 1000001, want at most 1000000"},
		// a missing checkpoint is refused before the output directory
		// gets its config.yaml and before the inputs load
		{"resume from nothing", []string{"train", "--resume", filepath.Join(dir, "none.esc"), "--out", filepath.Join(dir, "o2"), "--progress", "never"}, "--resume: stat " + filepath.Join(dir, "none.esc")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestSimShippedModel(t *testing.T) {
	out, _, err := run(t, "sim", "--scenario", "builtin:factory-vision", "--policies", "learned,fgd", "--progress", "never")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "learned") {
		t.Fatalf("output lacks the learned policy:\n%s", out)
	}
	if _, _, err := run(t, "sim", "--policies", "learned:"+filepath.Join(t.TempDir(), "none.esm")); err == nil || !strings.Contains(err.Error(), "none.esm") {
		t.Fatalf("missing model file: %v", err)
	}
}

// TestTrainInterrupted: cancelling training (Ctrl-C) stops it with an
// error naming the checkpoint to resume from, and resuming works.
// TestTrainFlagValuesAreUsageErrors: the values of the flags that
// override the config are checked before any work, as usage errors (exit
// 2) naming the flag; they were failures naming the config's key, and
// --progress was checked only after the config and inputs loaded.
func TestTrainFlagValuesAreUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--iterations", "-1"}, "--iterations: ppo: bad config"},
		{[]string{"--episodes", "0"}, "--episodes: ppo: bad config"},
		{[]string{"--workers", "-1"}, "--workers: ppo: bad config: workers: -1, want 1..64"},
		{[]string{"--progress", "sometimes"}, `--progress: "sometimes" (want auto, always or never)`},
		{[]string{"--progress", "sometimes", "--config", "nosuch.yaml"}, `--progress: "sometimes"`},
	} {
		out := filepath.Join(t.TempDir(), "out")
		_, _, err := run(t, append([]string{"train", "--out", out}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || !cli.IsUsage(err) {
			t.Errorf("%v: err %v (usage error: %v), want %q", c.args, err, cli.IsUsage(err), c.want)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v: --out written before the flags were refused (%v)", c.args, err)
		}
	}
}

func TestTrainInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a tiny policy (-short)")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tiny.yaml")
	if err := os.WriteFile(cfg, []byte(tinyTrain+"checkpointEvery: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Cancel once the first checkpoint is on disk.
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(filepath.Join(out, "checkpoint.esc")); err == nil {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	cmd := edgectl.NewRootCommand(edgectl.Options{})
	cmd.SetArgs([]string{"train", "--config", cfg, "--out", out, "--iterations", "1000", "--progress", "never"})
	var sink strings.Builder
	cmd.SetOut(&sink)
	cmd.SetErr(&sink)
	err := cmd.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "training interrupted; continue from the last checkpoint with --resume "+filepath.Join(out, "checkpoint.esc")) {
		t.Fatalf("err %v", err)
	}
	if _, _, err := run(t, "train", "--config", cfg, "--out", out, "--iterations", "2", "--resume", filepath.Join(out, "checkpoint.esc"), "--progress", "never"); err != nil {
		t.Fatalf("resume after interruption: %v", err)
	}
}

// TestTrainSeeds trains the tiny config for two seeds at once: each seed's
// model is the one a training with that seed alone writes (bit for bit),
// and the summary lists both with their evaluation values.
func TestTrainSeeds(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a tiny policy three times (-short)")
	}
	dir, cfg := tinyConfig(t)
	sweep := filepath.Join(dir, "sweep")
	stdout, _, err := run(t, "train", "--config", cfg, "--out", sweep, "--seeds", "9-10", "--iterations", "1", "--progress", "never")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"seed 9 (1 of 2)", "seed 10 (2 of 2)", `training "tiny" (seed 10)`, "seeds.csv"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	f, err := os.Open(filepath.Join(sweep, "seeds.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || !slices.Equal(rows[0], []string{"seed", "best_reward", "model"}) ||
		rows[1][0] != "9" || rows[2][0] != "10" || rows[2][2] != filepath.Join("seed-10", "model.esm") {
		t.Fatalf("seeds.csv: %q", rows)
	}
	// the table: a header, then each seed with the best evaluation value
	// its own run printed ("best reward = V") and its model
	table := map[string][]string{}
	for _, line := range strings.Split(stdout, "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			table[f[0]] = f
		}
	}
	if h := table["seed"]; !slices.Equal(h, []string{"seed", "best", "reward", "model"}) {
		t.Errorf("table header %q", h)
	}
	for _, r := range rows[1:] {
		v, err := strconv.ParseFloat(r[1], 64)
		if err != nil {
			t.Fatalf("seed %s: best %q: %v", r[0], r[1], err)
		}
		shown := fmt.Sprintf("%.5g", v)
		if !strings.Contains(stdout, "best reward = "+shown+"\n") || !slices.Equal(table[r[0]], []string{r[0], shown, filepath.Join(sweep, r[2])}) {
			t.Errorf("seed %s: best %s (%s) not its run's, or its table row %q wrong:\n%s", r[0], r[1], shown, table[r[0]], stdout)
		}
	}
	alone := filepath.Join(dir, "alone")
	if _, _, err := run(t, "train", "--config", cfg, "--out", alone, "--seed", "10", "--iterations", "1", "--progress", "never"); err != nil {
		t.Fatal(err)
	}
	a, errA := os.ReadFile(filepath.Join(sweep, "seed-10", "model.esm"))
	b, errB := os.ReadFile(filepath.Join(alone, "model.esm"))
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if !bytes.Equal(a, b) {
		t.Error("seed 10 of the sweep differs from seed 10 trained alone")
	}
	c, _ := os.ReadFile(filepath.Join(sweep, "seed-9", "model.esm"))
	if bytes.Equal(c, a) {
		t.Error("seeds 9 and 10 wrote the same model")
	}
}

func TestTrainSeedsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--seeds", "x"}, `--seeds: "x" is not a seed`},
		{[]string{"--seeds", "5-3"}, `--seeds: "5-3" is not a range`},
		{[]string{"--seeds", "1-101"}, "--seeds: 101 seeds, at most 100"},
		{[]string{"--seeds", "1,2", "--resume", "ck.esc"}, "--resume continues one training"},
		{[]string{"--seeds", "1,2,1"}, "--seeds: seed 1 given twice"},
		{[]string{"--seeds", "1,2", "--out", ""}, "--out: --seeds needs a directory"},
	} {
		_, _, err := run(t, append([]string{"train", "--out", t.TempDir(), "--progress", "never"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || !cli.IsUsage(err) {
			t.Errorf("%v: err %v (usage error: %v), want %q", c.args, err, cli.IsUsage(err), c.want)
		}
	}
}
