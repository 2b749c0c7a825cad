package model_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/edgectltest"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/onnx/onnxpb"
)

// TestModelImportRoundTrip: export then import of every shipped model,
// with the critic, writes the shipped model file again byte for byte.
func TestModelImportRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"default", "edge", "edge-carbon"} {
		x, esm := filepath.Join(dir, name+".onnx"), filepath.Join(dir, name+".esm")
		if _, _, err := run(t, "model", "export", name, "--critic", "--out", x); err != nil {
			t.Fatal(err)
		}
		out, _, err := run(t, "model", "import", x, "--out", esm)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"layers   Gemm(transB=1)+Relu, Gemm(transB=1)+Relu, Gemm(transB=1)", "from the file's metadata", "critic   from the file", "normal.  from the graph"} {
			if !strings.Contains(out, want) {
				t.Errorf("import output lacks %q:\n%s", want, out)
			}
		}
		got, err := os.ReadFile(esm)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("..", "..", "..", "models", name+".esm"))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: export then import does not give models/%s.esm back", name, name)
		}
	}
}

// pytorchMLP writes a 26 -> 16 -> 16 -> 1 MLP with act ("Relu" or
// "Tanh") after the hidden layers as PyTorch's exporter does for a 3-D
// input: MatMul with the weights folded to in x out, then Add with the
// bias first; seeded weights, no edgesched metadata.
func pytorchMLP(t *testing.T, path string, seed uint64, act string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	dims := []int{policy.NumFeatures, 16, 16, 1}
	g := &onnxpb.GraphProto{Name: proto.String("main_graph")}
	tensorInfo := func(name string, d0 *onnxpb.TensorShapeProto_Dimension, d1 int64) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)),
			Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{d0,
				{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d1}}}},
		}}}}
	}
	batch := &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "batch"}}
	g.Input = append(g.Input, tensorInfo("onnx::MatMul_0", batch, int64(dims[0])))
	x := "onnx::MatMul_0"
	for l := range 3 {
		in, out := dims[l], dims[l+1]
		w, b := make([]float32, in*out), make([]float32, out)
		for i := range w {
			w[i] = float32(rng.NormFloat64() * math.Sqrt(2/float64(in)))
		}
		for i := range b {
			b[i] = float32(0.1 * rng.NormFloat64())
		}
		wn, bn := "onnx::MatMul_"+string(rune('a'+l)), "fc"+string(rune('1'+l))+".bias"
		g.Initializer = append(g.Initializer,
			&onnxpb.TensorProto{Name: proto.String(wn), Dims: []int64{int64(in), int64(out)}, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), FloatData: w},
			&onnxpb.TensorProto{Name: proto.String(bn), Dims: []int64{int64(out)}, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), FloatData: b})
		mm, y := "/fc"+string(rune('1'+l))+"/MatMul_output_0", "/fc"+string(rune('1'+l))+"/Add_output_0"
		if l == 2 {
			y = "scores"
		}
		g.Node = append(g.Node,
			&onnxpb.NodeProto{OpType: proto.String("MatMul"), Input: []string{x, wn}, Output: []string{mm}},
			&onnxpb.NodeProto{OpType: proto.String("Add"), Input: []string{bn, mm}, Output: []string{y}})
		x = y
		if l < 2 {
			r := "/act" + string(rune('1'+l)) + "/" + act + "_output_0"
			g.Node = append(g.Node, &onnxpb.NodeProto{OpType: proto.String(act), Input: []string{x}, Output: []string{r}})
			x = r
		}
	}
	g.Output = append(g.Output, tensorInfo("scores", batch, 1))
	b, err := proto.Marshal(&onnxpb.ModelProto{
		IrVersion: proto.Int64(8), ProducerName: proto.String("pytorch"), ProducerVersion: proto.String("2.5.1"),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}}, Graph: g,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestModelImportOutside: an MLP made outside the project imports (once
// its schema is named), quantizes, signs and schedules openb pods in the
// simulator as a verified int8 artifact.
func TestModelImportOutside(t *testing.T) {
	dir := t.TempDir()
	keys := edgectltest.KeyDir(t, "coord")
	src, esm, esa := filepath.Join(dir, "mlp.onnx"), filepath.Join(dir, "mlp.esm"), filepath.Join(dir, "mlp-int8.esa")
	pytorchMLP(t, src, 5, "Relu")
	if _, _, err := run(t, "model", "import", src, "--out", esm); err == nil || !strings.Contains(err.Error(), "--schema-id "+policy.SchemaID) {
		t.Fatalf("import without a schema: %v", err)
	}
	out, _, err := run(t, "model", "import", src, "--schema-id", policy.SchemaID, "--out", esm)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprintf("model %d -> 16 -> 16 -> 1", policy.NumFeatures), "(pytorch 2.5.1)", "layers   MatMul+Add+Relu, MatMul+Add+Relu, MatMul+Add", "named by --schema-id", "critic   new, 32 -> 32 -> 1, seed 1", "normal.  none in the graph", "decision plain argmax"} {
		if !strings.Contains(out, want) {
			t.Errorf("import output lacks %q:\n%s", want, out)
		}
	}
	out, _, err = run(t, "model", "quantize", esm, "--calib-seeds", "9001", "--eval-seeds", "1", "--key", filepath.Join(keys, "coord.key"), "--out", esa)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"int8 model", "signed by", "fidelity on held-out seeds [1]"} {
		if !strings.Contains(out, want) {
			t.Errorf("quantize output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("quantize:\n%s", out)
	if out, _, err := run(t, "model", "verify", esa, "--model-keys", keys); err != nil {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	ms := simMeasures(t, []string{"learned:" + esa}, "--model-keys", keys)[0]
	t.Logf("the outside MLP, int8, on openb (seed 1): %v pods placed of %v, unallocated GPU share at 100%% %.4f", ms["pods_placed"], ms["pods_arrived"], ms["unallocated_gpu_share_at_100"])
	if ms["pods_placed"] < 1000 || ms["pods_placed"] > ms["pods_arrived"] {
		t.Errorf("the imported model placed %v of %v pods", ms["pods_placed"], ms["pods_arrived"])
	}
}

func TestModelImportRefuses(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "mlp.onnx")
	pytorchMLP(t, src, 5, "Relu")
	bad := filepath.Join(dir, "bad.onnx")
	if err := os.WriteFile(bad, []byte("not an onnx file"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{src}, "--out: required"},
		{[]string{src, "--out", filepath.Join(dir, "x.esm"), "--schema-id", "edgesched.features/v0"}, `schema "edgesched.features/v0", this build computes`},
		{[]string{src, "--out", filepath.Join(dir, "x.esm"), "--schema-id", policy.SchemaID, "--critic-hidden", "0"}, "critic hidden width 0"},
		{[]string{bad, "--out", filepath.Join(dir, "x.esm")}, "bad.onnx: onnx: bad file"},
		{[]string{filepath.Join(dir, "missing.onnx"), "--out", filepath.Join(dir, "x.esm")}, "no such file"},
	} {
		if _, _, err := run(t, append([]string{"model", "import"}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.esm")); err == nil {
		t.Error("a refused import wrote a model file")
	}
	// flag values wrong on their face are usage errors (exit 2) naming
	// the flag; an --out that is a directory is refused by name
	for _, tc := range []struct {
		args  []string
		want  string
		usage bool
	}{
		{[]string{src}, "--out: required", true},
		{[]string{src, "--out", filepath.Join(dir, "x.esm"), "--schema-id", "edgesched.features/v0"}, `--schema-id: onnx: unsupported model: schema "edgesched.features/v0"`, true},
		{[]string{src, "--out", filepath.Join(dir, "x.esm"), "--critic-hidden", "-5"}, "--critic-hidden: onnx import: critic hidden width -5", true},
		{[]string{src, "--out", dir}, "--out " + dir + ": is a directory, want a file path", false},
	} {
		_, _, err := run(t, append([]string{"model", "import"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || cli.IsUsage(err) != tc.usage {
			t.Errorf("%v: error %v (usage error %v), want %q (usage error %v)", tc.args, err, cli.IsUsage(err), tc.want, tc.usage)
		}
	}
}

// TestModelImportTanh: an outside MLP with Tanh hidden layers imports
// (the file records them), runs in the simulator's float path
// (learned:FILE.esm) where the activation matters (its ReLU twin, the same
// weights with ReLU, schedules differently), and is refused by quantize
// before any calibration run, and by sign, with a message saying why.
func TestModelImportTanh(t *testing.T) {
	dir := t.TempDir()
	keys := edgectltest.KeyDir(t, "coord")
	src, esm, twin := filepath.Join(dir, "tanh.onnx"), filepath.Join(dir, "tanh.esm"), filepath.Join(dir, "relu-twin.esm")
	pytorchMLP(t, src, 5, "Tanh")
	out, _, err := run(t, "model", "import", src, "--schema-id", policy.SchemaID, "--out", esm)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"layers   MatMul+Add+Tanh, MatMul+Add+Tanh, MatMul+Add", "note     tanh and tanh hidden layers: float path only"} {
		if !strings.Contains(out, want) {
			t.Errorf("import output lacks %q:\n%s", want, out)
		}
	}
	d, err := nn.ReadFile(esm)
	if err != nil {
		t.Fatal(err)
	}
	if d.Model.Net.Act != [2]nn.Activation{nn.Tanh, nn.Tanh} || strings.Join(d.Header.HiddenActivations, ",") != "tanh,tanh" {
		t.Fatalf("model file activations %v, header %v", d.Model.Net.Act, d.Header.HiddenActivations)
	}
	// export writes the Tanh layers; importing that file gives the model file back
	back, again := filepath.Join(dir, "back.onnx"), filepath.Join(dir, "again.esm")
	if out, _, err = run(t, "model", "export", esm, "--critic", "--out", back); err != nil || !strings.Contains(out, "(Gemm+Tanh, Gemm+Tanh, Gemm)") {
		t.Fatalf("export of the Tanh model: %v\n%s", err, out)
	}
	if _, _, err = run(t, "model", "import", back, "--out", again); err != nil {
		t.Fatal(err)
	}
	if a, b := readFile(t, esm), readFile(t, again); string(a) != string(b) {
		t.Error("export then import of the Tanh model does not give its model file back")
	}
	relu := d.Model
	relu.Net.Act = [2]nn.Activation{}
	if err := nn.WriteFile(twin, relu, "model", nil, nil); err != nil {
		t.Fatal(err)
	}
	ms := simMeasures(t, []string{"learned:" + esm, "learned:" + twin})
	tm, rm := ms[0], ms[1]
	t.Logf("openb seed 1, float path: tanh MLP placed %v of %v pods (unallocated GPU share at 100%% %.4f); its ReLU twin %v (%.4f)",
		tm["pods_placed"], tm["pods_arrived"], tm["unallocated_gpu_share_at_100"], rm["pods_placed"], rm["unallocated_gpu_share_at_100"])
	if tm["pods_placed"] < 1000 || tm["pods_placed"] > tm["pods_arrived"] {
		t.Errorf("the Tanh model placed %v of %v pods", tm["pods_placed"], tm["pods_arrived"])
	}
	if tm["pods_placed"] == rm["pods_placed"] && tm["unallocated_gpu_share_at_100"] == rm["unallocated_gpu_share_at_100"] {
		t.Error("the Tanh model and its ReLU twin schedule alike: the simulator ignores the activation")
	}
	esa := filepath.Join(dir, "tanh-int8.esa")
	_, errOut, err := run(t, "model", "quantize", esm, "--calib-seeds", "9001", "--eval-seeds", "1", "--key", filepath.Join(keys, "coord.key"), "--out", esa)
	want := "the network's hidden layers are tanh and tanh: the int8 path runs ReLU networks only"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), esm) {
		t.Fatalf("quantize of a Tanh model: %v, want an error naming %s and %q", err, esm, want)
	}
	t.Log(err)
	if strings.Contains(errOut, "calibration run") {
		t.Errorf("quantize ran calibration before refusing:\n%s", errOut)
	}
	if _, _, err := run(t, "model", "sign", esm, "--key", filepath.Join(keys, "coord.key"), "--out", esa); err == nil || !strings.Contains(err.Error(), "artifacts carry ReLU networks only") {
		t.Fatalf("sign of a Tanh model: %v", err)
	}
	if _, err := os.Stat(esa); err == nil {
		t.Error("a refused quantize or sign wrote an artifact")
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// simMeasures runs 'edgectl sim' (openb, seed 1) with the policies and
// returns each one's measures, in order.
func simMeasures(t *testing.T, policies []string, args ...string) []map[string]float64 {
	t.Helper()
	out, _, err := run(t, append([]string{"sim", "--policies", strings.Join(policies, ","), "--progress", "never", "-o", "json"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Runs []struct {
			Policy   string             `json:"policy"`
			Measures map[string]float64 `json:"measures"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("sim json: %v", err)
	}
	if len(rep.Runs) != len(policies) {
		t.Fatalf("sim runs: %+v", rep.Runs)
	}
	var ms []map[string]float64
	for i, r := range rep.Runs {
		if r.Policy != policies[i] {
			t.Fatalf("sim run %d is %s, want %s", i, r.Policy, policies[i])
		}
		ms = append(ms, r.Measures)
	}
	return ms
}
