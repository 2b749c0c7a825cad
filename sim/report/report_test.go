package report

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/scenario"
)

func smallEnv(t *testing.T) *sim.Env {
	t.Helper()
	c := &sim.Cluster{Name: "small", Nodes: []sim.NodeSpec{
		{Name: "a", CPU: 32000, Memory: 65536, GPUs: 4, GPUModel: "T4", Arch: sim.ArchAMD64},
		{Name: "b", CPU: 32000, Memory: 65536, GPUs: 2, GPUModel: "T4", Arch: sim.ArchAMD64},
	}}
	w := &sim.Workload{Pods: []sim.PodSpec{
		{Name: "s", CPU: 2000, Memory: 1024, GPUs: 1, GPUMilli: 300, Delete: sim.NoDeletion},
		{Name: "w", CPU: 4000, Memory: 4096, GPUs: 1, GPUMilli: 1000, Delete: sim.NoDeletion},
		{Name: "c", CPU: 1000, Memory: 512, Delete: sim.NoDeletion},
	}}
	env, err := sim.NewEnv(c, w, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func compare(t *testing.T, env *sim.Env, mode engine.Mode, names ...string) *Document {
	t.Helper()
	var fs []sim.Factory
	for _, n := range names {
		f, err := baseline.Lookup(n)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	cfg := engine.DefaultRunConfig(mode)
	cfg.Samples = 12
	seeds := []uint64{1, 2}
	res, err := engine.Compare(context.Background(), env, fs, engine.CompareConfig{Run: cfg, Seeds: seeds})
	if err != nil {
		t.Fatal(err)
	}
	return NewDocument("small", env, cfg, seeds, res)
}

// The JSON document carries what docs/sim-json.md promises machines.
func TestJSONDocument(t *testing.T) {
	doc := compare(t, smallEnv(t), engine.Inflate, "fgd", "best-fit")
	var buf bytes.Buffer
	if err := doc.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["schema"] != Schema || got["mode"] != "inflate" {
		t.Errorf("schema %v mode %v", got["schema"], got["mode"])
	}
	runs := got["runs"].([]any)
	if len(runs) != 4 {
		t.Fatalf("%d runs, want 2 policies x 2 seeds", len(runs))
	}
	for _, r := range runs {
		run := r.(map[string]any)
		for _, k := range []string{"policy", "seed", "mode", "wall_seconds", "decisions", "measures", "curve"} {
			if _, ok := run[k]; !ok {
				t.Fatalf("run lacks %q: %v", k, run)
			}
		}
		m := run["measures"].(map[string]any)
		for _, k := range []string{"unallocated_gpu_share_at_100", "failure_rate", "fragmentation", "util_used_cpu_mean", "latency_p95_ms", "carbon_g_per_h", "decision_us_mean"} {
			if _, ok := m[k]; !ok {
				t.Errorf("measures lack %q", k)
			}
		}
		curve := run["curve"].([]any)
		if len(curve) != 131 {
			t.Fatalf("curve has %d points, want 131", len(curve))
		}
		p := curve[100].(map[string]any)
		for _, k := range []string{"arrived_gpu_share", "unallocated_gpu_share", "failed_pods"} {
			if _, ok := p[k]; !ok {
				t.Errorf("curve point lacks %q", k)
			}
		}
		if p["arrived_gpu_share"].(float64) != 1 {
			t.Errorf("point 100 at %v, want 1", p["arrived_gpu_share"])
		}
	}
}

func TestTableFilesAndPlots(t *testing.T) {
	doc := compare(t, smallEnv(t), engine.Inflate, "random-fit", "fgd")
	var buf bytes.Buffer
	if err := doc.WriteTable(&buf, DefaultColumns(doc.Mode, true)); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"policy", "unalloc_gpu@100%", "random-fit", "fgd", "decisions/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	dir := t.TempDir()
	if err := doc.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	for name, rows := range map[string]int{"runs.csv": 1 + 4, "curve.csv": 1 + 4*131} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil || len(recs) != rows {
			t.Errorf("%s: %d rows (%v), want %d", name, len(recs), err, rows)
		}
	}
	plots, err := doc.WritePlots(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(plots) != 2 {
		t.Fatalf("plots = %v, want unallocated and utilization", plots)
	}
	for _, p := range plots {
		b, err := os.ReadFile(p)
		if err != nil || len(b) < 1000 || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("%s is not a PNG (%d bytes, %v)", p, len(b), err)
		}
	}
}

func TestReplayDocument(t *testing.T) {
	l, err := scenario.Load("builtin:factory-vision")
	if err != nil {
		t.Fatal(err)
	}
	env, err := sim.NewEnv(l.Cluster, l.Workload, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	doc := compare(t, env, engine.Replay, "k8s-default")
	if _, n := doc.Mean("k8s-default", "carbon_g"); n != 2 {
		t.Errorf("carbon_g reported by %d runs, want 2", n)
	}
	if v, _ := doc.Mean("k8s-default", "cross_zone_traffic"); !(v >= 0 && v <= 1) {
		t.Errorf("cross_zone_traffic = %v", v)
	}
	dir := t.TempDir()
	plots, err := doc.WritePlots(dir)
	if err != nil || len(plots) != 2 || filepath.Base(plots[0]) != UtilizationPlot || filepath.Base(plots[1]) != MeasuresPlot {
		t.Fatalf("replay plots = %v, %v; want utilization and measures", plots, err)
	}
	for _, p := range plots {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		// utilization: 7 in of panels plus the legend strip beside them;
		// measures: two 4.5 in columns (at vgimg's 96 dpi)
		if w := img.Bounds().Dx(); w <= 7*96 && filepath.Base(p) == UtilizationPlot || w != 9*96 && filepath.Base(p) == MeasuresPlot {
			t.Errorf("%s: %d pixels wide", p, w)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, UnallocatedPlot)); !os.IsNotExist(err) {
		t.Error("replay wrote an unallocated-GPU curve")
	}
}

func TestWriteVersus(t *testing.T) {
	d := &Document{Runs: []Run{
		{Policy: "base", Measures: map[string]float64{"failure_rate": 0.02, "latency_p95_ms": 40}},
		{Policy: "base", Measures: map[string]float64{"failure_rate": 0.04, "latency_p95_ms": 60}},
		{Policy: "new", Measures: map[string]float64{"failure_rate": 0.003, "latency_p95_ms": 30}},
	}}
	var buf bytes.Buffer
	if err := d.WriteVersus(&buf, "base", []string{"failure_rate", "latency_p95_ms", "carbon_g"}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	// failure: before mean (2% + 4%) / 2 = 3%, after 0.3%: (0.3 - 3) / 3 = -90%.
	// latency: before (40 + 60) / 2 = 50, after 30: -40%. carbon: not measured.
	for _, want := range []string{"new versus base:", "3.00%", "0.30%", "-90%", "50.0", "30.0", "-40%", "carbon_g", "-"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if err := d.WriteVersus(&buf, "nobody", nil); !errors.Is(err, ErrReport) {
		t.Errorf("unknown base: %v", err)
	}
}

// TestPaired: runs pair by seed and workload; a run the other policy did
// not make, or made twice, is left out. Expected figures by hand:
// failures base 2%, 4%, 5% and new 1%, 5%, 2% on seeds 1-3: differences
// -1, +1, -3 points, mean -1, sample sd 2, se 2/sqrt(3) = 1.15; relative
// changes -50%, +25%, -60%, mean -28.3%, sample sd 46.5%, se 26.8%;
// lower on 2 of 3.
func TestPaired(t *testing.T) {
	run := func(policy string, seed, scen uint64, fail, lat float64) Run {
		return Run{Policy: policy, Seed: seed, ScenarioSeed: scen, Measures: map[string]float64{"failure_rate": fail, "latency_p95_ms": lat}}
	}
	d := &Document{Runs: []Run{
		run("base", 1, 7, 0.02, 0), run("base", 2, 7, 0.04, 50), run("base", 3, 7, 0.05, 60),
		run("new", 1, 7, 0.01, 10), run("new", 2, 7, 0.05, 40), run("new", 3, 7, 0.02, 30),
		run("base", 4, 7, 0.5, 5),                              // new never ran seed 4
		run("new", 1, 8, 0.9, 9),                               // nor base workload 8
		run("twice", 1, 7, 0.1, 1), run("twice", 1, 7, 0.2, 2), // twice on one key
		// twice on one key, once without the measure: still twice
		run("partial", 1, 7, 0.1, 1), {Policy: "partial", Seed: 1, ScenarioSeed: 7, Measures: map[string]float64{"failure_rate": 0.3}},
	}}
	tests := []struct {
		policy, measure string
		want            PairedStat
	}{
		{"new", "failure_rate", PairedStat{N: 3, Diff: -0.01, DiffSE: 0.02 / math.Sqrt(3), Rel: -0.85 / 3, RelSE: 0.4645787 / math.Sqrt(3), RelN: 3, Lower: 2}},
		// latency: +10, -10, -30 (mean -10, sd 20); base 0 on seed 1, so
		// the relative change is over seeds 2-3: -20%, -50%
		{"new", "latency_p95_ms", PairedStat{N: 3, Diff: -10, DiffSE: 20 / math.Sqrt(3), Rel: -0.35, RelSE: 0.15, RelN: 2, Lower: 2}},
		{"twice", "failure_rate", PairedStat{Diff: math.NaN(), Rel: math.NaN()}},
		{"partial", "latency_p95_ms", PairedStat{Diff: math.NaN(), Rel: math.NaN()}},
		{"new", "carbon_g", PairedStat{Diff: math.NaN(), Rel: math.NaN()}},
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 || (math.IsNaN(a) && math.IsNaN(b)) }
	for _, tc := range tests {
		got := d.Paired("base", tc.policy, tc.measure)
		w := tc.want
		if got.N != w.N || got.RelN != w.RelN || got.Lower != w.Lower || !near(got.Diff, w.Diff) || !near(got.DiffSE, w.DiffSE) || !near(got.Rel, w.Rel) || !near(got.RelSE, w.RelSE) {
			t.Errorf("%s %s: got %+v, want %+v", tc.policy, tc.measure, got, w)
		}
	}
	var buf bytes.Buffer
	if err := d.WriteVersus(&buf, "base", []string{"failure_rate", "latency_p95_ms"}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"new versus base (paired over 3 runs", "-1.00 pts (1.15)", "-28.3% (26.8)", "2/3", "-10.0 (11.5)", "twice versus base:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// the JSON document's versus block: the same figures, no relative
	// change where a base value was zero, nothing for "twice" (no pair)
	if err := d.AddVersus("base"); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back Document
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	v := back.Versus
	if v == nil || v.Base != "base" || len(v.Policies) != 3 || v.Policies[0].Policy != "new" || v.Policies[0].Pairs != 3 || v.Policies[1].Pairs != 0 || len(v.Policies[1].Measures) != 0 {
		t.Fatalf("versus block %s", b)
	}
	fr, lat := v.Policies[0].Measures["failure_rate"], v.Policies[0].Measures["latency_p95_ms"]
	if fr.N != 3 || !near(fr.Diff, -0.01) || fr.Rel == nil || !near(*fr.Rel, -0.85/3) || fr.Lower != 2 || lat.Rel != nil || lat.RelSE != nil || !near(lat.DiffSE, 20/math.Sqrt(3)) {
		t.Errorf("versus block %s", b)
	}
	if err := d.AddVersus("nobody"); !errors.Is(err, ErrReport) {
		t.Errorf("unknown base: %v", err)
	}

	// a base next to zero makes the relative change infinite, which JSON
	// cannot carry: it is left out, the difference stays
	tiny := &Document{Runs: []Run{
		run("base", 1, 0, 5e-324, 1), run("base", 2, 0, 5e-324, 2),
		run("new", 1, 0, 0.01, 1), run("new", 2, 0, 0.02, 2),
	}}
	if err := tiny.AddVersus("base"); err != nil {
		t.Fatal(err)
	}
	if b, err = json.Marshal(tiny); err != nil {
		t.Fatalf("versus block with a base next to zero: %v", err)
	}
	if f := tiny.Versus.Policies[0].Measures["failure_rate"]; f.N != 2 || f.Rel != nil || !near(f.Diff, 0.015) {
		t.Errorf("versus block with a base next to zero: %s", b)
	}
}

// TestHourTicks: integer hours at the smallest step of 1, 2, 3, 4, 6, 12,
// 24 or 48 giving at most 12 labels, hours between as minor ticks up to
// three days.
func TestHourTicks(t *testing.T) {
	cases := []struct {
		lo, hi float64
		labels string
		minor  int
	}{
		{0, 10, "0 1 2 3 4 5 6 7 8 9 10", 0},            // 10 h: every hour
		{0, 48.5, "0 6 12 18 24 30 36 42 48", 40},       // 48 h: 48/4 = 12.1 > 12, so 6 h; 49 hours minus 9 labelled
		{0.3, 23.7, "2 4 6 8 10 12 14 16 18 20 22", 12}, // 23.4 h: 2 h; hours 1..23 not labelled: 12
		{0, 168, "0 24 48 72 96 120 144 168", 0},        // a week: 24 h (168/12 = 14 > 12), no minor ticks
	}
	for _, c := range cases {
		var labels []string
		minor := 0
		for _, tk := range (HourTicks{}).Ticks(c.lo, c.hi) {
			if tk.Label == "" {
				minor++
			} else {
				labels = append(labels, tk.Label)
			}
		}
		if got := strings.Join(labels, " "); got != c.labels || minor != c.minor {
			t.Errorf("[%g, %g]: labels %q and %d minor ticks, want %q and %d", c.lo, c.hi, got, minor, c.labels, c.minor)
		}
	}
}

// TestCleanTicks: the default ticks' values, labels without trailing
// zeros.
func TestCleanTicks(t *testing.T) {
	for _, tk := range (CleanTicks{}).Ticks(0, 75) {
		if tk.Label != "" && (strings.HasSuffix(tk.Label, "0") && strings.Contains(tk.Label, ".") || tk.Label != strconv.FormatFloat(tk.Value, 'f', -1, 64)) {
			t.Errorf("tick %v labelled %q", tk.Value, tk.Label)
		}
	}
	var labels []string
	for _, tk := range (CleanTicks{}).Ticks(0, 0.3) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	// gonum's default ticks on [0, 0.3] are 0, 0.15, 0.3, labelled "0.00", "0.15", "0.30"
	if got := strings.Join(labels, " "); got != "0 0.15 0.3" {
		t.Errorf("labels %q", got)
	}
}
