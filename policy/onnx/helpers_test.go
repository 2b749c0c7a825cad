package onnx

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/onnx/onnxpb"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/openb"
)

// outsideMLP is a network made outside the project, as a data scientist's
// PyTorch module would hold it: nn.Linear weights out x in (float64 here,
// rounded to float32 in the file), with its own input normalisation and
// nn.ReLU or nn.Tanh after each hidden layer (act; zero: ReLU).
type outsideMLP struct {
	mean, std []float32
	w         [3][]float32 // layer l: out x in
	b         [3][]float32
	dims      [4]int // F, H1, H2, 1
	act       [2]nn.Activation
}

// newOutsideMLP draws a seeded F -> h1 -> h2 -> 1 network.
func newOutsideMLP(seed uint64, h1, h2 int) *outsideMLP {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	F := policy.NumFeatures
	o := &outsideMLP{dims: [4]int{F, h1, h2, 1}, mean: make([]float32, F), std: make([]float32, F)}
	for i := range F {
		o.mean[i] = float32(0.1 * rng.NormFloat64())
		o.std[i] = float32(0.5 + rng.Float64())
	}
	for l := range 3 {
		in, out := o.dims[l], o.dims[l+1]
		o.w[l] = make([]float32, out*in)
		o.b[l] = make([]float32, out)
		for i := range o.w[l] {
			o.w[l][i] = float32(rng.NormFloat64() * math.Sqrt(2/float64(in)))
		}
		for i := range o.b[l] {
			o.b[l][i] = float32(0.05 * rng.NormFloat64())
		}
	}
	return o
}

// score is the network's score of one raw row, computed in float64 from
// the test's own arrays: an independent reference for the importer.
func (o *outsideMLP) score(raw []float32) float64 {
	x := make([]float64, len(raw))
	for i, v := range raw {
		x[i] = (float64(v) - float64(o.mean[i])) / float64(o.std[i])
	}
	for l := range 3 {
		in, out := o.dims[l], o.dims[l+1]
		y := make([]float64, out)
		for j := range out {
			s := float64(o.b[l][j])
			for i := range in {
				s += float64(o.w[l][j*in+i]) * x[i]
			}
			switch {
			case l < 2 && o.act[l] == nn.Tanh:
				s = math.Tanh(s)
			case l < 2:
				s = max(s, 0)
			}
			y[j] = s
		}
		x = y
	}
	return x[0]
}

// layout is one of the ways PyTorch's exporter writes nn.Linear.
type layout int

const (
	gemmTransB     layout = iota // Gemm(x, W[out,in], b, transB=1): torch.onnx.export of 2-D input
	matMulAdd                    // MatMul(x, W^T[in,out]) + b: 3-D input, weights folded to in x out
	transposeNodes               // Transpose(W[out,in]) then MatMul + Add: export without constant folding
	gemmSqueeze                  // gemmTransB, then .squeeze(-1) of the N x 1 score (Squeeze with an axes input)
)

var allLayouts = []layout{gemmTransB, matMulAdd, transposeNodes, gemmSqueeze}

// model writes the network as an ONNX model in layout, with Relu or Tanh
// (o.act) after the hidden layers, the normalisation as Sub/Div when norm is set, and
// no edgesched metadata (the file of a model trained elsewhere).
func (o *outsideMLP) model(lay layout, norm bool) *onnxpb.ModelProto {
	g := &onnxpb.GraphProto{Name: proto.String("main_graph")}
	b := &graphBuilder{g: g}
	F := o.dims[0]
	b.input("input", "", dimParam("batch"), dimValue(int64(F)))
	x := "input"
	if norm {
		b.init("mean", []int64{1, int64(F)}, o.mean)
		b.init("std", []int64{int64(F)}, o.std)
		x = b.node("Sub", "/Sub", []string{x, "mean"}, "/Sub_output_0")
		x = b.node("Div", "/Div", []string{x, "std"}, "/Div_output_0")
	}
	for l := range 3 {
		in, out := o.dims[l], o.dims[l+1]
		wname, bname := "net."+string(rune('0'+2*l))+".weight", "net."+string(rune('0'+2*l))+".bias"
		y := "/net/Linear_" + string(rune('0'+l)) + "_output_0"
		if l == 2 && lay != gemmSqueeze {
			y = "output"
		}
		switch lay {
		case gemmTransB, gemmSqueeze:
			b.init(wname, []int64{int64(out), int64(in)}, o.w[l])
			b.init(bname, []int64{int64(out)}, o.b[l])
			x = b.node("Gemm", "/net/Gemm_"+y, []string{x, wname, bname}, y, floatAttr("alpha", 1), floatAttr("beta", 1), intAttr("transB", 1))
		case matMulAdd:
			b.init("onnx::MatMul_"+wname, []int64{int64(in), int64(out)}, transpose(o.w[l], out, in))
			b.init(bname, []int64{int64(out)}, o.b[l])
			m := b.node("MatMul", "/net/MatMul_"+y, []string{x, "onnx::MatMul_" + wname}, "/net/MatMul_"+y)
			x = b.node("Add", "/net/Add_"+y, []string{bname, m}, y) // torch puts the bias first
		case transposeNodes:
			b.init(wname, []int64{int64(out), int64(in)}, o.w[l])
			wt := b.node("Transpose", "/net/Transpose_"+y, []string{wname}, "/net/Transpose_"+y, ints("perm", 1, 0))
			c := b.node("Constant", "/net/Constant_"+y, nil, "/net/Constant_"+y, &onnxpb.AttributeProto{
				Name: proto.String("value"), Type: onnxpb.AttributeProto_TENSOR.Enum(),
				T: &onnxpb.TensorProto{Dims: []int64{int64(out)}, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), FloatData: o.b[l]},
			})
			m := b.node("MatMul", "/net/MatMul_"+y, []string{x, wt}, "/net/MatMul_"+y)
			x = b.node("Add", "/net/Add_"+y, []string{m, c}, y)
		}
		if l < 2 {
			op := ActivationOp(o.act[l])
			x = b.node(op, "/net/"+op+"_"+string(rune('0'+l)), []string{x}, "/net/"+op+"_"+string(rune('0'+l))+"_output_0")
		}
	}
	if lay == gemmSqueeze {
		g.Initializer = append(g.Initializer, &onnxpb.TensorProto{Name: proto.String("axes"), Dims: []int64{1},
			DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Int64Data: []int64{-1}})
		b.node("Squeeze", "/Squeeze", []string{x, "axes"}, "output")
		b.output("output", "", dimParam("batch"))
	} else {
		b.output("output", "", dimParam("batch"), dimValue(1))
	}
	return &onnxpb.ModelProto{
		IrVersion:       proto.Int64(8),
		OpsetImport:     []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		ProducerName:    proto.String("pytorch"),
		ProducerVersion: proto.String("2.5.1"),
		Graph:           g,
	}
}

// realRows returns n raw feature rows that the default model's float
// policy scored on openb (default pods, all nodes, inflate, seed 9001; a
// seeded reservoir sample), shared by the tests of one process.
var realRows = sync.OnceValues(func() ([]float32, error) {
	env, err := openb.LoadEnv("openb:"+openb.AllNodes, "openb:"+openb.Default)
	if err != nil {
		return nil, err
	}
	m, err := models.Default()
	if err != nil {
		return nil, err
	}
	rc := engine.DefaultRunConfig(engine.Inflate)
	rc.Seed = 9001
	rows, _, err := quant.CollectRows(context.Background(), env, m.Float(), []engine.RunConfig{rc}, numRealRows, 9001)
	return rows, err
})

const numRealRows = 10000

func mustRows(t testing.TB) []float32 {
	t.Helper()
	rows, err := realRows()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != numRealRows*policy.NumFeatures {
		t.Fatalf("%d real rows, want %d", len(rows)/policy.NumFeatures, numRealRows)
	}
	return rows
}

// goScores is the Go float path (nn.FloatScorer) on raw rows.
func goScores(t testing.TB, m *nn.Model, rows []float32) []float32 {
	t.Helper()
	sc, err := nn.NewFloatScorer(m)
	if err != nil {
		t.Fatal(err)
	}
	k := len(rows) / policy.NumFeatures
	out := make([]float32, k)
	if err := sc.Scores(rows, k, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func marshal(t testing.TB, mp *onnxpb.ModelProto) []byte {
	t.Helper()
	b, err := Marshal(mp)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reimport is mp marshalled, decoded and imported with the default
// options, as a reader of the file would.
func reimport(t testing.TB, mp *onnxpb.ModelProto) *Imported {
	t.Helper()
	back, err := Decode(marshal(t, mp))
	if err != nil {
		t.Fatal(err)
	}
	imp, err := Import(back, DefaultImportOptions())
	if err != nil {
		t.Fatal(err)
	}
	return imp
}

func floatsLE(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(f))
	}
	return out
}
