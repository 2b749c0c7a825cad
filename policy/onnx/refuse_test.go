package onnx

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/onnx/onnxpb"
)

// findNode returns the first node of op in g.
func findNode(g *onnxpb.GraphProto, op string) *onnxpb.NodeProto {
	for _, n := range g.Node {
		if n.GetOpType() == op {
			return n
		}
	}
	return nil
}

func findInit(g *onnxpb.GraphProto, name string) *onnxpb.TensorProto {
	for _, t := range g.Initializer {
		if t.GetName() == name {
			return t
		}
	}
	return nil
}

func setMeta(mp *onnxpb.ModelProto, k, v string) {
	for _, e := range mp.MetadataProps {
		if e.GetKey() == k {
			e.Value = proto.String(v)
			return
		}
	}
	mp.MetadataProps = append(mp.MetadataProps, kv(k, v))
}

// TestImportRefuses edits a good file (an export of the default model, or
// the outside MLP) one way each and checks that the import refuses it
// with ErrUnsupported and a message naming the operator, attribute or
// shape at fault.
func TestImportRefuses(t *testing.T) {
	m, err := models.Default()
	if err != nil {
		t.Fatal(err)
	}
	exported := func() *onnxpb.ModelProto {
		mp, err := Export(m, ExportOptions{Critic: true})
		if err != nil {
			t.Fatal(err)
		}
		return mp
	}
	outside := func() *onnxpb.ModelProto { return newOutsideMLP(3, 8, 8).model(gemmTransB, true) }
	F := policy.NumFeatures
	for _, c := range []struct {
		name string
		base func() *onnxpb.ModelProto
		edit func(mp *onnxpb.ModelProto)
		want string
	}{
		{"two lower bounds", exported, func(mp *onnxpb.ModelProto) { findNode(mp.Graph, "Min").OpType = proto.String("Max") },
			`Max (node "/norm/Min"): a second Max: only one lower and one upper bound per input are supported`},
		{"bounds of the wrong width", exported, func(mp *onnxpb.ModelProto) {
			lo := findInit(mp.Graph, "norm.lo")
			lo.Dims, lo.RawData = []int64{int64(F - 1)}, lo.RawData[:4*(F-1)]
		}, `operand "norm.lo" of shape [` + fmt.Sprint(F-1) + `]`},
		{"sigmoid", outside, func(mp *onnxpb.ModelProto) { findNode(mp.Graph, "Relu").OpType = proto.String("Sigmoid") },
			`Sigmoid (node "/net/Relu_0"): activation Sigmoid is not supported: the importer reads Relu and Tanh`},
		{"tanh critic", exported, func(mp *onnxpb.ModelProto) {
			for _, n := range mp.Graph.Node {
				if n.GetName() == "/critic/critic.1/Relu" {
					n.OpType = proto.String("Tanh")
				}
			}
		}, "the critic's layer 1 (Gemm(transB=1)+Tanh): want relu"},
		{"convolution", outside, func(mp *onnxpb.ModelProto) { findNode(mp.Graph, "Gemm").OpType = proto.String("Conv") }, "Conv (node \"/net/Gemm_/net/Linear_0_output_0\"): unsupported operator"},
		{"custom domain", outside, func(mp *onnxpb.ModelProto) { findNode(mp.Graph, "Gemm").Domain = proto.String("com.microsoft") }, `domain "com.microsoft"`},
		{"gemm alpha", outside, func(mp *onnxpb.ModelProto) {
			findNode(mp.Graph, "Gemm").Attribute[0].F = proto.Float32(2)
		}, "alpha = 2"},
		{"gemm transA", outside, func(mp *onnxpb.ModelProto) {
			n := findNode(mp.Graph, "Gemm")
			n.Attribute = append(n.Attribute, intAttr("transA", 1))
		}, "transA = 1"},
		{"unknown attribute", outside, func(mp *onnxpb.ModelProto) {
			n := findNode(mp.Graph, "Relu")
			n.Attribute = append(n.Attribute, floatAttr("alpha", 0.1))
		}, `Relu (node "/net/Relu_0"): attribute "alpha" is not supported`},
		{"input width", outside, func(mp *onnxpb.ModelProto) {
			mp.Graph.Input[0].Type.GetTensorType().Shape.Dim[1] = dimValue(int64(F - 1))
		}, fmt.Sprintf("is %d features wide, the feature schema", F-1)},
		{"input of unknown width", outside, func(mp *onnxpb.ModelProto) {
			mp.Graph.Input[0].Type.GetTensorType().Shape.Dim[1] = dimParam("width")
		}, "no fixed width"},
		{"double input", outside, func(mp *onnxpb.ModelProto) {
			mp.Graph.Input[0].Type.GetTensorType().ElemType = proto.Int32(int32(onnxpb.TensorProto_DOUBLE))
		}, "is DOUBLE, want FLOAT"},
		{"double weights", outside, func(mp *onnxpb.ModelProto) {
			findInit(mp.Graph, "net.0.weight").DataType = proto.Int32(int32(onnxpb.TensorProto_DOUBLE))
		}, `tensor "net.0.weight" of type DOUBLE`},
		{"external data", outside, func(mp *onnxpb.ModelProto) {
			findInit(mp.Graph, "net.0.weight").DataLocation = onnxpb.TensorProto_EXTERNAL.Enum()
		}, `"net.0.weight": external data`},
		{"weights of the wrong width", outside, func(mp *onnxpb.ModelProto) {
			w := findInit(mp.Graph, "net.2.weight")
			w.Dims = []int64{4, 16}
		}, "net.2.weight"},
		{"short raw data", outside, func(mp *onnxpb.ModelProto) {
			w := findInit(mp.Graph, "net.0.weight")
			w.RawData = w.RawData[:len(w.RawData)-4]
		}, "bytes of raw_data"},
		{"huge dims", outside, func(mp *onnxpb.ModelProto) {
			findInit(mp.Graph, "net.0.weight").Dims = []int64{1 << 40, 1 << 40}
		}, "more than 16777216 elements"},
		{"three hidden layers", func() *onnxpb.ModelProto {
			mp := outside()
			// one more Linear+ReLU before the output layer
			g := mp.Graph
			last := g.Node[len(g.Node)-1]
			b := &graphBuilder{g: g}
			b.init("extra.weight", []int64{8, 8}, make([]float32, 64))
			g.Node = g.Node[:len(g.Node)-1]
			h := b.node("Gemm", "/extra/Gemm", []string{last.Input[0], "extra.weight"}, "/extra/out", intAttr("transB", 1))
			h = b.activation("/extra/", nn.ReLU, h)
			last.Input[0] = h
			g.Node = append(g.Node, last)
			return mp
		}, func(*onnxpb.ModelProto) {}, fmt.Sprintf("the scorer has 4 linear layers (%d -> 8 -> 8 -> 8 -> 1)", F)},
		{"linear output activation", func() *onnxpb.ModelProto {
			mp := outside()
			g := mp.Graph
			last := g.Node[len(g.Node)-1]
			last.Output[0] = "pre"
			(&graphBuilder{g: g}).node("Tanh", "/out/Tanh", []string{"pre"}, "output")
			return mp
		}, func(*onnxpb.ModelProto) {}, "has an activation; the score must be linear"},
		{"two linear layers in a row", outside, func(mp *onnxpb.ModelProto) {
			g := mp.Graph
			n := findNode(g, "Relu")
			n.OpType = proto.String("Identity")
		}, "two linear layers without an activation between them"},
		{"no schema", outside, func(*onnxpb.ModelProto) {}, "names no feature schema"},
		{"other schema", exported, func(mp *onnxpb.ModelProto) { setMeta(mp, MetaSchemaID, "edgesched.features/v0") },
			`the file's feature schema is "edgesched.features/v0"`},
		{"renamed feature", exported, func(mp *onnxpb.ModelProto) {
			names := policy.NewSchema().Names
			names[3] += "_renamed"
			setMeta(mp, MetaFeatureNames, `["`+strings.Join(names, `","`)+`"]`)
		}, fmt.Sprintf("feature 3 is %s_renamed in the file, %s in schema", policy.NewSchema().Names[3], policy.NewSchema().Names[3])},
		{"edited statistics", exported, func(mp *onnxpb.ModelProto) {
			findInit(mp.Graph, "norm.std").RawData[0] ^= 1
		}, "does not match the schema hash"},
		{"bad decision rule", exported, func(mp *onnxpb.ModelProto) { setMeta(mp, MetaDecision, `{"band":-1}`) }, "band -1 is outside"},
		{"unknown edgesched metadata", exported, func(mp *onnxpb.ModelProto) { setMeta(mp, "edgesched.temperature", "2") }, `metadata edgesched.temperature: unknown key`},
		{"critic of another layer", exported, func(mp *onnxpb.ModelProto) {
			findNode(mp.Graph, "ReduceMean").Input[0] = "/scorer/scorer.1/Relu_output_0"
		}, "Concat"},
		{"pooling over features", exported, func(mp *onnxpb.ModelProto) {
			findNode(mp.Graph, "ReduceMax").Attribute[0].Ints = []int64{1}
		}, "over axes [1]"},
		{"two inputs", outside, func(mp *onnxpb.ModelProto) {
			mp.Graph.Input = append(mp.Graph.Input, valueInfo("mask", "", nil))
		}, `inputs "input" and "mask"`},
		{"output from nowhere", outside, func(mp *onnxpb.ModelProto) { mp.Graph.Output[0].Name = proto.String("nothing") }, `output "nothing" is not computed`},
		{"node out of order", outside, func(mp *onnxpb.ModelProto) {
			g := mp.Graph
			g.Node[2], g.Node[3] = g.Node[3], g.Node[2]
		}, "which nothing before it defines"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mp := c.base()
			c.edit(mp)
			// through the bytes, as a file would come
			back, err := Decode(marshal(t, mp))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Import(back, DefaultImportOptions())
			if err == nil {
				t.Fatal("imported")
			}
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want ErrUnsupported naming %q", err, c.want)
			}
			t.Log(err)
		})
	}
}

// TestDecodeRefuses checks the reader's caps and strictness on files that
// are not readable ONNX models.
func TestDecodeRefuses(t *testing.T) {
	m, err := models.Default()
	if err != nil {
		t.Fatal(err)
	}
	mp, err := Export(m, ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	good := marshal(t, mp)
	versioned := func(ir, opset int64) []byte {
		c := proto.Clone(mp).(*onnxpb.ModelProto)
		c.IrVersion = proto.Int64(ir)
		c.OpsetImport[0].Version = proto.Int64(opset)
		return marshal(t, c)
	}
	// MaxMessages+1 empty nodes: 2 bytes each on the wire (~33 kB).
	manyNodes := protowire.AppendTag(nil, 1, protowire.VarintType)
	manyNodes = protowire.AppendVarint(manyNodes, 8)
	var graph []byte
	for range MaxMessages + 1 {
		graph = protowire.AppendTag(graph, 1, protowire.BytesType)
		graph = protowire.AppendBytes(graph, nil)
	}
	manyNodes = protowire.AppendTag(manyNodes, 7, protowire.BytesType)
	manyNodes = protowire.AppendBytes(manyNodes, graph)
	// MaxDepth cannot be reached: onnxpb declares no recursive message, and
	// the one way the format nests graphs, AttributeProto.g, is refused by
	// name (TestUnmodeled).
	unknownField := protowire.AppendTag(append([]byte{}, good...), 99, protowire.VarintType)
	unknownField = protowire.AppendVarint(unknownField, 1)
	wrongWire := protowire.AppendTag(nil, 1, protowire.BytesType) // ir_version as bytes
	wrongWire = protowire.AppendBytes(wrongWire, []byte{1})
	wrongWireSkipped := protowire.AppendTag(append([]byte{}, good...), 4, protowire.VarintType) // domain, a skipped string, as a number
	wrongWireSkipped = protowire.AppendVarint(wrongWireSkipped, 1)
	overlong := protowire.AppendTag(nil, 7, protowire.BytesType)
	overlong = protowire.AppendVarint(overlong, 1<<40) // a length far past the end
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "empty file"},
		{"too big", make([]byte, MaxFileBytes+1), "exceeds"},
		{"not protobuf", []byte("ESM1 this is an edgesched model"), "ModelProto"},
		{"length past the end", overlong, "malformed value"},
		{"unknown field", unknownField, "ModelProto has no field 99"},
		{"wrong wire type", wrongWire, "ModelProto.ir_version: wire type 2, want 0"},
		{"too many messages", manyNodes, "more than 16384 protobuf messages"},
		{"wrong wire type of a skipped field", wrongWireSkipped, "ModelProto.domain: wire type 0, want 2"},
		{"IR version too new", versioned(99, 17), "IR version 99"},
		{"IR version too old", versioned(2, 17), "IR version 2"},
		{"opset too new", versioned(8, 99), "opset 99"},
		{"opset too old", versioned(8, 6), "opset 6"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(c.b)
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrFormat naming %q", err, c.want)
			}
		})
	}
	if _, err := Decode(good); err != nil {
		t.Fatalf("the good file: %v", err)
	}
}
