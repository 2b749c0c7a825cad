package onnx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/policy/onnx/onnxpb"
)

// onnxpbMessages returns every message onnxpb declares, by full name.
func onnxpbMessages() map[protoreflect.FullName]protoreflect.MessageDescriptor {
	out := map[protoreflect.FullName]protoreflect.MessageDescriptor{}
	var add func(ms protoreflect.MessageDescriptors)
	add = func(ms protoreflect.MessageDescriptors) {
		for i := range ms.Len() {
			md := ms.Get(i)
			out[md.FullName()] = md
			add(md.Messages())
		}
	}
	add(onnxpb.File_onnxpb_proto.Messages())
	return out
}

// TestUnmodeledTable: the table names messages onnxpb declares and
// field numbers it does not declare (a field is either modeled or listed,
// never both).
func TestUnmodeledTable(t *testing.T) {
	msgs := onnxpbMessages()
	for name, fields := range unmodeled {
		md, ok := msgs[name]
		if !ok {
			t.Errorf("unmodeled lists %s, which onnxpb does not declare", name)
			continue
		}
		for num, f := range fields {
			if fd := md.Fields().ByNumber(num); fd != nil {
				t.Errorf("%s field %d (%s) is both declared (%s) and unmodeled", name, num, f.name, fd.Name())
			}
		}
	}
}

// withField returns m with field num of wire type typ appended to its
// unknown fields: how a file written with the full format carries a field
// onnxpb does not declare.
func withField(m proto.Message, num protowire.Number, typ protowire.Type) {
	b := protowire.AppendTag(nil, num, typ)
	switch typ {
	case protowire.VarintType:
		b = protowire.AppendVarint(b, 1)
	case protowire.Fixed32Type:
		b = protowire.AppendFixed32(b, 1)
	case protowire.Fixed64Type:
		b = protowire.AppendFixed64(b, 1)
	default:
		b = protowire.AppendBytes(b, []byte("x"))
	}
	r := m.ProtoReflect()
	r.SetUnknown(append(r.GetUnknown(), b...))
}

// TestUnmodeled writes every field of the table into an exported file
// (the message of its kind nearest the root: the model, the graph, the
// first Gemm and its first attribute, the input, its type and width, the
// first initializer) and reads the file back: a skipped field leaves the
// import exactly as without it; a refused one is refused with
// ErrUnsupported naming the message, field and number.
func TestUnmodeled(t *testing.T) {
	m, err := models.Default()
	if err != nil {
		t.Fatal(err)
	}
	base, err := Export(m, ExportOptions{Critic: true})
	if err != nil {
		t.Fatal(err)
	}
	want := encodeModel(t, m)
	// the message of each kind that gets the field
	target := func(mp *onnxpb.ModelProto, name protoreflect.FullName) proto.Message {
		g := mp.Graph
		in := g.Input[0]
		for _, m := range []proto.Message{mp, g, findNode(g, "Gemm"), findNode(g, "Gemm").Attribute[0], in, in.Type,
			in.Type.GetTensorType(), in.Type.GetTensorType().Shape, in.Type.GetTensorType().Shape.Dim[1], g.Initializer[0], mp.OpsetImport[0], mp.MetadataProps[0]} {
			if m.ProtoReflect().Descriptor().FullName() == name {
				return m
			}
		}
		t.Fatalf("no %s in the exported file", name)
		return nil
	}
	var names []string
	for name := range unmodeled {
		names = append(names, string(name))
	}
	sort.Strings(names)
	skipped, refused := 0, 0
	for _, name := range names {
		fields := unmodeled[protoreflect.FullName(name)]
		nums := make([]int, 0, len(fields))
		for num := range fields {
			nums = append(nums, int(num))
		}
		slices.Sort(nums)
		for _, num := range nums {
			f := fields[protowire.Number(num)]
			short := name[len(pb):]
			t.Run(fmt.Sprintf("%s.%s", short, f.name), func(t *testing.T) {
				mp := proto.Clone(base).(*onnxpb.ModelProto)
				withField(target(mp, protoreflect.FullName(name)), protowire.Number(num), f.wire)
				back, err := Decode(marshal(t, mp))
				if f.refused != "" {
					refused++
					msg := fmt.Sprintf("%s.%s (field %d)", short[strings.LastIndex(short, ".")+1:], f.name, num)
					if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), msg) {
						t.Fatalf("error %v, want ErrUnsupported naming %s", err, msg)
					}
					t.Log(err)
					return
				}
				skipped++
				if err != nil {
					t.Fatalf("skipped field refused: %v", err)
				}
				imp, err := Import(back, DefaultImportOptions())
				if err != nil {
					t.Fatal(err)
				}
				if string(encodeModel(t, imp.Model)) != string(want) {
					t.Fatal("a skipped field changed the imported model")
				}
			})
		}
	}
	t.Logf("%d fields skipped, %d refused", skipped, refused)
}

// TestSchemaAgainstONNX compares onnxpb.proto and the unmodeled table
// with the ONNX project's own schema, as compiled into the onnx Python
// package of the checker (Debian's python3-onnx, an independent
// reference): every field that package defines in a message onnxpb
// declares must be declared by onnxpb with the same number, name, type
// and cardinality, or listed in unmodeled with the same number and name
// (and, when skipped, its wire type); every field onnxpb declares must
// be the package's, but for the few newer than its ONNX version; the
// element and attribute type enums must agree.
func TestSchemaAgainstONNX(t *testing.T) {
	c := needChecker(t)
	const script = `import json, onnx
out = {}
def walk(d):
    out[d.full_name[len("onnx."):]] = {
        "fields": {str(f.number): [f.name, f.type, f.label] for f in d.fields},
        "enums": {e.name: {v.name: v.number for v in e.values} for e in d.enum_types},
    }
    for n in d.nested_types:
        walk(n)
for d in onnx.ModelProto.DESCRIPTOR.file.message_types_by_name.values():
    walk(d)
print(json.dumps({"version": onnx.__version__, "messages": out}))
`
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := runCmd(ctx, t.TempDir(), c.env, c.python, "-c", script)
	if err != nil {
		t.Fatalf("reading the onnx package's schema: %v", err)
	}
	var ref struct {
		Version  string
		Messages map[string]struct {
			Fields map[string][3]any
			Enums  map[string]map[string]int
		}
	}
	if err := json.Unmarshal(out, &ref); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// Declared by onnxpb, newer than ONNX 1.12 (IR 8).
	newer := map[string]bool{"NodeProto.overload": true}
	checked := 0
	for full, md := range onnxpbMessages() {
		name := string(full[len(pb):])
		rm, ok := ref.Messages[name]
		if !ok {
			t.Errorf("onnxpb declares %s; onnx %s has no such message", name, ref.Version)
			continue
		}
		for ns, rf := range rm.Fields {
			n, _ := strconv.Atoi(ns)
			num := protowire.Number(n)
			rname, rtype, rlabel := rf[0].(string), int(rf[1].(float64)), int(rf[2].(float64))
			checked++
			if fd := md.Fields().ByNumber(num); fd != nil {
				if string(fd.Name()) != rname || int(fd.Kind()) != rtype || int(fd.Cardinality()) != rlabel {
					t.Errorf("%s field %d: onnxpb has %s kind %d cardinality %d, onnx %s has %s type %d label %d",
						name, num, fd.Name(), fd.Kind(), fd.Cardinality(), ref.Version, rname, rtype, rlabel)
				}
				continue
			}
			f, ok := unmodeled[full][num]
			switch {
			case !ok:
				t.Errorf("%s field %d (%s) of onnx %s is neither declared nor in unmodeled", name, num, rname, ref.Version)
			case f.name != rname:
				t.Errorf("%s field %d: unmodeled calls it %s, onnx %s %s", name, num, f.name, ref.Version, rname)
			case f.refused == "" && f.wire != wireType(protoreflect.Kind(rtype)):
				t.Errorf("%s.%s: unmodeled skips wire type %d, onnx %s's type %d is wire type %d", name, rname, f.wire, ref.Version, rtype, wireType(protoreflect.Kind(rtype)))
			}
		}
		for i := range md.Fields().Len() {
			fd := md.Fields().Get(i)
			if _, ok := rm.Fields[strconv.Itoa(int(fd.Number()))]; !ok && !newer[name+"."+string(fd.Name())] {
				t.Errorf("onnxpb declares %s.%s (field %d); onnx %s has no such field", name, fd.Name(), fd.Number(), ref.Version)
			}
		}
		for i := range md.Enums().Len() {
			ed := md.Enums().Get(i)
			re, ok := rm.Enums[string(ed.Name())]
			if !ok {
				t.Errorf("onnxpb declares enum %s.%s; onnx %s has none", name, ed.Name(), ref.Version)
				continue
			}
			for vn, vnum := range re {
				v := ed.Values().ByName(protoreflect.Name(vn))
				if v == nil || int(v.Number()) != vnum {
					t.Errorf("%s.%s: onnx %s has %s = %d, onnxpb does not", name, ed.Name(), ref.Version, vn, vnum)
				}
			}
		}
	}
	t.Logf("onnx %s: %d fields of the %d messages onnxpb declares agree with onnxpb and unmodeled", ref.Version, checked, len(onnxpbMessages()))
}
