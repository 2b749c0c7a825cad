package onnx

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/edgesched/edgesched/internal/atomicfile"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/onnx/onnxpb"
)

// The exported graph's contract (docs/quant.md "To PyTorch and back").
const (
	// IRVersion is the ONNX IR version of exported files: 8, what ONNX
	// 1.10 to 1.12 write, so every current runtime and checker reads it.
	IRVersion = 8
	// Opset is the default-domain operator set of exported files.
	Opset = 17
	// InputName is the graph input: raw feature rows, N x F float32.
	InputName = "features"
	// ScoreName is the scorer's output: one score per row, N x 1.
	ScoreName = "score"
	// ValueName is the critic's output (ExportOptions.Critic): 1 x 1.
	ValueName = "value"
	// Producer is the producer_name of exported files.
	Producer = "edgesched"
)

// Metadata keys of exported files (model metadata_props). A file without
// MetaSchemaID is imported only when the operator names the schema
// (ImportOptions.SchemaID).
const (
	MetaSchemaID     = "edgesched.schema_id"
	MetaSchemaHash   = "edgesched.schema_hash"
	MetaFeatureNames = "edgesched.feature_names" // JSON array of strings
	MetaDecision     = "edgesched.decision"      // JSON, policy.Decision
	MetaMeta         = "edgesched.meta"          // JSON object, the model's provenance
	MetaCreated      = "edgesched.created"       // RFC 3339 with nanoseconds
	// MetaSage holds the model's GraphSAGE weights (policy.EncodeSage's
	// JSON) when it carries them: the graph does not compute them (the
	// site leader runs them), but its dep_affinity reads their partners.
	MetaSage = "edgesched.sage"
)

// ExportOptions choose what Export writes. The zero value writes the
// scorer alone with producer version "dev".
type ExportOptions struct {
	// Critic adds the critic (mean and max pooling of the scorer's last
	// hidden layer over the rows, then its MLP) as output ValueName.
	Critic bool
	// ProducerVersion is recorded as producer_version ("dev" when empty).
	ProducerVersion string
}

// Export builds the ONNX model of m: the float policy as a standard graph
// in the layout PyTorch's exporter gives nn.Sequential(Linear, ReLU,
// Linear, ReLU, Linear) (Gemm with transB=1 and weights stored out x in,
// named like its state_dict: scorer.0.weight, ...; Tanh in place of a Relu
// where the network's hidden layer has it), preceded by the model's input
// bounds when it has them (Max norm.lo, Min norm.hi) and the
// schema's normalisation (Sub norm.mean, Div norm.std), so the graph takes
// the raw feature rows the extractor computes. The schema and the
// decision rule are in the metadata (Meta* keys).
func Export(m *nn.Model, opt ExportOptions) (*onnxpb.ModelProto, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("onnx export: %w", err)
	}
	n := m.Net
	b := &graphBuilder{g: &onnxpb.GraphProto{Name: proto.String("edgesched_policy")}}
	F := n.F
	b.input(InputName, featureDoc(m.Schema), dimParam("N"), dimValue(int64(F)))
	raw := InputName
	if m.Schema.Lo != nil { // the model's input bounds
		b.init("norm.lo", []int64{int64(F)}, m.Schema.Lo)
		b.init("norm.hi", []int64{int64(F)}, m.Schema.Hi)
		b.node("Max", "/norm/Max", []string{raw, "norm.lo"}, "/norm/Max_output_0")
		raw = b.node("Min", "/norm/Min", []string{"/norm/Max_output_0", "norm.hi"}, "/norm/Min_output_0")
	}
	b.init("norm.mean", []int64{int64(F)}, m.Schema.Mean)
	b.init("norm.std", []int64{int64(F)}, m.Schema.Std)
	b.node("Sub", "/norm/Sub", []string{raw, "norm.mean"}, "/norm/Sub_output_0")
	b.node("Div", "/norm/Div", []string{"/norm/Sub_output_0", "norm.std"}, "x")
	ps := params(n)
	h := b.linear("scorer.0", "x", ps["w1"], ps["b1"], n.F, n.H1)
	h = b.activation("/scorer/scorer.1/", n.Act[0], h)
	h = b.linear("scorer.2", h, ps["w2"], ps["b2"], n.H1, n.H2)
	a2 := b.activation("/scorer/scorer.3/", n.Act[1], h)
	b.linearTo("scorer.4", a2, ps["w3"], ps["b3"], n.H2, 1, ScoreName)
	b.output(ScoreName, "one score per row: the higher, the better the node for the pod", dimParam("N"), dimValue(1))
	if opt.Critic {
		mean := b.node("ReduceMean", "/critic/ReduceMean", []string{a2}, "/critic/ReduceMean_output_0", ints("axes", 0), intAttr("keepdims", 1))
		mx := b.node("ReduceMax", "/critic/ReduceMax", []string{a2}, "/critic/ReduceMax_output_0", ints("axes", 0), intAttr("keepdims", 1))
		pool := b.node("Concat", "/critic/Concat", []string{mean, mx}, "/critic/Concat_output_0", intAttr("axis", 1))
		c := b.linear("critic.0", pool, ps["wc1"], ps["bc1"], 2*n.H2, n.HC)
		c = b.activation("/critic/critic.1/", nn.ReLU, c)
		b.linearTo("critic.2", c, ps["wc2"], ps["bc2"], n.HC, 1, ValueName)
		b.output(ValueName, "the critic's value of the candidate set", dimValue(1), dimValue(1))
	}
	names, err := json.Marshal(m.Schema.Names)
	if err != nil {
		return nil, fmt.Errorf("onnx export: feature names: %w", err)
	}
	dec, err := json.Marshal(m.Decision)
	if err != nil {
		return nil, fmt.Errorf("onnx export: decision rule: %w", err)
	}
	meta := []*onnxpb.StringStringEntryProto{
		kv(MetaSchemaID, m.Schema.ID),
		kv(MetaSchemaHash, m.Schema.Hash()),
		kv(MetaFeatureNames, string(names)),
		kv(MetaDecision, string(dec)),
	}
	if len(m.Meta) > 0 {
		mb, err := json.Marshal(m.Meta)
		if err != nil {
			return nil, fmt.Errorf("onnx export: meta: %w", err)
		}
		meta = append(meta, kv(MetaMeta, string(mb)))
	}
	meta = append(meta, kv(MetaCreated, m.Created.Format(time.RFC3339Nano)))
	if w := m.Sage; w != nil {
		sb, err := policy.EncodeSage(w)
		if err != nil {
			return nil, fmt.Errorf("onnx export: GraphSAGE weights: %w", err)
		}
		meta = append(meta, kv(MetaSage, string(sb)))
	}
	pv := opt.ProducerVersion
	if pv == "" {
		pv = "dev"
	}
	return &onnxpb.ModelProto{
		IrVersion:       proto.Int64(IRVersion),
		OpsetImport:     []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(Opset)}},
		ProducerName:    proto.String(Producer),
		ProducerVersion: proto.String(pv),
		DocString:       proto.String("edgesched scheduling policy: scores (pod, node) feature rows; docs/quant.md \"To PyTorch and back\""),
		Graph:           b.g,
		MetadataProps:   meta,
	}, nil
}

// Marshal encodes an ONNX model deterministically.
func Marshal(mp *onnxpb.ModelProto) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(mp)
	if err != nil {
		return nil, fmt.Errorf("onnx: encode: %w", err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrFormat, len(b), MaxFileBytes)
	}
	return b, nil
}

// WriteFile exports m to path atomically (temporary file + rename).
func WriteFile(path string, m *nn.Model, opt ExportOptions) error {
	mp, err := Export(m, opt)
	if err != nil {
		return err
	}
	b, err := Marshal(mp)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, b, 0o644); err != nil {
		return fmt.Errorf("write onnx: %w", err)
	}
	return nil
}

func featureDoc(s policy.Schema) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "raw feature rows of schema %s, one row per candidate node, columns: %s", s.ID, strings.Join(s.Names, ", "))
	return sb.String()
}

// params returns the network's parameters by name.
func params(n *nn.Net) map[string]nn.Param {
	out := map[string]nn.Param{}
	for _, p := range n.Params() {
		out[p.Name] = p
	}
	return out
}

type graphBuilder struct{ g *onnxpb.GraphProto }

func (b *graphBuilder) init(name string, dims []int64, data []float32) {
	b.g.Initializer = append(b.g.Initializer, &onnxpb.TensorProto{
		Name: proto.String(name), Dims: dims,
		DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)),
		RawData:  rawFloats(data),
	})
}

func (b *graphBuilder) node(op, name string, in []string, out string, attrs ...*onnxpb.AttributeProto) string {
	b.g.Node = append(b.g.Node, &onnxpb.NodeProto{
		OpType: proto.String(op), Name: proto.String(name), Input: in, Output: []string{out}, Attribute: attrs,
	})
	return out
}

// linear is PyTorch's nn.Linear as its exporter writes it: Gemm(x, W, b)
// with transB=1 and W stored out x in (the transpose of Net's in x out).
func (b *graphBuilder) linear(prefix, x string, w, bias nn.Param, in, out int) string {
	return b.linearTo(prefix, x, w, bias, in, out, "/"+strings.ReplaceAll(prefix, ".", "/")+"/Gemm_output_0")
}

func (b *graphBuilder) linearTo(prefix, x string, w, bias nn.Param, in, out int, y string) string {
	b.init(prefix+".weight", []int64{int64(out), int64(in)}, transpose(w.Values(), in, out))
	b.init(prefix+".bias", []int64{int64(out)}, bias.Values())
	return b.node("Gemm", "/"+strings.ReplaceAll(prefix, ".", "/")+"/Gemm", []string{x, prefix + ".weight", prefix + ".bias"}, y,
		floatAttr("alpha", 1), floatAttr("beta", 1), intAttr("transB", 1))
}

// activation is a hidden layer's nonlinearity, node prefix+Relu or
// prefix+Tanh.
func (b *graphBuilder) activation(prefix string, a nn.Activation, x string) string {
	op := ActivationOp(a)
	return b.node(op, prefix+op, []string{x}, prefix+op+"_output_0")
}

// ActivationOp is the ONNX operator of a hidden layer's activation.
func ActivationOp(a nn.Activation) string {
	if a == nn.Tanh {
		return "Tanh"
	}
	return "Relu"
}

func (b *graphBuilder) input(name, doc string, dims ...*onnxpb.TensorShapeProto_Dimension) {
	b.g.Input = append(b.g.Input, valueInfo(name, doc, dims))
}

func (b *graphBuilder) output(name, doc string, dims ...*onnxpb.TensorShapeProto_Dimension) {
	b.g.Output = append(b.g.Output, valueInfo(name, doc, dims))
}

func valueInfo(name, doc string, dims []*onnxpb.TensorShapeProto_Dimension) *onnxpb.ValueInfoProto {
	return &onnxpb.ValueInfoProto{
		Name: proto.String(name), DocString: proto.String(doc),
		Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)),
			Shape:    &onnxpb.TensorShapeProto{Dim: dims},
		}}},
	}
}

func dimParam(p string) *onnxpb.TensorShapeProto_Dimension {
	return &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: p}}
}

func dimValue(v int64) *onnxpb.TensorShapeProto_Dimension {
	return &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: v}}
}

func intAttr(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

func floatAttr(name string, v float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(v)}
}

func ints(name string, v ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
}

func kv(k, v string) *onnxpb.StringStringEntryProto {
	return &onnxpb.StringStringEntryProto{Key: proto.String(k), Value: proto.String(v)}
}

// transpose returns the cols x rows transpose of a rows x cols matrix.
func transpose(a []float32, rows, cols int) []float32 {
	t := make([]float32, len(a))
	for i := range rows {
		for j := range cols {
			t[j*rows+i] = a[i*cols+j]
		}
	}
	return t
}

// rawFloats is ONNX's raw_data of float32 values: little endian.
func rawFloats(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, f := range v {
		u := math.Float32bits(f)
		out[4*i], out[4*i+1], out[4*i+2], out[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return out
}
