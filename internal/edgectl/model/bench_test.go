package model_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/edgesched/edgesched/internal/edgectl"
	"github.com/edgesched/edgesched/internal/edgectl/model"
	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant/int8net"
)

// TestBench runs the verb on a small built-in scenario: a table row for
// float32 and for every int8 kernel this build runs, the same figures as
// JSON, and bad flags refused by name. Speeds are reported, never
// asserted; the test checks they are finite and positive.
func TestBench(t *testing.T) {
	args := []string{"bench", "edge", "--scenario", "builtin:factory-vision", "--candidates", "40", "--reps", "3", "--min-time", "2ms"}
	out, errOut, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprintf("model edge (%d -> 32 -> 32 -> 1)", policy.NumFeatures), "one decision of 40 candidate nodes from builtin:factory-vision", "float32", "the int8 kernels agree exactly; this edgectl build scores with int8 " + int8net.Kernel(), "evaluates in training) with the float32 " + floatKernel(t) + " kernel"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench output lacks %q:\n%s", want, out)
		}
	}
	for _, k := range int8net.Kernels() {
		if !strings.Contains(out, "int8 "+k) {
			t.Errorf("no row for kernel %s:\n%s", k, out)
		}
	}
	if !strings.Contains(errOut, "measuring float32: 3 x 2ms") {
		t.Errorf("no progress on stderr:\n%s", errOut)
	}

	out, _, err = run(t, append(args, "-o", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	var rep model.BenchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	// float32 plus one row per kernel
	if len(rep.Results) != 1+len(int8net.Kernels()) || rep.Kernel != int8net.Kernel() || rep.Candidates != 40 {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Results {
		for _, v := range []float64{r.NsPerNode, r.NsPerNodeMin, r.NsPerNodeMax, r.UsPerDecision, r.Speedup} {
			if !(v > 0) || math.IsInf(v, 0) {
				t.Fatalf("%s: figure %v in %+v", r.Scorer, v, r)
			}
		}
		// min <= median <= max; 40 nodes make a decision
		if r.NsPerNodeMin > r.NsPerNode || r.NsPerNode > r.NsPerNodeMax || math.Abs(r.UsPerDecision-r.NsPerNode*40/1e3) > 1e-9 {
			t.Errorf("inconsistent figures %+v", r)
		}
	}
	if rep.Results[0].Scorer != "float32" || rep.Results[0].Speedup != 1 {
		t.Errorf("first row %+v, want float32 at 1x", rep.Results[0])
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no candidates", []string{"--candidates", "0"}, "--candidates"},
		{"too many candidates", []string{"--candidates", "100001"}, "--candidates"},
		{"no repetitions", []string{"--reps", "0"}, "--reps"},
		{"no time", []string{"--min-time", "0s"}, "--min-time"},
		{"unknown output", []string{"-o", "xml"}, "--output"},
		{"unknown flag", []string{"--fast"}, "unknown flag"},
		{"more candidates than the run scored", []string{"--scenario", "builtin:factory-vision", "--candidates", "99999"}, "scored only"},
		{"unknown model", []string{"nosuch"}, "nosuch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, append([]string{"bench", "--min-time", "1ms", "--reps", "1"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to name %q", err, tc.want)
			}
		})
	}
}

// floatKernel is the float scorer kernel of this build (the edge model's:
// 32 -> 32 ReLU, the AVX2 kernel's shape).
func floatKernel(t *testing.T) string {
	t.Helper()
	m, err := models.Load("edge")
	if err != nil {
		t.Fatal(err)
	}
	fs, err := nn.NewFloatScorer(m)
	if err != nil {
		t.Fatal(err)
	}
	return fs.Kernel()
}

// cancelOn is a stderr that ends the command's context once it has seen
// mark (bench writes "measuring SCORER" before each scorer).
type cancelOn struct {
	mark   string
	cancel context.CancelCauseFunc
	seen   strings.Builder
}

func (w *cancelOn) Write(p []byte) (int, error) {
	w.seen.Write(p)
	if strings.Contains(w.seen.String(), w.mark) {
		w.cancel(errors.New("interrupt signal received"))
	}
	return len(p), nil
}

// TestBenchInterrupted: Ctrl-C during the measurements ends bench
// promptly with the interruption (edgectl.ErrInterrupted); it ran every
// --reps x --min-time to the end and exited 0 (50 x 1s took 100 s).
func TestBenchInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stderr := &cancelOn{mark: "measuring float32", cancel: cancel}
	cmd := edgectl.NewRootCommand(edgectl.Options{})
	cmd.SetArgs([]string{"bench", "edge", "--scenario", "builtin:factory-vision", "--candidates", "40", "--reps", "3", "--min-time", "20s"})
	var stdout strings.Builder
	cmd.SetOut(&stdout)
	cmd.SetErr(stderr)
	start := time.Now()
	err := cmd.ExecuteContext(ctx)
	took := time.Since(start)
	if !errors.Is(err, edgectl.ErrInterrupted) || !strings.Contains(err.Error(), "interrupt signal received") {
		t.Fatalf("err %v after %v, want the interruption", err, took)
	}
	if took > 15*time.Second {
		t.Errorf("took %v to stop (3 x 20s per scorer without the interruption)", took)
	}
	if stdout.Len() > 0 {
		t.Errorf("stdout %q after an interruption", stdout.String())
	}
}
