package onnx

import (
	"bytes"
	"math"
	"slices"
	"testing"

	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/onnx/onnxpb"
)

func encodeModel(t *testing.T, m *nn.Model) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := nn.Encode(&buf, m, "model", nil, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestRoundTrip exports every shipped model and imports it back. With the
// critic the model file written from the import is the original's byte
// for byte (weights, schema statistics, decision rule, provenance, time);
// without it the scorer's weights are bit-identical and the critic is a
// new one. Either way the scores on 10,000 real openb rows are equal bit
// for bit.
func TestRoundTrip(t *testing.T) {
	rows := mustRows(t)
	for _, name := range models.Names() {
		for _, critic := range []bool{true, false} {
			t.Run(name+map[bool]string{true: "/critic", false: "/scorer"}[critic], func(t *testing.T) {
				m, err := models.Load(name)
				if err != nil {
					t.Fatal(err)
				}
				mp, err := Export(m, ExportOptions{Critic: critic})
				if err != nil {
					t.Fatal(err)
				}
				b := marshal(t, mp)
				imp := reimport(t, mp)
				if !imp.Metadata || !imp.Dated || !imp.Normalized || imp.Critic != critic {
					t.Errorf("import report %+v", imp)
				}
				if want := "Gemm(transB=1)+Relu, Gemm(transB=1)+Relu, Gemm(transB=1)"; imp.Layout != want {
					t.Errorf("layout %q, want %q", imp.Layout, want)
				}
				got := imp.Model
				if critic {
					if !bytes.Equal(encodeModel(t, got), encodeModel(t, m)) {
						t.Fatal("the re-imported model file differs from the original")
					}
				} else {
					orig, back := m.Net.Params(), got.Net.Params()
					for i := range 6 { // w1 .. b3: the scorer
						if !slices.Equal(bits(orig[i].Values()), bits(back[i].Values())) {
							t.Errorf("%s differs after the round trip", orig[i].Name)
						}
					}
					if got.Schema.Hash() != m.Schema.Hash() || got.Decision != m.Decision {
						t.Errorf("schema or decision rule changed: %v %v", got.Schema.Hash(), got.Decision)
					}
				}
				if !slices.Equal(bits(goScores(t, got, rows)), bits(goScores(t, m, rows))) {
					t.Error("scores of the imported model differ from the original's")
				}
				// export is deterministic: the imported model exports to the same file
				mp2, err := Export(got, ExportOptions{Critic: critic})
				if err != nil {
					t.Fatal(err)
				}
				if critic && !bytes.Equal(marshal(t, mp2), b) {
					t.Error("re-export differs from the first export")
				}
			})
		}
	}
}

// TestRoundTripTanh: a model with Tanh hidden layers (the default model's
// weights with Tanh in place of ReLU, mixed and both) exports with Tanh
// nodes and imports back to the same model file byte for byte, with the
// same scores on 10,000 real rows.
func TestRoundTripTanh(t *testing.T) {
	rows := mustRows(t)
	for _, act := range [][2]nn.Activation{{nn.Tanh, nn.Tanh}, {nn.Tanh, nn.ReLU}, {nn.ReLU, nn.Tanh}} {
		t.Run(act[0].String()+","+act[1].String(), func(t *testing.T) {
			m, err := models.Default()
			if err != nil {
				t.Fatal(err)
			}
			m.Net.Act = act
			mp, err := Export(m, ExportOptions{Critic: true})
			if err != nil {
				t.Fatal(err)
			}
			tanhs := 0
			for _, n := range mp.Graph.Node {
				if n.GetOpType() == "Tanh" {
					tanhs++
				}
			}
			want := 0
			for _, a := range act {
				if a == nn.Tanh {
					want++
				}
			}
			if tanhs != want {
				t.Fatalf("%d Tanh nodes, want %d", tanhs, want)
			}
			imp := reimport(t, mp)
			if imp.Model.Net.Act != act {
				t.Fatalf("imported activations %v, want %v", imp.Model.Net.Act, act)
			}
			if !bytes.Equal(encodeModel(t, imp.Model), encodeModel(t, m)) {
				t.Fatal("the re-imported model file differs from the original")
			}
			if !slices.Equal(bits(goScores(t, imp.Model, rows)), bits(goScores(t, m, rows))) {
				t.Error("scores of the imported model differ from the original's")
			}
		})
	}
}

func bits(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, f := range v {
		out[i] = math.Float32bits(f)
	}
	return out
}

// TestImportOutside imports an MLP written in each of PyTorch's layouts
// with the ONNX protobuf types (no edgesched metadata, so the schema is
// named by the options), with ReLU and with Tanh hidden layers, and checks
// its scores on 10,000 real rows against the test's own float64
// evaluation of the same weights.
func TestImportOutside(t *testing.T) {
	rows := mustRows(t)
	for _, c := range []struct {
		name   string
		act    nn.Activation
		lay    layout
		norm   bool
		layout string
	}{
		{"gemm transB=1, normalised", nn.ReLU, gemmTransB, true, "Gemm(transB=1)+Relu, Gemm(transB=1)+Relu, Gemm(transB=1)"},
		{"matmul+add", nn.ReLU, matMulAdd, false, "MatMul+Add+Relu, MatMul+Add+Relu, MatMul+Add"},
		{"transpose nodes, normalised", nn.ReLU, transposeNodes, true, "MatMul+Add+Relu, MatMul+Add+Relu, MatMul+Add"},
		{"gemm, squeezed output", nn.ReLU, gemmSqueeze, true, "Gemm(transB=1)+Relu, Gemm(transB=1)+Relu, Gemm(transB=1)"},
		{"tanh, gemm transB=1, normalised", nn.Tanh, gemmTransB, true, "Gemm(transB=1)+Tanh, Gemm(transB=1)+Tanh, Gemm(transB=1)"},
		{"tanh, matmul+add", nn.Tanh, matMulAdd, false, "MatMul+Add+Tanh, MatMul+Add+Tanh, MatMul+Add"},
		{"tanh, transpose nodes, normalised", nn.Tanh, transposeNodes, true, "MatMul+Add+Tanh, MatMul+Add+Tanh, MatMul+Add"},
		{"tanh, gemm, squeezed output", nn.Tanh, gemmSqueeze, true, "Gemm(transB=1)+Tanh, Gemm(transB=1)+Tanh, Gemm(transB=1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := newOutsideMLP(7, 24, 16)
			o.act = [2]nn.Activation{c.act, c.act}
			mp, err := Decode(marshal(t, o.model(c.lay, c.norm)))
			if err != nil {
				t.Fatal(err)
			}
			imp := importOutside(t, mp)
			if imp.Layout != c.layout || imp.Normalized != c.norm || imp.Critic || imp.Metadata || imp.Dated || imp.Producer != "pytorch 2.5.1" {
				t.Errorf("import report %+v", imp)
			}
			m := imp.Model
			if m.Net.H1 != 24 || m.Net.H2 != 16 || m.Net.HC != 32 || m.Net.Act != o.act {
				t.Errorf("layers %d/%d/%d, activations %v", m.Net.H1, m.Net.H2, m.Net.HC, m.Net.Act)
			}
			ref := o
			if !c.norm { // without the graph's normalisation the model takes raw rows
				ref = &outsideMLP{mean: make([]float32, len(o.mean)), std: ones(len(o.std)), w: o.w, b: o.b, dims: o.dims, act: o.act}
			}
			got := goScores(t, m, rows)
			F := policy.NumFeatures
			var worst float64
			for i := range got {
				want := ref.score(rows[i*F : (i+1)*F])
				worst = max(worst, math.Abs(float64(got[i])-want)/max(1, math.Abs(want)))
			}
			t.Logf("%d rows: largest difference from the float64 reference %.3g (relative above 1)", len(got), worst)
			if worst > 1e-5 {
				t.Fatalf("imported scores differ from the reference by %g", worst)
			}
		})
	}
}

// importOutside imports a file made outside the project (no edgesched
// metadata): refused until the schema is named, then imported with it.
func importOutside(t *testing.T, mp *onnxpb.ModelProto) *Imported {
	t.Helper()
	if _, err := Import(mp, DefaultImportOptions()); err == nil || !bytesContains(err, "--schema-id") {
		t.Fatalf("a file without schema metadata imported without the operator naming it: %v", err)
	}
	opt := DefaultImportOptions()
	opt.SchemaID = policy.SchemaID
	imp, err := Import(mp, opt)
	if err != nil {
		t.Fatal(err)
	}
	return imp
}

func bytesContains(err error, s string) bool {
	return err != nil && bytes.Contains([]byte(err.Error()), []byte(s))
}

// TestRoundTripSage: a model's own GraphSAGE weights (a federated round
// trained them) travel in the file's metadata and come back bit for bit
// under their ID; a model without weights reads the shipped pair's
// partners, and so does its import.
func TestRoundTripSage(t *testing.T) {
	m, err := models.Load("edge-sage")
	if err != nil {
		t.Fatal(err)
	}
	if m.Sage != nil || m.AffinityEncoder() != policy.AffinityEncoder {
		t.Fatalf("edge-sage's weights: %v", m.Sage)
	}
	own := m.Clone()
	own.Sage = policy.DefaultSage()
	own.Sage.Decoder[5] -= 0.25
	for _, tc := range []struct {
		name string
		m    *nn.Model
		want string
		meta bool
	}{{"shipped pair", m, policy.AffinityEncoder, false}, {"own weights", own, own.Sage.ID(), true}} {
		mp, err := Export(tc.m, ExportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		has := false
		for _, e := range mp.MetadataProps {
			has = has || e.GetKey() == MetaSage
		}
		imp := reimport(t, mp)
		if has != tc.meta || imp.Model.AffinityEncoder() != tc.want {
			t.Errorf("%s: metadata %v (want %v), imported weights %s, want %s", tc.name, has, tc.meta, imp.Model.AffinityEncoder(), tc.want)
		}
	}
}
