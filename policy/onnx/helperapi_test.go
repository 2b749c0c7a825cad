package onnx

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/int8net"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/openb"
)

// helperScript builds a seeded F -> 16 -> 16 -> 1 MLP with the ONNX
// project's own Python API (onnx.helper, onnx.numpy_helper) in one of
// the layouts torch.onnx.export writes for nn.Linear: "gemm" (Gemm,
// transB=1, weights out x in) or "matmul" (MatMul with the weights folded
// to in x out, then Add with the bias first), its own normalisation as
// Sub/Div, and act ("Relu" or "Tanh") after the hidden layers. It checks
// and saves the model, then scores the rows with the same weights in
// float64 numpy: a reference computed without Go and without onnxpb.
const helperScript = `import sys
import numpy as np
import onnx
import onnx.checker
from onnx import helper, numpy_helper, TensorProto

layout, act, F, seed, rows_path, model_path, ref_path = sys.argv[1:]
F, seed = int(F), int(seed)
rng = np.random.default_rng(seed)
dims = [F, 16, 16, 1]
mean = (0.1 * rng.standard_normal(F)).astype(np.float32)
std = (0.5 + rng.random(F)).astype(np.float32)
W = [(rng.standard_normal((dims[l + 1], dims[l])) * np.sqrt(2.0 / dims[l])).astype(np.float32) for l in range(3)]
B = [(0.05 * rng.standard_normal(dims[l + 1])).astype(np.float32) for l in range(3)]

inits = [numpy_helper.from_array(mean, "norm.mean"), numpy_helper.from_array(std, "norm.std")]
nodes = [helper.make_node("Sub", ["features", "norm.mean"], ["/Sub_output_0"], name="/Sub"),
         helper.make_node("Div", ["/Sub_output_0", "norm.std"], ["/Div_output_0"], name="/Div")]
x = "/Div_output_0"
for l in range(3):
    y = "score" if l == 2 else "/fc%d/Linear_output_0" % l
    bias = "fc%d.bias" % l
    inits.append(numpy_helper.from_array(B[l], bias))
    if layout == "gemm":
        w = "fc%d.weight" % l
        inits.append(numpy_helper.from_array(W[l], w))
        nodes.append(helper.make_node("Gemm", [x, w, bias], [y], name="/fc%d/Gemm" % l, alpha=1.0, beta=1.0, transB=1))
    else:
        w = "onnx::MatMul_%d" % (100 + l)
        inits.append(numpy_helper.from_array(np.ascontiguousarray(W[l].T), w))
        mm = "/fc%d/MatMul_output_0" % l
        nodes.append(helper.make_node("MatMul", [x, w], [mm], name="/fc%d/MatMul" % l))
        nodes.append(helper.make_node("Add", [bias, mm], [y], name="/fc%d/Add" % l))
    x = y
    if l < 2:
        a = "/act%d/%s_output_0" % (l, act)
        nodes.append(helper.make_node(act, [x], [a], name="/act%d/%s" % (l, act)))
        x = a
graph = helper.make_graph(nodes, "main_graph",
                          [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", F])],
                          [helper.make_tensor_value_info("score", TensorProto.FLOAT, ["batch", 1])],
                          initializer=inits)
model = helper.make_model(graph, producer_name="onnx.helper", producer_version=onnx.__version__,
                          opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model, full_check=True)
onnx.save(model, model_path)

h = np.fromfile(rows_path, dtype="<f4").reshape(-1, F).astype(np.float64)
h = (h - mean.astype(np.float64)) / std.astype(np.float64)
for l in range(3):
    h = h @ W[l].astype(np.float64).T + B[l].astype(np.float64)
    if l < 2:
        h = np.tanh(h) if act == "Tanh" else np.maximum(h, 0.0)
h[:, 0].astype("<f8").tofile(ref_path)
print("onnx %s helper: %s layout, %s, %d rows scored in float64" % (onnx.__version__, layout, act, h.shape[0]))
`

// TestImportHelperAPI: a model made outside the project with the ONNX
// project's own Python API (Debian's python3-onnx, the checker's install)
// in each layout PyTorch exports, ReLU and Tanh, imports (its schema named
// by the options) and scores 10,000 real rows as numpy does in float64
// with the same weights; the ReLU one in PyTorch's MatMul+Add layout then
// quantizes, is signed, verifies and schedules openb in the simulator as
// an int8 artifact.
func TestImportHelperAPI(t *testing.T) {
	c := needChecker(t)
	rows := mustRows(t)
	F := policy.NumFeatures
	for _, tc := range []struct {
		layout, act string
		want        string // the import's reading of the layers
		schedule    bool
	}{
		{"gemm", "Relu", "Gemm(transB=1)+Relu, Gemm(transB=1)+Relu, Gemm(transB=1)", false},
		{"matmul", "Relu", "MatMul+Add+Relu, MatMul+Add+Relu, MatMul+Add", true},
		{"gemm", "Tanh", "Gemm(transB=1)+Tanh, Gemm(transB=1)+Tanh, Gemm(transB=1)", false},
		{"matmul", "Tanh", "MatMul+Add+Tanh, MatMul+Add+Tanh, MatMul+Add", false},
	} {
		t.Run(tc.layout+"/"+tc.act, func(t *testing.T) {
			dir := t.TempDir()
			rowsPath, modelPath, refPath := filepath.Join(dir, "rows.bin"), filepath.Join(dir, "mlp.onnx"), filepath.Join(dir, "ref.bin")
			if err := os.WriteFile(rowsPath, floatsLE(rows), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out, err := runCmd(ctx, dir, c.env, c.python, "-c", helperScript, tc.layout, tc.act, fmt.Sprint(F), "11", rowsPath, modelPath, refPath)
			if err != nil {
				t.Fatalf("the ONNX helper script: %v", err)
			}
			t.Logf("%s", strings.TrimSpace(string(out)))
			mp, err := ReadFile(modelPath)
			if err != nil {
				t.Fatal(err)
			}
			imp := importOutside(t, mp)
			wantAct := nn.ReLU
			if tc.act == "Tanh" {
				wantAct = nn.Tanh
			}
			m := imp.Model
			if imp.Layout != tc.want || !imp.Normalized || imp.Metadata || !strings.HasPrefix(imp.Producer, "onnx.helper ") ||
				m.Net.H1 != 16 || m.Net.H2 != 16 || m.Net.Act != [2]nn.Activation{wantAct, wantAct} {
				t.Fatalf("import report %+v, layers %d/%d, activations %v", imp, m.Net.H1, m.Net.H2, m.Net.Act)
			}
			b, err := os.ReadFile(refPath)
			if err != nil {
				t.Fatal(err)
			}
			got := goScores(t, m, rows)
			if len(b) != 8*len(got) {
				t.Fatalf("%d reference bytes for %d rows", len(b), len(got))
			}
			var worst float64
			for i, g := range got {
				want := math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
				worst = max(worst, math.Abs(float64(g)-want)/max(1, math.Abs(want)))
			}
			t.Logf("%d rows: largest difference of the Go float path from numpy's float64 %.3g (relative above 1)", len(got), worst)
			if worst > scoreTol {
				t.Fatalf("imported scores differ from numpy's by %g, more than %g", worst, scoreTol)
			}
			if tc.schedule {
				scheduleInt8(t, m, rows)
			}
		})
	}
}

// scheduleInt8 quantizes m (calibrated on rows), signs the artifact with
// a seeded key, decodes it against that key alone and runs it on openb
// (default pods, all nodes, inflate, seed 1).
func scheduleInt8(t *testing.T, m *nn.Model, rows []float32) {
	t.Helper()
	a, err := quant.Quantize(m.Float(), rows, quant.DefaultCalibration(), quant.Info{Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	signer, pub, err := quant.GenerateKey(rand.NewChaCha8([32]byte{'o', 'n', 'n', 'x'}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := a.Encode(signer)
	if err != nil {
		t.Fatal(err)
	}
	var keys quant.Keyring
	if _, err := keys.Add(pub); err != nil {
		t.Fatal(err)
	}
	back, err := quant.Decode(b, quant.DecodeOptions{Keys: &keys})
	if err != nil {
		t.Fatalf("the signed artifact does not verify: %v", err)
	}
	q, err := int8net.New(back)
	if err != nil {
		t.Fatal(err)
	}
	env, err := openb.LoadEnv("openb:"+openb.AllNodes, "openb:"+openb.Default)
	if err != nil {
		t.Fatal(err)
	}
	rc := engine.DefaultRunConfig(engine.Inflate)
	rc.Seed = 1
	res, err := engine.Run(context.Background(), env, int8net.Factory("onnx-helper-int8", q), rc)
	if err != nil {
		t.Fatal(err)
	}
	placed, arrived := res.Measures["pods_placed"], res.Measures["pods_arrived"]
	t.Logf("int8, signed (%d bytes): %v of %v openb pods placed (seed 1), unallocated GPU share at 100%% %.4f",
		len(b), placed, arrived, res.Measures["unallocated_gpu_share_at_100"])
	if placed < 1000 || placed > arrived {
		t.Errorf("the imported model placed %v of %v pods", placed, arrived)
	}
}
