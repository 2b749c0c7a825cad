package onnx

import (
	"errors"
	"slices"
	"testing"

	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
)

// FuzzImport feeds arbitrary bytes to the reader and the importer,
// seeded with real exported files (every shipped model, with and without
// the critic) and the outside MLP in each PyTorch layout. Neither may
// panic; a refusal wraps ErrFormat or ErrUnsupported; whatever imports is
// a valid model that survives export and import again with the same
// weights.
func FuzzImport(f *testing.F) {
	for _, name := range models.Names() {
		m, err := models.Load(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, critic := range []bool{false, true} {
			mp, err := Export(m, ExportOptions{Critic: critic})
			if err != nil {
				f.Fatal(err)
			}
			f.Add(marshal(f, mp))
		}
	}
	o := newOutsideMLP(11, 4, 3)
	for _, lay := range allLayouts {
		f.Add(marshal(f, o.model(lay, lay != matMulAdd)))
	}
	o.act = [2]nn.Activation{nn.Tanh, nn.ReLU}
	f.Add(marshal(f, o.model(gemmTransB, true)))
	f.Fuzz(func(t *testing.T, b []byte) {
		mp, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("refusal without ErrFormat or ErrUnsupported: %v", err)
			}
			return
		}
		opt := DefaultImportOptions()
		opt.SchemaID = policy.SchemaID
		imp, err := Import(mp, opt)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("refusal without ErrFormat or ErrUnsupported: %v", err)
			}
			return
		}
		m := imp.Model
		if err := m.Validate(); err != nil {
			t.Fatalf("imported an invalid model: %v", err)
		}
		again, err := Export(m, ExportOptions{Critic: true})
		if err != nil {
			t.Fatalf("re-export: %v", err)
		}
		mp2, err := Decode(marshal(t, again))
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		imp2, err := Import(mp2, opt)
		if err != nil {
			t.Fatalf("re-import: %v", err)
		}
		p1, p2 := m.Net.Params(), imp2.Model.Net.Params()
		for i := range p1 {
			if !slices.Equal(bits(p1[i].Values()), bits(p2[i].Values())) {
				t.Fatalf("%s changed through export and import", p1[i].Name)
			}
		}
	})
}
