package openb

import (
	"context"
	"embed"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/edgesched/edgesched/internal/boundedio"
	"github.com/edgesched/edgesched/sim"
)

// Errors of the loaders; parse errors are a *LineError wrapping one of them.
var (
	ErrMissingColumn = errors.New("openb: missing column")
	ErrBadValue      = errors.New("openb: bad value")
	ErrUnknownSpec   = errors.New("openb: unknown GPU spec")
	ErrDuplicate     = errors.New("openb: duplicate name")
	ErrEmpty         = errors.New("openb: no rows")
	ErrUnknownTrace  = errors.New("openb: unknown embedded trace")
)

// LineError is the error type of the loaders: file, line, column.
type LineError = sim.LineError

//go:embed data/*.csv
var data embed.FS

// Embedded trace names, usable wherever a file path is accepted as
// "openb:NAME". GPUNodes is all_node without its CPU-only nodes: the
// 1,213-node cluster the FGD paper's artifact simulates.
const (
	AllNodes   = "all_node"
	GPUNodes   = "gpu_node"
	Default    = "default"
	CPU050     = "cpu050"
	GPUShare40 = "gpushare40"
	GPUSpec10  = "gpuspec10"
	MultiGPU20 = "multigpu20"
)

// Traces lists the embedded files by name.
func Traces() map[string]string {
	return map[string]string{
		AllNodes:   "data/openb_node_list_all_node.csv",
		Default:    "data/openb_pod_list_default.csv",
		CPU050:     "data/openb_pod_list_cpu050.csv",
		GPUShare40: "data/openb_pod_list_gpushare40.csv",
		GPUSpec10:  "data/openb_pod_list_gpuspec10.csv",
		MultiGPU20: "data/openb_pod_list_multigpu20.csv",
	}
}

// Caps of a trace file (internal/boundedio): a file over MaxFileBytes or
// with more than MaxRows rows is refused, naming the cap, not cut short.
// The shipped traces have 1,523 nodes and about 8,000 pods.
const (
	MaxFileBytes = 64 << 20
	MaxRows      = 200_000
)

// Open opens an embedded trace ("openb:default" or "default") or, failing
// that prefix, a file on disk. The returned name is what errors cite.
func Open(ref string) (io.ReadCloser, string, error) {
	return OpenContext(context.Background(), ref)
}

// OpenContext is Open whose reads honour ctx. A file on disk must be a
// regular file of at most MaxFileBytes.
func OpenContext(ctx context.Context, ref string) (io.ReadCloser, string, error) {
	if name, ok := strings.CutPrefix(ref, "openb:"); ok {
		path, found := Traces()[name]
		if !found {
			names := make([]string, 0, len(Traces()))
			for n := range Traces() {
				names = append(names, n)
			}
			slices.Sort(names)
			return nil, ref, fmt.Errorf("%w %q (have %s)", ErrUnknownTrace, name, strings.Join(names, ", "))
		}
		f, err := data.Open(path)
		if err != nil {
			return nil, ref, err
		}
		return struct {
			io.Reader
			io.Closer
		}{boundedio.NewReader(ctx, f, ref, MaxFileBytes), f}, ref, nil
	}
	f, err := boundedio.Open(ctx, ref, MaxFileBytes)
	if err != nil {
		return nil, ref, fmt.Errorf("open trace: %w", err)
	}
	return f, ref, nil
}

// FS exposes the embedded CSV files (read-only).
func FS() fs.FS { return data }

// LoadNodes reads a node list from a reference accepted by Open, or
// "openb:gpu_node".
func LoadNodes(ref string, models []sim.GPUModel) ([]sim.NodeSpec, error) {
	return LoadNodesContext(context.Background(), ref, models)
}

// LoadNodesContext is LoadNodes honouring ctx while it reads.
func LoadNodesContext(ctx context.Context, ref string, models []sim.GPUModel) ([]sim.NodeSpec, error) {
	if ref == "openb:"+GPUNodes {
		all, err := LoadNodesContext(ctx, "openb:"+AllNodes, models)
		if err != nil {
			return nil, err
		}
		gpu := all[:0]
		for _, n := range all {
			if n.GPUs > 0 {
				gpu = append(gpu, n)
			}
		}
		return gpu, nil
	}
	f, name, err := OpenContext(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadNodes(f, name, models)
}

// LoadPods reads a pod list from a reference accepted by Open, or
// generates one from a mixture reference ("mix:...", ParseMix).
func LoadPods(ref string, models []sim.GPUModel) (*PodList, error) {
	return LoadPodsContext(context.Background(), ref, models)
}

// LoadPodsContext is LoadPods honouring ctx while it reads.
func LoadPodsContext(ctx context.Context, ref string, models []sim.GPUModel) (*PodList, error) {
	if strings.HasPrefix(ref, MixPrefix) {
		m, err := ParseMix(ref)
		if err != nil {
			return nil, err
		}
		return Generate(m)
	}
	f, name, err := OpenContext(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadPods(f, name, models)
}

// LoadEnv loads a node list and a pod list (references accepted by
// LoadNodes and LoadPods) into a simulator environment with the default
// GPU models.
func LoadEnv(nodesRef, podsRef string) (*sim.Env, error) {
	nodes, err := LoadNodes(nodesRef, nil)
	if err != nil {
		return nil, err
	}
	pods, err := LoadPods(podsRef, nil)
	if err != nil {
		return nil, err
	}
	return sim.NewEnv(&sim.Cluster{Name: nodesRef, Nodes: nodes}, &sim.Workload{Name: podsRef, Pods: pods.Pods, Untimed: !pods.Timed}, sim.EnvOptions{})
}

// table is a CSV file with a header, read row by row.
type table struct {
	file string
	r    *csv.Reader
	col  map[string]int
	line int
	row  []string
	// rows read (the header aside), capped by limits.MaxRows
	rows   int
	limits boundedio.Limits
}

func newTable(r io.Reader, file string, required []string) (*table, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, &LineError{File: file, Line: 1, Err: fmt.Errorf("%w: empty file, expected a header", ErrMissingColumn)}
	}
	if err != nil {
		return nil, &LineError{File: file, Line: 1, Err: fmt.Errorf("%w: %v", ErrBadValue, err)}
	}
	t := &table{file: file, r: cr, col: map[string]int{}, line: 1, limits: boundedio.Limits{MaxBytes: MaxFileBytes, MaxRows: MaxRows}}
	for i, h := range header {
		t.col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	for _, c := range required {
		if _, ok := t.col[c]; !ok {
			return nil, &LineError{File: file, Line: 1, Field: c, Err: fmt.Errorf("%w %q in header", ErrMissingColumn, c)}
		}
	}
	return t, nil
}

// next reads the next row; it returns false at the end of the file.
func (t *table) next() (bool, error) {
	row, err := t.r.Read()
	if err == io.EOF {
		return false, nil
	}
	t.line++
	if err != nil {
		if errors.Is(err, boundedio.ErrTooLarge) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return false, err
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			t.line = pe.Line
		}
		return false, &LineError{File: t.file, Line: t.line, Err: fmt.Errorf("%w: %v", ErrBadValue, err)}
	}
	t.rows++
	if err := t.limits.CheckRows(t.file, t.rows); err != nil {
		return false, err
	}
	t.row = row
	return true, nil
}

func (t *table) has(c string) bool { _, ok := t.col[c]; return ok }

func (t *table) str(c string) string {
	i, ok := t.col[c]
	if !ok || i >= len(t.row) {
		return ""
	}
	return strings.TrimSpace(t.row[i])
}

func (t *table) errf(field string, base error, format string, args ...any) error {
	return &LineError{File: t.file, Line: t.line, Field: field, Err: fmt.Errorf("%w: "+format, append([]any{base}, args...)...)}
}

// int reads a non-negative integer column; empty gives def when allowed.
func (t *table) int(c string, allowEmpty bool, def int64) (int64, error) {
	s := t.str(c)
	if s == "" {
		if allowEmpty {
			return def, nil
		}
		return 0, t.errf(c, ErrBadValue, "empty, want a non-negative integer")
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// Accept integral floats such as "1000.0" some exports write.
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != float64(int64(f)) {
			return 0, t.errf(c, ErrBadValue, "%q is not an integer", s)
		}
		v = int64(f)
	}
	if v < 0 {
		return 0, t.errf(c, ErrBadValue, "%d is negative", v)
	}
	if limit := int64(sim.MaxQuantity); strings.HasSuffix(c, "_time") && v > sim.MaxTime || v > limit {
		return 0, t.errf(c, ErrBadValue, "%d is too large", v)
	}
	return v, nil
}

func knownModels(models []sim.GPUModel) map[string]bool {
	if len(models) == 0 {
		models = sim.KnownGPUModels()
	}
	out := make(map[string]bool, len(models))
	for _, m := range models {
		out[m.Name] = true
	}
	return out
}

// ReadNodes parses an openb node list (columns sn, cpu_milli, memory_mib,
// gpu, model). GPU models must be among models (the known openb models
// when nil). Nodes are amd64 in zone "" (the cluster's first zone).
func ReadNodes(r io.Reader, file string, models []sim.GPUModel) ([]sim.NodeSpec, error) {
	t, err := newTable(r, file, []string{"sn", "cpu_milli", "memory_mib", "gpu", "model"})
	if err != nil {
		return nil, err
	}
	known := knownModels(models)
	seen := map[string]int{}
	var out []sim.NodeSpec
	for {
		ok, err := t.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		name := t.str("sn")
		if name == "" {
			return nil, t.errf("sn", ErrBadValue, "empty node name")
		}
		if prev, dup := seen[name]; dup {
			return nil, t.errf("sn", ErrDuplicate, "%q already on line %d", name, prev)
		}
		seen[name] = t.line
		cpu, err := t.int("cpu_milli", false, 0)
		if err != nil {
			return nil, err
		}
		mem, err := t.int("memory_mib", false, 0)
		if err != nil {
			return nil, err
		}
		gpus, err := t.int("gpu", false, 0)
		if err != nil {
			return nil, err
		}
		model := t.str("model")
		switch {
		case cpu == 0:
			return nil, t.errf("cpu_milli", ErrBadValue, "must be > 0")
		case mem == 0:
			return nil, t.errf("memory_mib", ErrBadValue, "must be > 0")
		case gpus > sim.MaxGPUsPerNode:
			return nil, t.errf("gpu", ErrBadValue, "%d exceeds %d devices per node", gpus, sim.MaxGPUsPerNode)
		case gpus > 0 && model == "":
			return nil, t.errf("model", ErrBadValue, "empty, but the node has %d gpus", gpus)
		case gpus == 0 && model != "":
			return nil, t.errf("model", ErrBadValue, "%q given for a node without gpus", model)
		case model != "" && !known[model]:
			return nil, t.errf("model", ErrUnknownSpec, "%q", model)
		}
		out = append(out, sim.NodeSpec{Name: name, CPU: cpu, Memory: mem, GPUs: int(gpus), GPUModel: model, Arch: sim.ArchAMD64})
	}
	if len(out) == 0 {
		return nil, &LineError{File: file, Line: t.line, Err: ErrEmpty}
	}
	return out, nil
}

// PodList is a parsed openb pod list.
type PodList struct {
	Pods []sim.PodSpec
	// Timed is set when the file has a creation_time column.
	Timed bool
}

// ReadPods parses an openb pod list. Required columns: name, cpu_milli,
// memory_mib, num_gpu, gpu_milli. Optional: gpu_spec ('|'-separated
// models, empty = any), qos, creation_time, deletion_time (empty = never),
// pod_phase and scheduled_time (read but unused: the simulator decides
// placement itself).
func ReadPods(r io.Reader, file string, models []sim.GPUModel) (*PodList, error) {
	t, err := newTable(r, file, []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"})
	if err != nil {
		return nil, err
	}
	known := knownModels(models)
	seen := map[string]int{}
	out := &PodList{Timed: t.has("creation_time")}
	for {
		ok, err := t.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		p, err := readPod(t, known, seen)
		if err != nil {
			return nil, err
		}
		out.Pods = append(out.Pods, p)
	}
	if len(out.Pods) == 0 {
		return nil, &LineError{File: file, Line: t.line, Err: ErrEmpty}
	}
	return out, nil
}

func readPod(t *table, known map[string]bool, seen map[string]int) (sim.PodSpec, error) {
	var p sim.PodSpec
	p.Name = t.str("name")
	if p.Name == "" {
		return p, t.errf("name", ErrBadValue, "empty pod name")
	}
	if prev, dup := seen[p.Name]; dup {
		return p, t.errf("name", ErrDuplicate, "%q already on line %d", p.Name, prev)
	}
	seen[p.Name] = t.line
	var err error
	if p.CPU, err = t.int("cpu_milli", false, 0); err != nil {
		return p, err
	}
	if p.Memory, err = t.int("memory_mib", false, 0); err != nil {
		return p, err
	}
	gpus, err := t.int("num_gpu", false, 0)
	if err != nil {
		return p, err
	}
	if gpus > sim.MaxGPUsPerNode {
		return p, t.errf("num_gpu", ErrBadValue, "%d exceeds %d", gpus, sim.MaxGPUsPerNode)
	}
	p.GPUs = int(gpus)
	if p.GPUMilli, err = t.int("gpu_milli", false, 0); err != nil {
		return p, err
	}
	switch {
	case p.GPUs == 0 && p.GPUMilli != 0:
		return p, t.errf("gpu_milli", ErrBadValue, "%d given for a pod with num_gpu 0", p.GPUMilli)
	case p.GPUs > 0 && (p.GPUMilli == 0 || p.GPUMilli > sim.MilliGPU):
		return p, t.errf("gpu_milli", ErrBadValue, "%d, want 1..%d for a pod with gpus", p.GPUMilli, sim.MilliGPU)
	case p.GPUs > 1 && p.GPUMilli != sim.MilliGPU:
		return p, t.errf("gpu_milli", ErrBadValue, "%d, but a pod with %d gpus must take whole gpus (%d)", p.GPUMilli, p.GPUs, sim.MilliGPU)
	}
	if spec := t.str("gpu_spec"); spec != "" {
		if p.GPUs == 0 {
			return p, t.errf("gpu_spec", ErrBadValue, "%q given for a pod without gpus", spec)
		}
		for _, m := range strings.Split(spec, "|") {
			m = strings.TrimSpace(m)
			if m == "" {
				continue
			}
			if !known[m] {
				return p, t.errf("gpu_spec", ErrUnknownSpec, "%q", m)
			}
			if !slices.Contains(p.GPUSpec, m) {
				p.GPUSpec = append(p.GPUSpec, m)
			}
		}
	}
	if p.QoS, err = sim.ParseQoS(t.str("qos")); err != nil {
		return p, t.errf("qos", ErrBadValue, "%v", err)
	}
	if p.Create, err = t.int("creation_time", true, 0); err != nil {
		return p, err
	}
	if p.Delete, err = t.int("deletion_time", true, sim.NoDeletion); err != nil {
		return p, err
	}
	if p.Delete != sim.NoDeletion && p.Delete < p.Create {
		return p, t.errf("deletion_time", ErrBadValue, "%d is before creation_time %d", p.Delete, p.Create)
	}
	if _, err = t.int("scheduled_time", true, 0); err != nil {
		return p, err
	}
	return p, nil
}
