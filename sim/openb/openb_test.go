package openb

import (
	"bufio"
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/sim"
)

func TestEmbeddedTraces(t *testing.T) {
	nodes, err := LoadNodes("openb:"+AllNodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The README: 1,523 nodes; 310 without GPUs; GPUs 24*1 + 518*2 +
	// 54*4 + 617*8 = 6,212.
	var gpus, cpuOnly int
	models := map[string]int{}
	for _, n := range nodes {
		gpus += n.GPUs
		if n.GPUs == 0 {
			cpuOnly++
		} else {
			models[n.GPUModel]++
		}
	}
	if len(nodes) != 1523 || gpus != 6212 || cpuOnly != 310 {
		t.Errorf("all_node: %d nodes, %d GPUs, %d CPU-only; want 1523, 6212, 310", len(nodes), gpus, cpuOnly)
	}
	if models["G2"] != 549 || models["T4"] != 404 || len(models) != 7 {
		t.Errorf("models = %v", models)
	}
	gpuNodes, err := LoadNodes("openb:"+GPUNodes, nil)
	if err != nil || len(gpuNodes) != 1213 {
		t.Errorf("gpu_node: %d nodes, %v; want 1213", len(gpuNodes), err)
	}
	for _, tt := range []struct {
		name  string
		pods  int
		timed bool
	}{
		{Default, 8152, true},
		{CPU050, 7439, true},
		{GPUShare40, 8152, true},
		{GPUSpec10, 8152, true},
		{MultiGPU20, 8324, false}, // published without the time columns
	} {
		pl, err := LoadPods("openb:"+tt.name, nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(pl.Pods) != tt.pods || pl.Timed != tt.timed {
			t.Errorf("%s: %d pods, timed %v; want %d, %v", tt.name, len(pl.Pods), pl.Timed, tt.pods, tt.timed)
		}
	}
	// gpuspec10 constrains some pods to models, e.g. "V100M16|V100M32".
	pl, _ := LoadPods("openb:"+GPUSpec10, nil)
	var constrained int
	for _, p := range pl.Pods {
		if len(p.GPUSpec) > 0 {
			constrained++
		}
	}
	// 8152 rows, 7420 of them with an empty gpu_spec (cut -d, -f6 | sort |
	// uniq -c), so 732 constrained.
	if constrained != 732 {
		t.Errorf("gpuspec10 has %d constrained pods, want 732", constrained)
	}
}

func TestReadPodsFields(t *testing.T) {
	in := "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n" +
		"a,12000,16384,1,460,T4|V100M32|T4,LS,Running,10,20,10\n" +
		"b,500,0,0,0,,BE,Pending,30,,\n"
	pl, err := ReadPods(strings.NewReader(in), "t.csv", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := pl.Pods[0], pl.Pods[1]
	if a.CPU != 12000 || a.Memory != 16384 || a.GPUs != 1 || a.GPUMilli != 460 || a.QoS != sim.QoSLS || a.Create != 10 || a.Delete != 20 {
		t.Errorf("pod a = %+v", a)
	}
	if len(a.GPUSpec) != 2 || a.GPUSpec[0] != "T4" || a.GPUSpec[1] != "V100M32" {
		t.Errorf("pod a spec = %v, want [T4 V100M32] (deduplicated)", a.GPUSpec)
	}
	if b.Delete != sim.NoDeletion || b.QoS != sim.QoSBE {
		t.Errorf("pod b = %+v", b)
	}
}

func TestReadPodsBadInput(t *testing.T) {
	const header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,creation_time,deletion_time\n"
	tests := []struct {
		name string
		in   string
		base error
		want string // the error's text starts with or contains this
	}{
		{"empty file", "", ErrMissingColumn, "t.csv:1: openb: missing column: empty file"},
		{"missing column", "name,cpu_milli,memory_mib,num_gpu\np,1,1,0\n", ErrMissingColumn, `t.csv:1: field gpu_milli: openb: missing column "gpu_milli" in header`},
		{"no rows", header, ErrEmpty, "t.csv:1: openb: no rows"},
		{"negative cpu", header + "p,-5,1,0,0,,LS,0,1\n", ErrBadValue, "t.csv:2: field cpu_milli: openb: bad value: -5 is negative"},
		{"non-numeric memory", header + "p,5,lots,0,0,,LS,0,1\n", ErrBadValue, `t.csv:2: field memory_mib: openb: bad value: "lots" is not an integer`},
		{"fractional gpu", header + "p,5,1,1.5,0,,LS,0,1\n", ErrBadValue, `t.csv:2: field num_gpu: openb: bad value: "1.5" is not an integer`},
		{"empty required", header + "p,,1,0,0,,LS,0,1\n", ErrBadValue, "t.csv:2: field cpu_milli: openb: bad value: empty"},
		{"unknown spec", header + "p,5,1,1,500,H100,LS,0,1\n", ErrUnknownSpec, `t.csv:2: field gpu_spec: openb: unknown GPU spec: "H100"`},
		{"spec without gpu", header + "p,5,1,0,0,T4,LS,0,1\n", ErrBadValue, "t.csv:2: field gpu_spec"},
		{"milli without gpu", header + "p,5,1,0,300,,LS,0,1\n", ErrBadValue, "t.csv:2: field gpu_milli: openb: bad value: 300 given for a pod with num_gpu 0"},
		{"milli over 1000", header + "p,5,1,1,1200,,LS,0,1\n", ErrBadValue, "t.csv:2: field gpu_milli"},
		{"shared multi gpu", header + "p,5,1,2,500,,LS,0,1\n", ErrBadValue, "must take whole gpus"},
		{"unknown qos", header + "p,5,1,0,0,,Gold,0,1\n", ErrBadValue, "t.csv:2: field qos"},
		{"deleted before created", header + "p,5,1,0,0,,LS,9,3\n", ErrBadValue, "t.csv:2: field deletion_time: openb: bad value: 3 is before creation_time 9"},
		{"duplicate", header + "p,5,1,0,0,,LS,0,1\np,5,1,0,0,,LS,0,1\n", ErrDuplicate, `t.csv:3: field name: openb: duplicate name: "p" already on line 2`},
		{"bad quoting", header + "p,5,1,0,0,,LS,0,1\n\"q,5\n", ErrBadValue, "t.csv:3:"},
		{"empty name", header + ",5,1,0,0,,LS,0,1\n", ErrBadValue, "t.csv:2: field name"},
		{"huge cpu", header + "p,5000000000000000000,1,0,0,,LS,0,1\n", ErrBadValue, "t.csv:2: field cpu_milli: openb: bad value: 5000000000000000000 is too large"},
		{"endless deletion", header + "p,5,1,0,0,,LS,0,9223372036854775807\n", ErrBadValue, "t.csv:2: field deletion_time: openb: bad value: 9223372036854775807 is too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadPods(strings.NewReader(tt.in), "t.csv", nil)
			if !errors.Is(err, tt.base) {
				t.Fatalf("error = %v, want %v", err, tt.base)
			}
			var le *LineError
			if !errors.As(err, &le) || le.File != "t.csv" {
				t.Fatalf("error %v is not a LineError for t.csv", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestReadNodesBadInput(t *testing.T) {
	const header = "sn,cpu_milli,memory_mib,gpu,model\n"
	tests := []struct {
		name string
		in   string
		base error
		want string
	}{
		{"missing model column", "sn,cpu_milli,memory_mib,gpu\nn,1,1,0\n", ErrMissingColumn, "t.csv:1: field model"},
		{"zero cpu", header + "n,0,1,0,\n", ErrBadValue, "t.csv:2: field cpu_milli: openb: bad value: must be > 0"},
		{"gpus without model", header + "n,1,1,2,\n", ErrBadValue, "t.csv:2: field model: openb: bad value: empty, but the node has 2 gpus"},
		{"model without gpus", header + "n,1,1,0,T4\n", ErrBadValue, "t.csv:2: field model"},
		{"unknown model", header + "n,1,1,2,H100\n", ErrUnknownSpec, `t.csv:2: field model: openb: unknown GPU spec: "H100"`},
		{"too many gpus", header + "n,1,1,100,T4\n", ErrBadValue, "t.csv:2: field gpu"},
		{"duplicate", header + "n,1,1,0,\nn,1,1,0,\n", ErrDuplicate, "t.csv:3: field sn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadNodes(strings.NewReader(tt.in), "t.csv", nil)
			if !errors.Is(err, tt.base) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %v containing %q", err, tt.base, tt.want)
			}
		})
	}
	// A scenario may declare its own models: then only those are known.
	if _, err := ReadNodes(strings.NewReader(header+"n,1,1,1,Orin\n"), "t.csv", []sim.GPUModel{{Name: "Orin"}}); err != nil {
		t.Errorf("custom model refused: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := LoadPods("openb:nosuch", nil); !errors.Is(err, ErrUnknownTrace) || !strings.Contains(err.Error(), "have all_node, cpu050") {
		t.Errorf("unknown trace: %v", err)
	}
	_, err := LoadNodes("/nonexistent/nodes.csv", nil)
	if err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "/nonexistent/nodes.csv") {
		t.Errorf("missing file: %v", err)
	}
}

// seedLines returns the header and the first n data lines of an embedded
// trace, as fuzz seeds.
func seedLines(t testing.TB, name string, n int) string {
	t.Helper()
	f, _, err := Open("openb:" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	sc := bufio.NewScanner(f)
	for i := 0; i <= n && sc.Scan(); i++ {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return b.String()
}

func FuzzReadPods(f *testing.F) {
	f.Add(seedLines(f, Default, 5))
	f.Add(seedLines(f, GPUSpec10, 40))
	f.Add(seedLines(f, MultiGPU20, 3))
	f.Add("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,8,1000\n")
	f.Add("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np,1,1,1,10,T4|\"\n")
	f.Fuzz(func(t *testing.T, in string) {
		pl, err := ReadPods(strings.NewReader(in), "fuzz.csv", nil)
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error %v is not a LineError", err)
			}
			return
		}
		if len(pl.Pods) == 0 || len(pl.Pods) > strings.Count(in, "\n")+1 {
			t.Fatalf("%d pods from %d lines", len(pl.Pods), strings.Count(in, "\n")+1)
		}
		for i := range pl.Pods {
			if err := pl.Pods[i].Validate(); err != nil {
				t.Fatalf("accepted an invalid pod: %v", err)
			}
		}
	})
}

func FuzzReadNodes(f *testing.F) {
	f.Add(seedLines(f, AllNodes, 5))
	f.Add(seedLines(f, AllNodes, 400))
	f.Add("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,8,G2\n")
	f.Fuzz(func(t *testing.T, in string) {
		nodes, err := ReadNodes(strings.NewReader(in), "fuzz.csv", nil)
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error %v is not a LineError", err)
			}
			return
		}
		for i := range nodes {
			if err := nodes[i].Validate(); err != nil {
				t.Fatalf("accepted an invalid node: %v", err)
			}
		}
	})
}

// FuzzParseMix: no mixture reference (a pod list "mix:KEY=VALUE,..."
// given on a command line or in a scenario's pods) makes ParseMix panic;
// a refusal wraps ErrMix; an accepted mixture is valid and, as String
// documents, ParseMix(m.String()) == m. Seeded with references of the
// kind docs/training.md evaluates on and the package documentation shows.
func FuzzParseMix(f *testing.F) {
	for _, s := range []string{
		"mix:spec=0.3,seed=7", "mix:spec=0.25,seed=901", "mix:share=0.5,spec=0.35,multi=0.04,seed=902", "mix:cpu=0.2,spec=0.15,specsets=5,seed=903",
		"mix:cpu=0.5", "mix:share=0.4,seed=7", "mix:multi=0.2,pods=500", "mix:spec=0.1,specsets=3,models=T4|A10|V100M32",
		"mix:base=openb:gpuspec10,cpu=-1,share=0,multi=1,spec=1,seed=18446744073709551615",
		DefaultMix().String(), "mix:", "mix:cpu=0.5,cpu=0.6", "mix:base=mix:cpu=1", "mix: pods = 3 ,cpu=1e-400,models=",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		m, err := ParseMix(ref)
		if err != nil {
			if !errors.Is(err, ErrMix) {
				t.Fatalf("%q: refusal %v does not wrap ErrMix", ref, err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("%q: accepted an invalid mixture %+v: %v", ref, m, err)
		}
		back, err := ParseMix(m.String())
		if err != nil || !reflect.DeepEqual(back, m) {
			t.Fatalf("%q read as %+v, written %q, read back as %+v (%v)", ref, m, m.String(), back, err)
		}
	})
}
