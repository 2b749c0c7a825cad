package report

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/edgesched/edgesched/internal/atomicfile"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/engine"
)

// Schema identifies the JSON document's layout (docs/sim-json.md).
const Schema = "edgesched.sim/v1"

// ErrReport wraps a request the document cannot answer.
var ErrReport = errors.New("report: bad request")

// Document is the machine-readable result of a comparison: `edgectl sim -o
// json` prints it and results.json holds it.
type Document struct {
	Schema string `json:"schema"`
	// Scenario names the cluster and workload (a scenario name or the
	// node and pod files).
	Scenario string      `json:"scenario"`
	Mode     engine.Mode `json:"mode"`
	Nodes    int         `json:"nodes"`
	// WorkloadPods is the number of pods in the workload (inflate mode
	// samples from them).
	WorkloadPods int `json:"workload_pods"`
	// Capacity is the cluster's CPU (milli), memory (MiB) and GPU
	// (milli-GPU).
	Capacity Capacity    `json:"capacity"`
	Seeds    []uint64    `json:"seeds"`
	Config   RunSettings `json:"config"`
	Runs     []Run       `json:"runs"`
	// Versus is the paired comparison against one policy (`edgectl sim
	// --versus`), absent without it.
	Versus *Versus `json:"versus,omitempty"`
}

// Capacity mirrors sim.Resources with JSON names.
type Capacity struct {
	CPUMilli  int64 `json:"cpu_milli"`
	MemoryMiB int64 `json:"memory_mib"`
	GPUMilli  int64 `json:"gpu_milli"`
}

// RunSettings records the run configuration that produced the document.
type RunSettings struct {
	InflateTarget   float64 `json:"inflate_target,omitempty"`
	InflateStep     float64 `json:"inflate_step,omitempty"`
	InflateResource string  `json:"inflate_resource,omitempty"`
	TieBreak        string  `json:"tie_break"`
	Samples         int     `json:"samples,omitempty"`
	BaseLatencyMs   float64 `json:"base_latency_ms"`
	ScenarioSeed    uint64  `json:"scenario_seed,omitempty"`
	// ScenarioSeeds lists the generator seeds when the runs span several
	// generated workloads (each run records its own).
	ScenarioSeeds []uint64 `json:"scenario_seeds,omitempty"`
}

// Run is one (policy, seed) run.
type Run struct {
	Policy string `json:"policy"`
	Seed   uint64 `json:"seed"`
	// ScenarioSeed is the generator seed of the run's workload, when the
	// document spans several (RunSettings.ScenarioSeeds).
	ScenarioSeed uint64               `json:"scenario_seed,omitempty"`
	Mode         engine.Mode          `json:"mode"`
	WallSeconds  float64              `json:"wall_seconds"`
	Decisions    int                  `json:"decisions"`
	Measures     map[string]float64   `json:"measures"`
	Curve        []engine.CurvePoint  `json:"curve,omitempty"`
	Series       []engine.SeriesPoint `json:"series,omitempty"`
	// Failures are the pod classes the run failed most (engine.Result).
	Failures []engine.FailedClass `json:"failures,omitempty"`
}

// NewDocument assembles a document from results.
func NewDocument(scenario string, env *sim.Env, cfg engine.RunConfig, seeds []uint64, results []*engine.Result) *Document {
	d := &Document{
		Schema: Schema, Scenario: scenario, Mode: cfg.Mode, Nodes: len(env.Nodes), WorkloadPods: len(env.Pods),
		Capacity: Capacity{CPUMilli: env.Capacity.CPU, MemoryMiB: env.Capacity.Mem, GPUMilli: env.Capacity.GPU},
		Seeds:    seeds,
		Config:   RunSettings{TieBreak: string(cfg.TieBreak), BaseLatencyMs: cfg.BaseLatencyMs},
	}
	if cfg.Mode == engine.Inflate {
		d.Config.InflateTarget, d.Config.InflateStep, d.Config.InflateResource = cfg.InflateTarget, cfg.InflateStep, cfg.InflateResource
	} else {
		d.Config.Samples = cfg.Samples
	}
	for _, r := range results {
		d.Runs = append(d.Runs, Run{Policy: r.Policy, Seed: r.Seed, Mode: r.Mode, WallSeconds: r.WallSeconds, Decisions: r.Decisions, Measures: r.Measures, Curve: r.Curve, Series: r.Series, Failures: r.Failures})
	}
	return d
}

// WriteJSON writes the document, indented.
func (d *Document) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// Policies returns the policies in the order of their first run.
func (d *Document) Policies() []string {
	var out []string
	for _, r := range d.Runs {
		if !slices.Contains(out, r.Policy) {
			out = append(out, r.Policy)
		}
	}
	return out
}

// Mean returns the mean of a measure over a policy's runs and how many runs
// reported it.
func (d *Document) Mean(policy, measure string) (float64, int) {
	var s float64
	var n int
	for _, r := range d.Runs {
		if v, ok := r.Measures[measure]; ok && r.Policy == policy {
			s += v
			n++
		}
	}
	if n == 0 {
		return math.NaN(), 0
	}
	return s / float64(n), n
}

// DefaultColumns are the table's measures for a mode.
func DefaultColumns(mode engine.Mode, hasGPU bool) []string {
	if mode == engine.Inflate {
		cols := []string{"unallocated_gpu_share_at_100", "failed_pods_at_100", "frag_gpu_share_at_100", "unallocated_gpu_share", "failure_rate"}
		if !hasGPU {
			cols = []string{"failure_rate", "alloc_cpu", "frag_cpu_share"}
		}
		return append(cols, "decision_us_mean")
	}
	cols := []string{"failure_rate", "util_used_cpu_mean", "util_active_cpu_mean", "util_alloc_cpu_p95", "fragmentation", "latency_p95_ms", "cross_zone_traffic", "carbon_g"}
	return append(cols, "decision_us_mean")
}

// headers shortens measure names for the table.
var headers = map[string]string{
	"unallocated_gpu_share_at_100": "unalloc_gpu@100%",
	"failed_pods_at_100":           "failed@100%",
	"frag_gpu_share_at_100":        "frag_gpu@100%",
	"unallocated_gpu_share":        "unalloc_gpu@end",
	"failure_rate":                 "failed",
	"decision_us_mean":             "us/pod",
	"decision_us_p99":              "us/pod_p99",
	"util_used_cpu_mean":           "cpu_used",
	"util_alloc_cpu_p95":           "cpu_req_p95",
	"util_active_cpu_mean":         "cpu_active",
	"latency_p95_ms":               "lat_p95_ms",
	"cross_zone_traffic":           "cross_zone",
	"fragmentation":                "frag",
}

// Header returns the table header of a measure.
func Header(measure string) string {
	if h, ok := headers[measure]; ok {
		return h
	}
	return measure
}

// WriteTable prints one row per policy with the mean of each column over
// seeds, plus decisions per second and wall time.
func (d *Document) WriteTable(w io.Writer, columns []string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"policy"}
	for _, c := range columns {
		head = append(head, Header(c))
	}
	head = append(head, "decisions/s", "wall_s")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, p := range d.Policies() {
		row := []string{p}
		for _, c := range columns {
			v, n := d.Mean(p, c)
			row = append(row, formatMeasure(c, v, n))
		}
		var dec, wall float64
		for _, r := range d.Runs {
			if r.Policy == p {
				dec += float64(r.Decisions)
				wall += r.WallSeconds
			}
		}
		row = append(row, fmt.Sprintf("%.0f", dec/math.Max(wall, 1e-9)), fmt.Sprintf("%.2f", wall))
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	return tw.Flush()
}

func formatMeasure(name string, v float64, n int) string {
	switch {
	case n == 0:
		return "-"
	case strings.HasPrefix(name, "pods_") || strings.HasPrefix(name, "failed_pods") || strings.HasPrefix(name, "nodes_") ||
		name == "node_failures" || name == "uplink_flaps":
		return fmt.Sprintf("%.1f", v)
	case strings.HasSuffix(name, "_ms") || strings.HasSuffix(name, "_us_mean") || strings.HasSuffix(name, "_us_p99"):
		return fmt.Sprintf("%.1f", v)
	case strings.HasPrefix(name, "carbon"):
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f%%", 100*v)
}

// writeFile replaces path with what fn writes, with mode 0666 less the
// umask (as os.Create), through atomicfile.WriteFunc: streamed to a
// temporary file beside it and renamed only once fn succeeded, so on any
// error (or an interruption) the file is as it was, absent or its earlier
// content, and never a partial file under its name.
func writeFile(path string, fn func(io.Writer) error) error {
	if err := atomicfile.WriteFunc(path, 0o666, fn); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), errors.Unwrap(err))
	}
	return nil
}

// WriteFiles writes results.json, runs.csv, failures.csv and, when
// present, curve.csv and series.csv into dir (created if needed). Each
// file is written whole or not at all (writeFile).
func (d *Document) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create output dir: %w", err)
	}
	write := func(name string, fn func(io.Writer) error) error {
		return writeFile(filepath.Join(dir, name), fn)
	}
	if err := write("results.json", d.WriteJSON); err != nil {
		return err
	}
	if err := write("runs.csv", d.writeRunsCSV); err != nil {
		return err
	}
	if err := write("failures.csv", d.writeFailuresCSV); err != nil {
		return err
	}
	if d.Mode == engine.Inflate {
		if err := write("curve.csv", d.writeCurveCSV); err != nil {
			return err
		}
	}
	return write("series.csv", d.writeSeriesCSV)
}

func (d *Document) measureNames() []string {
	var names []string
	for _, m := range engine.Measures() {
		for _, r := range d.Runs {
			if _, ok := r.Measures[m.Name]; ok {
				names = append(names, m.Name)
				break
			}
		}
	}
	return names
}

func ff(v float64) string { return strconv.FormatFloat(v, 'g', 10, 64) }

func (d *Document) writeRunsCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	names := d.measureNames()
	_ = cw.Write(append([]string{"policy", "seed", "scenario_seed", "mode", "wall_seconds", "decisions", "decisions_per_second"}, names...))
	for _, r := range d.Runs {
		row := []string{r.Policy, strconv.FormatUint(r.Seed, 10), strconv.FormatUint(r.ScenarioSeed, 10), string(r.Mode), ff(r.WallSeconds), strconv.Itoa(r.Decisions), ff(float64(r.Decisions) / math.Max(r.WallSeconds, 1e-9))}
		for _, n := range names {
			if v, ok := r.Measures[n]; ok {
				row = append(row, ff(v))
			} else {
				row = append(row, "")
			}
		}
		_ = cw.Write(row)
	}
	cw.Flush()
	return cw.Error()
}

func (d *Document) writeCurveCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"policy", "seed", "scenario_seed", "arrived_gpu_share", "unallocated_gpu_share", "failed_pods", "arrived_pods", "alloc_cpu_share", "frag_gpu_share"})
	for _, r := range d.Runs {
		for _, c := range r.Curve {
			_ = cw.Write([]string{r.Policy, strconv.FormatUint(r.Seed, 10), strconv.FormatUint(r.ScenarioSeed, 10), ff(c.ArrivedShare), ff(c.UnallocatedGPUShare), strconv.Itoa(c.FailedPods), strconv.Itoa(c.ArrivedPods), ff(c.AllocCPUShare), ff(c.FragGPUShare)})
		}
	}
	cw.Flush()
	return cw.Error()
}

func (d *Document) writeSeriesCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"policy", "seed", "scenario_seed", "x", "alloc_cpu", "alloc_mem", "alloc_gpu", "used_cpu", "used_mem"})
	for _, r := range d.Runs {
		for _, s := range r.Series {
			_ = cw.Write([]string{r.Policy, strconv.FormatUint(r.Seed, 10), strconv.FormatUint(r.ScenarioSeed, 10), ff(s.X), ff(s.AllocCPU), ff(s.AllocMem), ff(s.AllocGPU), ff(s.UsedCPU), ff(s.UsedMem)})
		}
	}
	cw.Flush()
	return cw.Error()
}

// writeFailuresCSV writes one row per run and failed pod class
// (engine.FailedClass), most failed first within a run.
func (d *Document) writeFailuresCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"policy", "seed", "scenario_seed", "class", "example", "service", "profile", "cpu_milli", "memory_mib", "gpus", "gpu_milli", "arch", "gpu_models", "node_selector", "tolerations", "arrived", "failed", "failed_with_room"})
	for _, r := range d.Runs {
		for _, f := range r.Failures {
			_ = cw.Write([]string{r.Policy, strconv.FormatUint(r.Seed, 10), strconv.FormatUint(r.ScenarioSeed, 10),
				strconv.Itoa(int(f.Class)), f.Example, f.Service, f.Profile,
				strconv.FormatInt(f.CPU, 10), strconv.FormatInt(f.Memory, 10), strconv.Itoa(int(f.GPUs)), strconv.FormatInt(f.GPUMilli, 10),
				f.Arch, strings.Join(f.GPUModels, " "), f.NodeSelector, f.Tolerations,
				strconv.Itoa(f.Arrived), strconv.Itoa(f.Failed), strconv.Itoa(f.WithRoom)})
		}
	}
	cw.Flush()
	return cw.Error()
}
