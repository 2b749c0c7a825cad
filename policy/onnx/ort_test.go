package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
)

func f32le(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }

// scoreTol is the agreement asked of ONNX Runtime and the Go float path:
// 1e-5 of the scores' scale, the largest |score| over the rows (at least
// 1). Both sum the same float32 products in different orders, and a score
// near 0 can be the difference of hidden terms as large as the largest
// scores: the v2 edge model's scores reach about 100, where float32
// resolves only 8e-6, and a score of 1.09 differed by 3.7e-5.
const scoreTol = 1e-5

// compare returns the largest absolute and scaled difference of got from
// want, and fails beyond scoreTol.
func compare(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values from ONNX Runtime, %d from Go", what, len(got), len(want))
	}
	var maxAbs, maxScaled float64
	worst := 0
	scale := 1.0
	for _, w := range want {
		scale = max(scale, math.Abs(float64(w)))
	}
	for i := range got {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		s := d / scale
		maxAbs = max(maxAbs, d)
		if s > maxScaled {
			maxScaled, worst = s, i
		}
	}
	t.Logf("%s: %d values, largest |ONNX Runtime - Go| %.3g, scaled by %.3g: %.3g (row %d: %v vs %v)", what, len(got), maxAbs, scale, maxScaled, worst, got[worst], want[worst])
	if maxScaled > scoreTol {
		t.Errorf("%s: ONNX Runtime and Go differ by %g (scaled) at row %d, more than %g", what, maxScaled, worst, scoreTol)
	}
}

// TestONNXRuntime runs the exported shipped models in ONNX Runtime on
// 10,000 real feature rows (openb, the default model's own simulator run,
// computed by the policy's extractor) and 100 far outside them (the
// models' input bounds) and compares the scores (and the
// critic's value of the whole set) with the Go float path, also for the
// default model's weights with Tanh hidden layers; then the outside MLP
// in each PyTorch layout, with ReLU and with Tanh, against the Go float
// path of its import, which checks the importer's reading of the graph
// against a real runtime.
func TestONNXRuntime(t *testing.T) {
	rt := needORT(t)
	F := policy.NumFeatures
	// and 100 rows far outside any model's input bounds (the graph's Max
	// and Min must clamp them as the Go path does): copies of real rows
	// with every third feature 50 times as large, less 20
	rows := mustRows(t)
	for i := range 100 {
		r := slices.Clone(rows[i*F : (i+1)*F])
		for f := i % 3; f < F; f += 3 {
			r[f] = 50*r[f] - 20
		}
		rows = append(rows, r...)
	}
	for _, name := range append(models.Names(), "default+tanh") {
		t.Run(name, func(t *testing.T) {
			base, tanh := strings.CutSuffix(name, "+tanh")
			m, err := models.Load(base)
			if err != nil {
				t.Fatal(err)
			}
			if tanh {
				m.Net.Act = [2]nn.Activation{nn.Tanh, nn.Tanh}
			}
			mp, err := Export(m, ExportOptions{Critic: true})
			if err != nil {
				t.Fatal(err)
			}
			out := rt.run(t, marshal(t, mp), rows, F)
			compare(t, "score", out[ScoreName], goScores(t, m, rows))
			x := make([]float32, len(rows))
			copy(x, rows)
			for i := 0; i < len(x); i += F {
				m.Schema.Clamp(x[i : i+F])
				m.Schema.Normalize(x[i : i+F])
			}
			_, v, err := m.Net.Clone().Forward(x, len(rows)/F)
			if err != nil {
				t.Fatal(err)
			}
			compare(t, "value", out[ValueName], []float32{v})
		})
	}
	for _, c := range outsideCases() {
		t.Run(fmt.Sprintf("outside/%v/layout%d", c.act, c.lay), func(t *testing.T) {
			o := newOutsideMLP(7, 24, 16)
			o.act = [2]nn.Activation{c.act, c.act}
			lay := c.lay
			mp := o.model(lay, lay != matMulAdd)
			b := marshal(t, mp)
			opt := DefaultImportOptions()
			opt.SchemaID = policy.SchemaID
			back, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			imp, err := Import(back, opt)
			if err != nil {
				t.Fatal(err)
			}
			out := rt.run(t, b, rows, F)
			compare(t, "outside score", out["output"], goScores(t, imp.Model, rows))
		})
	}
}

// outsideCases are the outside MLPs the ecosystem's tools check: every
// layout, with ReLU and with Tanh hidden layers.
func outsideCases() []struct {
	act nn.Activation
	lay layout
} {
	var out []struct {
		act nn.Activation
		lay layout
	}
	for _, act := range []nn.Activation{nn.ReLU, nn.Tanh} {
		for _, lay := range allLayouts {
			out = append(out, struct {
				act nn.Activation
				lay layout
			}{act, lay})
		}
	}
	return out
}

// TestONNXChecker runs the ONNX project's checker (full check, with shape
// inference) on exported files, with and without the critic, and on the
// outside MLP in each layout.
func TestONNXChecker(t *testing.T) {
	c := needChecker(t)
	files := map[string][]byte{}
	for _, name := range models.Names() {
		m, err := models.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, critic := range []bool{false, true} {
			mp, err := Export(m, ExportOptions{Critic: critic})
			if err != nil {
				t.Fatal(err)
			}
			files[fmt.Sprintf("%s-critic-%v.onnx", name, critic)] = marshal(t, mp)
		}
	}
	tanh, err := models.Default()
	if err != nil {
		t.Fatal(err)
	}
	tanh.Net.Act = [2]nn.Activation{nn.Tanh, nn.ReLU}
	mp, err := Export(tanh, ExportOptions{Critic: true})
	if err != nil {
		t.Fatal(err)
	}
	files["default-tanh-relu-critic.onnx"] = marshal(t, mp)
	for _, oc := range outsideCases() {
		o := newOutsideMLP(7, 24, 16)
		o.act = [2]nn.Activation{oc.act, oc.act}
		files[fmt.Sprintf("outside-%v-layout%d.onnx", oc.act, oc.lay)] = marshal(t, o.model(oc.lay, true))
	}
	c.check(t, files)
}
