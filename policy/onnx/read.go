package onnx

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/edgesched/edgesched/internal/boundedio"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/onnx/onnxpb"
)

// Caps of the reader. Every length in a file is checked against them
// before anything is allocated for it.
const (
	// MaxFileBytes is the largest ONNX file read: the policy's own cap.
	MaxFileBytes = nn.MaxModelBytes
	// MaxMessages bounds the protobuf messages in a file (nodes,
	// tensors, attributes, dimensions, ... together). A message costs
	// far more memory decoded than its two bytes on the wire; this cap
	// bounds that amplification.
	MaxMessages = 1 << 14
	// MaxDepth bounds message nesting (ModelProto is depth 1; the deepest
	// message onnxpb declares, a dimension of a value's shape, is at depth
	// 7). onnxpb declares no recursive message (subgraphs are refused),
	// so a file cannot reach this cap today; it guards the schema's growth.
	MaxDepth = 16
	// MaxElements bounds one tensor's element count: the largest weight
	// matrix a policy layer may have (4096 x 4096).
	MaxElements = 4096 * 4096
)

// ErrFormat is wrapped by every refusal of a file that is not a readable
// ONNX model (size, wire format, caps, versions). ErrUnsupported is
// wrapped by every refusal of a well-formed model outside the supported
// family (fields of the format the reader does not take, operators,
// shapes, types, schema).
var (
	ErrFormat      = errors.New("onnx: bad file")
	ErrUnsupported = errors.New("onnx: unsupported model")
)

// Versions the reader takes.
const (
	MinIRVersion = 3  // the first IR with opset_import
	MaxIRVersion = 13 // the newest IR whose fields unmodeled accounts for (ONNX 1.22)
	MinOpset     = 7  // numpy broadcasting in Add, Sub, Div, Gemm
	MaxOpset     = 23 // the newest default-domain opset whose operators used here this reader was checked against
)

// Decode parses an ONNX file strictly: at most MaxFileBytes, a wire
// format pre-scan before protobuf decoding allocates anything
// (well-formed tags and lengths; every field declared by onnxpb, or one
// of the format's fields that unmodeled lists as skipped; at most
// MaxMessages messages nested at most MaxDepth deep), then the versions
// (IR version and default-domain opset within the supported ranges). A
// field of the format that unmodeled lists as refused is refused with
// ErrUnsupported naming it; a field number the format does not define,
// with ErrFormat.
func Decode(b []byte) (*onnxpb.ModelProto, error) {
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrFormat, len(b), MaxFileBytes)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty file", ErrFormat)
	}
	msgs := 0
	if err := scan(b, (&onnxpb.ModelProto{}).ProtoReflect().Descriptor(), 1, &msgs); err != nil {
		return nil, err
	}
	mp := &onnxpb.ModelProto{}
	// DiscardUnknown drops the skipped fields (scan has refused any other).
	if err := (proto.UnmarshalOptions{RecursionLimit: MaxDepth + 1, DiscardUnknown: true}).Unmarshal(b, mp); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if v := mp.GetIrVersion(); v < MinIRVersion || v > MaxIRVersion {
		return nil, fmt.Errorf("%w: IR version %d, this reader takes %d to %d", ErrFormat, v, MinIRVersion, MaxIRVersion)
	}
	if _, err := defaultOpset(mp); err != nil {
		return nil, err
	}
	if mp.Graph == nil {
		return nil, fmt.Errorf("%w: no graph", ErrFormat)
	}
	return mp, nil
}

// ReadFile reads and decodes an ONNX file (Decode): a regular file of at
// most MaxFileBytes (internal/boundedio: a FIFO, device or directory is
// refused without being opened, a larger file from its size).
func ReadFile(path string) (*onnxpb.ModelProto, error) {
	return ReadFileContext(context.Background(), path)
}

// ReadFileContext is ReadFile honouring ctx while it reads.
func ReadFileContext(ctx context.Context, path string) (*onnxpb.ModelProto, error) {
	b, err := boundedio.ReadFile(ctx, path, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("read onnx: %w", err)
	}
	mp, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return mp, nil
}

// defaultOpset returns the default domain's opset version and refuses
// duplicate or out-of-range imports.
func defaultOpset(mp *onnxpb.ModelProto) (int64, error) {
	var v int64
	seen := map[string]bool{}
	for _, o := range mp.OpsetImport {
		d := o.GetDomain()
		if d == "ai.onnx" {
			d = ""
		}
		if seen[d] {
			return 0, fmt.Errorf("%w: opset of domain %q imported twice", ErrFormat, d)
		}
		seen[d] = true
		if d == "" {
			v = o.GetVersion()
		}
	}
	if v < MinOpset || v > MaxOpset {
		return 0, fmt.Errorf("%w: default-domain opset %d, this reader takes %d to %d", ErrFormat, v, MinOpset, MaxOpset)
	}
	return v, nil
}

// scan walks the wire format of a message of type md without decoding
// it: every tag and length must be well formed and every field declared
// by onnxpb with its declared wire type, or skipped by unmodeled; nested
// messages are counted against MaxMessages and MaxDepth. It allocates
// nothing.
func scan(b []byte, md protoreflect.MessageDescriptor, depth int, msgs *int) error {
	if depth > MaxDepth {
		return fmt.Errorf("%w: messages nested deeper than %d", ErrFormat, MaxDepth)
	}
	if *msgs++; *msgs > MaxMessages {
		return fmt.Errorf("%w: more than %d protobuf messages", ErrFormat, MaxMessages)
	}
	fields := md.Fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %s: malformed tag: %v", ErrFormat, md.Name(), protowire.ParseError(n))
		}
		b = b[n:]
		fd := fields.ByNumber(num)
		if fd == nil {
			n, err := skip(b, md, num, typ)
			if err != nil {
				return err
			}
			b = b[n:]
			continue
		}
		if want := wireType(fd.Kind()); typ != want && !(fd.IsList() && typ == protowire.BytesType && want != protowire.BytesType) {
			return fmt.Errorf("%w: %s.%s: wire type %d, want %d", ErrFormat, md.Name(), fd.Name(), typ, want)
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return fmt.Errorf("%w: %s.%s: malformed value: %v", ErrFormat, md.Name(), fd.Name(), protowire.ParseError(n))
		}
		if fd.Kind() == protoreflect.MessageKind {
			v, _ := protowire.ConsumeBytes(b[:n])
			if err := scan(v, fd.Message(), depth+1, msgs); err != nil {
				return err
			}
		}
		b = b[n:]
	}
	return nil
}

// wireType is the wire type of one (unpacked) value of kind k.
func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Int64Kind,
		protoreflect.Sint32Kind, protoreflect.Sint64Kind, protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		return protowire.VarintType
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.BytesType // string, bytes, message
}

// skip handles field num of a message md that onnxpb does not declare:
// the length of its value when unmodeled skips it, else the refusal.
func skip(b []byte, md protoreflect.MessageDescriptor, num protowire.Number, typ protowire.Type) (int, error) {
	f, ok := unmodeled[md.FullName()][num]
	switch {
	case !ok:
		return 0, fmt.Errorf("%w: %s has no field %d (not an ONNX model, or one newer than this reader)", ErrFormat, md.Name(), num)
	case f.refused != "":
		return 0, fmt.Errorf("%w: %s.%s (field %d): %s", ErrUnsupported, md.Name(), f.name, num, f.refused)
	case typ != f.wire:
		return 0, fmt.Errorf("%w: %s.%s: wire type %d, want %d", ErrFormat, md.Name(), f.name, typ, f.wire)
	}
	n := protowire.ConsumeFieldValue(num, typ, b)
	if n < 0 {
		return 0, fmt.Errorf("%w: %s.%s: malformed value: %v", ErrFormat, md.Name(), f.name, protowire.ParseError(n))
	}
	return n, nil
}

// unmodeledField is a field of the ONNX format that onnxpb does not
// declare: skipped when refused is empty (its value is checked for well
// formed wire data of its wire type, then dropped), else refused with that
// reason.
type unmodeledField struct {
	name    string
	wire    protowire.Type
	refused string
}

const pb = "edgesched.onnx." // onnxpb.proto's package

// unmodeled lists, for each message onnxpb declares, every field the ONNX
// format defines there (through IR version MaxIRVersion, ONNX 1.22) that
// onnxpb leaves out. Skipped: documentation and annotations that do not
// change what the graph computes (doc strings, metadata of graphs, nodes,
// values and tensors, the shapes of intermediate values, denotations, a
// model's domain and version). Refused, by name: everything that would
// change the computation or put it outside the policy's MLP family.
// TestUnmodeled checks the table against onnxpb's descriptors.
var unmodeled = map[protoreflect.FullName]map[protowire.Number]unmodeledField{
	pb + "ModelProto": {
		4:  {"domain", protowire.BytesType, ""},
		5:  {"model_version", protowire.VarintType, ""},
		20: {"training_info", protowire.BytesType, "training information (a training graph): import the inference graph"},
		25: {"functions", protowire.BytesType, "model-local functions: export with the functions inlined"},
		26: {"configuration", protowire.BytesType, "multi-device configurations"},
	},
	pb + "GraphProto": {
		10: {"doc_string", protowire.BytesType, ""},
		13: {"value_info", protowire.BytesType, ""}, // types of intermediate values: the importer infers its own
		14: {"quantization_annotation", protowire.BytesType, "quantization annotations (a quantized graph): import the float model"},
		15: {"sparse_initializer", protowire.BytesType, "sparse initializers"},
		16: {"metadata_props", protowire.BytesType, ""},
	},
	pb + "NodeProto": {
		6:  {"doc_string", protowire.BytesType, ""},
		9:  {"metadata_props", protowire.BytesType, ""},
		10: {"device_configurations", protowire.BytesType, "multi-device sharding"},
	},
	pb + "AttributeProto": {
		6:  {"g", protowire.BytesType, "graph-valued attributes (control flow: If, Loop, Scan)"},
		10: {"tensors", protowire.BytesType, "tensor-list attributes"},
		11: {"graphs", protowire.BytesType, "graph-list attributes (control flow)"},
		13: {"doc_string", protowire.BytesType, ""},
		14: {"tp", protowire.BytesType, "type-valued attributes"},
		15: {"type_protos", protowire.BytesType, "type-list attributes"},
		22: {"sparse_tensor", protowire.BytesType, "sparse tensor attributes"},
		23: {"sparse_tensors", protowire.BytesType, "sparse tensor attributes"},
	},
	pb + "ValueInfoProto": {
		4: {"metadata_props", protowire.BytesType, ""},
	},
	pb + "TypeProto": {
		4: {"sequence_type", protowire.BytesType, "sequence values: the policy takes and gives tensors"},
		5: {"map_type", protowire.BytesType, "map values: the policy takes and gives tensors"},
		6: {"denotation", protowire.BytesType, ""},
		7: {"opaque_type", protowire.BytesType, "opaque values (ONNX-ML): the policy takes and gives tensors"},
		8: {"sparse_tensor_type", protowire.BytesType, "sparse tensor values: the policy takes and gives dense tensors"},
		9: {"optional_type", protowire.BytesType, "optional values: the policy takes and gives tensors"},
	},
	pb + "TensorShapeProto.Dimension": {
		3: {"denotation", protowire.BytesType, ""},
	},
	pb + "TensorProto": {
		3:  {"segment", protowire.BytesType, "segmented tensors"},
		5:  {"int32_data", protowire.BytesType, "int32_data (8, 16 or 32-bit integer, bool or 16-bit float values): the importer reads float32 weights and int64 axes"},
		6:  {"string_data", protowire.BytesType, "string tensors"},
		10: {"double_data", protowire.BytesType, "double_data (float64 values): the importer reads float32 weights"},
		11: {"uint64_data", protowire.BytesType, "uint64_data (unsigned 32 or 64-bit values): the importer reads float32 weights and int64 axes"},
		12: {"doc_string", protowire.BytesType, ""},
		13: {"external_data", protowire.BytesType, "external data: save the model with its weights inside"},
		16: {"metadata_props", protowire.BytesType, ""},
	},
}
