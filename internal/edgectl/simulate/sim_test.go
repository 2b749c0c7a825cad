package simulate_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/sim/report"
)

func TestSimTable(t *testing.T) {
	out, _, err := run(t, "sim", "--policies", "fgd,best-fit", "--progress", "never")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"openb:all_node + openb:default, inflate mode, 1523 nodes, 8152 workload pods, seeds [1], ties random", "unalloc_gpu@100%", "fgd", "best-fit"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestSimSageLoad runs the experimental GraphSAGE affinity policy beside
// its base, dep-load, under its own names.
func TestSimSageLoad(t *testing.T) {
	out, _, err := run(t, "sim", "--scenario", "builtin:retail-stores", "--policies", "dep-load,sage-load,sage-load:0.5", "--progress", "never")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dep-load", "sage-load ", "sage-load:0.5", "cross_zone"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSimJSONAndFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	out, errOut, err := run(t, "sim", "--scenario", "builtin:factory-vision", "--policies", "k8s-default,trimaran-tlp", "--seeds", "1-2", "-o", "json", "--out", dir, "--progress", "always")
	if err != nil {
		t.Fatal(err)
	}
	var doc report.Document
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, out)
	}
	if doc.Mode != "replay" || len(doc.Runs) != 4 || doc.Runs[0].Policy != "k8s-default" || doc.Runs[3].Seed != 2 || doc.Config.ScenarioSeed != 11 {
		t.Errorf("document: mode %s, %d runs, first %s, last seed %d, scenario seed %d", doc.Mode, len(doc.Runs), doc.Runs[0].Policy, doc.Runs[3].Seed, doc.Config.ScenarioSeed)
	}
	if !strings.Contains(errOut, "wrote "+dir) || !strings.Contains(errOut, "%") {
		t.Errorf("stderr lacks the progress bar or the file list:\n%s", errOut)
	}
	for _, f := range []string{"results.json", "runs.csv", "failures.csv", "series.csv", "utilization.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	// failures.csv: a header, then a row per run and failed shape of the JSON
	rows := 1
	for _, r := range doc.Runs {
		if r.Measures["pods_failed"] > 0 && len(r.Failures) == 0 {
			t.Errorf("%s seed %d failed %v pods and lists no failed shape", r.Policy, r.Seed, r.Measures["pods_failed"])
		}
		rows += len(r.Failures)
	}
	b, err := os.ReadFile(filepath.Join(dir, "failures.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != rows || !strings.HasPrefix(lines[0], "policy,seed,scenario_seed,class,example,") {
		t.Errorf("failures.csv has %d lines, want %d (header %q)", len(lines), rows, lines[0])
	}
}

func TestSimErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--frobnicate"}, "unknown flag: --frobnicate"},
		{[]string{"sim", "--policies", "magic"}, `--policies: unknown value "magic"; valid values: all, baselines, random-fit,`},
		{[]string{"sim", "--mode", "fast"}, `--mode: sim: invalid value: mode "fast"`},
		{[]string{"sim", "--seeds", "5-1"}, `--seeds: "5-1" is not a range`},
		{[]string{"sim", "--seeds", "x"}, `--seeds: "x" is not a seed`},
		{[]string{"sim", "--scenario", "builtin:retail-fleet", "--nodes", "openb:all_node"}, "give --scenario or --nodes/--pods, not both"},
		{[]string{"sim", "--pods", "openb:multigpu20", "--mode", "replay"}, "has no creation times; use --mode inflate"},
		{[]string{"sim", "--columns", "happiness"}, `--columns: unknown value "happiness"; valid values: pods_arrived,`},
		{[]string{"sim", "-o", "csv"}, `-o/--output: unknown value "csv"; valid values: table, json, yaml`},
		{[]string{"sim", "--target", "-1"}, "inflate target must be in (0, 10]"},
		{[]string{"sim", "--tie-break", "last"}, `tie break "last"`},
		{[]string{"sim", "--progress", "sometimes"}, `--progress: "sometimes"`},
		{[]string{"sim", "--nodes", "/nonexistent.csv"}, "open trace: stat /nonexistent.csv"},
		{[]string{"sim", "--scenario", "builtin:moon-base"}, `built-in scenario "moon-base"`},
		{[]string{"sim", "extra"}, `unknown command "extra"`},
		{[]string{"sim", "--scenario-seeds", "1-2"}, "--scenario-seeds: needs a --scenario with a workload generator"},
		{[]string{"sim", "--scenario", "builtin:factory-vision", "--scenario-seeds", "2-1"}, `--scenario-seeds: "2-1" is not a range`},
		{[]string{"sim", "--policies", "fgd", "--versus", "k8s-default"}, `--versus: "k8s-default" is not among --policies`},
		{[]string{"sim", "--policies", "learned:nosuch"}, "no such shipped model"},
		{[]string{"sim", "--policies", "sage-load:0"}, `"sage-load:0": want sage-load:W with a weight W in (0, 10]`},
		{[]string{"sim", "--policies", "sage-load:x"}, "want sage-load:W"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, _, err := run(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestSimWorkloadsVersus: --scenario-seeds runs every policy on each
// regenerated workload; --versus adds before / after / change tables,
// paired over the two workloads.
func TestSimWorkloadsVersus(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	out, _, err := run(t, "sim", "--scenario", "builtin:factory-vision", "--policies", "k8s-default,trimaran-tlp", "--scenario-seeds", "3,4",
		"--columns", "failure_rate,util_active_cpu_mean", "--versus", "k8s-default", "--progress", "never", "--out", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 workloads: scenario generator seeds [3 4]", "trimaran-tlp versus k8s-default (paired over 2 runs", "before (k8s-default)", "util_active_cpu_mean", "per-run change", "/2"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc report.Document
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	// the paired figures travel in the document too
	if v := doc.Versus; v == nil || v.Base != "k8s-default" || len(v.Policies) != 1 || v.Policies[0].Pairs != 2 || v.Policies[0].Measures["failure_rate"].N != 2 {
		t.Errorf("results.json versus block: %+v", doc.Versus)
	}
	// 2 policies x 2 workloads x 1 seed, workload-major.
	if len(doc.Runs) != 4 || doc.Runs[0].ScenarioSeed != 3 || doc.Runs[3].ScenarioSeed != 4 || len(doc.Config.ScenarioSeeds) != 2 || doc.Config.ScenarioSeed != 0 {
		t.Fatalf("runs %d, config %+v", len(doc.Runs), doc.Config)
	}
	// Different generator seeds give different workloads.
	if doc.Runs[0].Measures["pods_arrived"] == doc.Runs[2].Measures["pods_arrived"] && doc.Runs[0].Measures["util_active_cpu_mean"] == doc.Runs[2].Measures["util_active_cpu_mean"] {
		t.Error("workloads 3 and 4 look identical")
	}
}

func TestSimBadTraceNamesLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pods.csv")
	if err := os.WriteFile(path, []byte("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,1024,1,500\np2,abc,1024,0,0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := run(t, "sim", "--pods", path)
	if err == nil || !strings.Contains(err.Error(), path+`:3: field cpu_milli: openb: bad value: "abc" is not an integer`) {
		t.Fatalf("error = %v", err)
	}
}

// TestSimNetworkAlone: learned@net runs the shipped default network without
// its decision rule. On gpuspec10 the rule (a band of near-best nodes
// ordered by FGD-pressure) changes about a fifth of the decisions, so the
// two runs must place differently; the same seed keeps everything else
// equal.
func TestSimNetworkAlone(t *testing.T) {
	out, _, err := run(t, "sim", "--pods", "openb:gpuspec10", "--target", "1", "--policies", "learned,learned@net", "-o", "json", "--progress", "never")
	if err != nil {
		t.Fatal(err)
	}
	var doc report.Document
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) != 2 || doc.Runs[0].Policy != "learned" || doc.Runs[1].Policy != "learned@net" {
		t.Fatalf("runs %+v", doc.Runs)
	}
	a, b := doc.Runs[0].Measures["unallocated_gpu_share_at_100"], doc.Runs[1].Measures["unallocated_gpu_share_at_100"]
	t.Logf("unallocated GPU share at 100%%: rule %.4f, network alone %.4f", a, b)
	if a == b {
		t.Errorf("learned and learned@net placed alike (%.6f): the suffix did not drop the rule", a)
	}
	if _, _, err := run(t, "sim", "--policies", "learnedx@net"); err == nil || !strings.Contains(err.Error(), "@net") {
		t.Errorf("learnedx@net: %v", err)
	}
}

// TestSimOwnGraphSAGE: a model whose GraphSAGE weights a federated round
// changed runs on partners of those weights (the input is annotated with
// the shipped pair), and places differently from the same network on
// the shipped pair's.
func TestSimOwnGraphSAGE(t *testing.T) {
	m, err := models.Load("edge-sage")
	if err != nil {
		t.Fatal(err)
	}
	own := m.Clone()
	own.Sage = policy.DefaultSage()
	for i := range own.Sage.Decoder {
		own.Sage.Decoder[i] *= -1 // partners far from the shipped pair's
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "own.esm")
	if err := nn.WriteFile(file, own, "model", nil, nil); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "sim", "--scenario", "builtin:retail-stores", "--policies", "learned:edge-sage,learned:"+file, "-o", "json", "--progress", "never")
	if err != nil {
		t.Fatal(err)
	}
	var doc report.Document
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) != 2 || doc.Runs[1].Policy != "learned:"+file {
		t.Fatalf("runs %+v", doc.Runs)
	}
	a, b := doc.Runs[0].Measures["cross_zone_traffic"], doc.Runs[1].Measures["cross_zone_traffic"]
	if a == b {
		t.Fatalf("cross-zone %v with the shipped pair and with other weights: the model's own partners were not used", a)
	}
	t.Logf("cross-zone traffic share: shipped pair %.4f, the model's own weights %.4f", a, b)
}

// TestSimFlagValuesAreUsageErrors: a flag value that does not parse or is
// out of its range is a usage error (exit 2, docs/cli.md) naming the
// flag, refused before the inputs load. They were failures (exit 1), and
// the run configuration's errors named no flag.
func TestSimFlagValuesAreUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--seeds", "abc"}, `--seeds: "abc" is not a seed`},
		{[]string{"sim", "--seeds", "5-1"}, `--seeds: "5-1" is not a range`},
		{[]string{"sim", "--seeds", "1-100000000"}, "--seeds: at most 1000 seeds"},
		{[]string{"sim", "--scenario", "builtin:factory-vision", "--scenario-seeds", "x"}, `--scenario-seeds: "x" is not a seed`},
		{[]string{"sim", "--scenario-seeds", "1-2"}, "--scenario-seeds: needs a --scenario"},
		{[]string{"sim", "--mode", "fast"}, `--mode: sim: invalid value: mode "fast" (want replay or inflate)`},
		{[]string{"sim", "--tie-break", "last"}, `--tie-break: sim: invalid value: tie break "last" (want random or first)`},
		{[]string{"sim", "--inflate-by", "disk"}, `--inflate-by: sim: invalid value: inflate resource "disk"`},
		{[]string{"sim", "--target", "-1"}, "--target: sim: invalid value: inflate target must be in (0, 10]"},
		{[]string{"sim", "--step", "0"}, "--step: sim: invalid value: inflate step must be in (0, target]"},
		{[]string{"sim", "--target", "0.5", "--step", "0.8"}, "--step: sim: invalid value: inflate step must be in (0, target], got 0.8"},
		{[]string{"sim", "--scenario", "builtin:factory-vision", "--samples", "-5"}, "--samples: sim: invalid value: samples must be in [2, 100000]"},
		{[]string{"sim", "--base-latency-ms", "-3"}, "--base-latency-ms: sim: invalid value: base latency"},
		{[]string{"sim", "--progress", "sometimes"}, `--progress: "sometimes" (want auto, always or never)`},
		{[]string{"sim", "--parallel", "-1"}, "--parallel: -1, want 0 (the number of CPUs) or more"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, _, err := run(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !cli.IsUsage(err) {
				t.Fatalf("error = %v (usage error: %v), want a usage error containing %q", err, cli.IsUsage(err), tt.want)
			}
			if out != "" {
				t.Errorf("stdout %q: the command ran", out)
			}
		})
	}
}

// TestSimOutIsAFile: an --out that exists as a file is refused before
// the runs (the sweep ran to its end, printed its table, then failed on
// "mkdir FILE: not a directory").
func TestSimOutIsAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "results")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "sim", "--policies", "fgd", "--target", "0.05", "--progress", "never", "--out", file)
	if !errors.Is(err, cmdutil.ErrOutNotDir) || !strings.Contains(err.Error(), "--out "+file+": exists and is not a directory") {
		t.Fatalf("err %v, want --out refused as not a directory", err)
	}
	if out != "" {
		t.Errorf("stdout %q: the sweep ran before --out was refused", out)
	}
}

// TestSimInterrupted: a sweep whose context ends (Ctrl-C: cmd/edgectl
// cancels it with the signal as the cause) fails saying it was
// interrupted and why (edgectl.ErrInterrupted), not with a bare "context
// canceled" from one run, and writes no result files.
func TestSimInterrupted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupt signal received"))
	cmd := edgectl.NewRootCommand(edgectl.Options{})
	cmd.SetArgs([]string{"sim", "--seeds", "1-50", "--policies", "fgd,best-fit", "--progress", "never", "--out", dir})
	var stdout, stderr strings.Builder
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	err := cmd.ExecuteContext(ctx)
	if !errors.Is(err, edgectl.ErrInterrupted) || !strings.HasPrefix(err.Error(), "interrupted (interrupt signal received): ") {
		t.Fatalf("err %v, want it to start with the interruption and its cause", err)
	}
	if stdout.Len() > 0 {
		t.Errorf("stdout %q after an interruption", stdout.String())
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--out %s after an interruption: %v", dir, err)
	}
}
