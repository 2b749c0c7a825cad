package nn

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/policy"
)

// testModel is a small random model (seeded) with a fitted schema.
func testModel(t testing.TB, seed uint64) *Model {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	net, err := NewNet(policy.NumFeatures, 8, 6, 4, rng)
	if err != nil {
		t.Fatal(err)
	}
	s := policy.NewSchema()
	for i := range s.Mean {
		s.Mean[i] = float32(rng.NormFloat64())
		s.Std[i] = float32(0.5 + rng.Float64())
	}
	return &Model{Schema: s, Net: net, Meta: map[string]any{"seed": float64(seed)}}
}

func encode(t testing.TB, m *Model, kind string, sections map[string]*Net, state json.RawMessage) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Encode(&buf, m, kind, sections, state); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// reseal recomputes the trailing checksum after a test edits the body, so
// the decoder's later checks are the ones exercised.
func reseal(b []byte) []byte {
	b = append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
	return b
}

// rewriteHeader replaces the JSON header through edit and reseals.
func rewriteHeader(t testing.TB, b []byte, edit func(h map[string]any)) []byte {
	t.Helper()
	hl := binary.LittleEndian.Uint32(b[4:8])
	var h map[string]any
	if err := json.Unmarshal(b[8:8+hl], &h); err != nil {
		t.Fatal(err)
	}
	edit(h)
	hb, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	out := append([]byte(modelMagic), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(out[4:], uint32(len(hb)))
	out = append(out, hb...)
	out = append(out, b[8+hl:]...)
	return reseal(out)
}

func sameNet(t *testing.T, a, b *Net) {
	t.Helper()
	pa, pb := a.Params(), b.Params()
	for i := range pa {
		da, db := f32(pa[i].T), f32(pb[i].T)
		for j := range da {
			if math.Float32bits(da[j]) != math.Float32bits(db[j]) {
				t.Fatalf("%s[%d]: %v != %v", pa[i].Name, j, da[j], db[j])
			}
		}
	}
}

func TestModelRoundTrip(t *testing.T) {
	m := testModel(t, 3)
	m.Decision = policy.Decision{Band: 2.5}
	adamM, adamV := testModel(t, 4).Net, testModel(t, 5).Net
	state := json.RawMessage(`{"iteration":7}`)
	b := encode(t, m, "checkpoint", map[string]*Net{"adam_v": adamV, "adam_m": adamM}, state)
	d, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	sameNet(t, m.Net, d.Model.Net)
	sameNet(t, adamM, d.Sections["adam_m"])
	sameNet(t, adamV, d.Sections["adam_v"])
	if d.Header.Kind != "checkpoint" || string(d.Header.State) != string(state) || d.Model.Meta["seed"] != float64(3) {
		t.Fatalf("header %+v", d.Header)
	}
	if strings.Join(d.Header.Sections, ",") != "adam_m,adam_v" {
		t.Fatalf("sections %v, want sorted adam_m,adam_v", d.Header.Sections)
	}
	if d.Model.Schema.Hash() != m.Schema.Hash() {
		t.Fatal("schema changed in the round trip")
	}
	if d.Model.Decision != m.Decision {
		t.Fatalf("decision %+v, want %+v", d.Model.Decision, m.Decision)
	}
	// A model without a decision rule writes no "decision" field, so
	// files written before the field existed are still what we write.
	if plain := encode(t, testModel(t, 3), "model", nil, nil); bytes.Contains(plain, []byte(`"decision"`)) {
		t.Fatal("a model without a rule wrote a decision field")
	}
	// Encoding is deterministic: the same model gives the same bytes.
	if !bytes.Equal(b, encode(t, m, "checkpoint", map[string]*Net{"adam_m": adamM, "adam_v": adamV}, state)) {
		t.Fatal("two encodings of one model differ")
	}
	// Same scores from the decoded network.
	x := make([]float32, 3*policy.NumFeatures)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	s1, v1, _ := m.Net.Forward(x, 3)
	s1 = append([]float32(nil), s1...)
	s2, v2, _ := d.Model.Net.Forward(x, 3)
	for i := range s1 {
		if s1[i] != s2[i] {
			t.Fatalf("score %d: %v != %v", i, s1[i], s2[i])
		}
	}
	if v1 != v2 {
		t.Fatalf("value %v != %v", v1, v2)
	}
}

// TestModelActivations: a network with Tanh hidden layers records them in
// the header (hidden_activations) and decodes to the same activations and
// scores; an all-ReLU network writes no such field, so its file is what
// every earlier build wrote (the shipped models are checked byte for byte
// in package models).
func TestModelActivations(t *testing.T) {
	x := make([]float32, 3*policy.NumFeatures)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	for _, act := range [][2]Activation{{ReLU, ReLU}, {Tanh, Tanh}, {Tanh, ReLU}, {ReLU, Tanh}} {
		t.Run(act[0].String()+","+act[1].String(), func(t *testing.T) {
			m := testModel(t, 6)
			m.Net.Act = act
			b := encode(t, m, "model", nil, nil)
			if has := bytes.Contains(b, []byte(`"hidden_activations"`)); has != (act != [2]Activation{}) {
				t.Fatalf("hidden_activations written: %v, for %v", has, act)
			}
			d, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if d.Model.Net.Act != act {
				t.Fatalf("decoded activations %v, want %v", d.Model.Net.Act, act)
			}
			s1, _ := m.Net.Scores(x, 3)
			s1 = append([]float32(nil), s1...)
			s2, _ := d.Model.Net.Scores(x, 3)
			for i := range s1 {
				if math.Float32bits(s1[i]) != math.Float32bits(s2[i]) {
					t.Fatalf("score %d: %v != %v", i, s1[i], s2[i])
				}
			}
			if act == [2]Activation{} {
				bad := testModel(t, 6)
				bad.Net.Act[1] = Tanh + 1
				if err := bad.Validate(); !errors.Is(err, policy.ErrShape) || !strings.Contains(err.Error(), "hidden layer 2 has activation(2)") {
					t.Fatalf("Validate of an unknown activation: %v", err)
				}
				return
			}
			// a Tanh layer changes the scores (the field is not decoration)
			relu := m.Net.Clone()
			relu.Act = [2]Activation{}
			s3, _ := relu.Scores(x, 3)
			same := true
			for i := range s1 {
				same = same && s1[i] == s3[i]
			}
			if same {
				t.Fatal("the Tanh network scores like the ReLU one")
			}
		})
	}
}

func TestModelFile(t *testing.T) {
	m := testModel(t, 9)
	path := filepath.Join(t.TempDir(), "m.esm")
	if err := WriteFile(path, m, "model", nil, nil); err != nil {
		t.Fatal(err)
	}
	d, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sameNet(t, m.Net, d.Model.Net)
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want only m.esm (no temporary file)", len(ents))
	}
	// A refused write leaves the existing file as it was.
	bad := testModel(t, 10)
	f32(bad.Net.W1)[0] = float32(math.NaN())
	if err := WriteFile(path, bad, "model", nil, nil); err == nil {
		t.Fatal("NaN model written")
	}
	if _, err := ReadFile(path); err != nil {
		t.Fatalf("existing model damaged: %v", err)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing.esm")); err == nil {
		t.Fatal("missing file read")
	}
}

func TestModelRefusals(t *testing.T) {
	good := encode(t, testModel(t, 1), "model", nil, nil)
	hl := int(binary.LittleEndian.Uint32(good[4:8]))
	nanAt := func(b []byte) []byte {
		b = append([]byte(nil), b...)
		binary.LittleEndian.PutUint32(b[8+hl:], math.Float32bits(float32(math.Inf(1))))
		return reseal(b)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "magic"},
		{"wrong magic", append([]byte("GGUF"), good[4:]...), "magic"},
		{"flipped bit", func() []byte { b := append([]byte(nil), good...); b[len(b)/2] ^= 1; return b }(), "checksum"},
		{"truncated", good[:len(good)-10], "checksum"},
		{"header length past the end", func() []byte {
			b := append([]byte(nil), good...)
			binary.LittleEndian.PutUint32(b[4:], uint32(len(b)))
			return reseal(b)
		}(), "header length"},
		{"header not JSON", func() []byte {
			b := append([]byte(nil), good...)
			b[8] = '!'
			return reseal(b)
		}(), "header"},
		{"unknown header field", rewriteHeader(t, good, func(h map[string]any) { h["extra"] = 1 }), "unknown field"},
		{"future format", rewriteHeader(t, good, func(h map[string]any) { h["format"] = 2 }), "format version 2"},
		{"unknown kind", rewriteHeader(t, good, func(h map[string]any) { h["kind"] = "weights" }), `kind "weights"`},
		{"int8 payload", rewriteHeader(t, good, func(h map[string]any) { h["dtype"] = "int8" }), "relu/float32"},
		{"other schema", rewriteHeader(t, good, func(h map[string]any) { h["schema_id"] = "other/v9" }), "schema"},
		{"schema hash mismatch", rewriteHeader(t, good, func(h map[string]any) { h["schema_hash"] = "00" }), "schema hash"},
		{"stats tampered", rewriteHeader(t, good, func(h map[string]any) {
			h["schema"].(map[string]any)["mean"].([]any)[0] = 99.0
		}), "schema hash"},
		{"wrong layer size", rewriteHeader(t, good, func(h map[string]any) { h["layers"].(map[string]any)["hidden1"] = 9 }), "payload"},
		{"zero layer", rewriteHeader(t, good, func(h map[string]any) { h["layers"].(map[string]any)["hidden2"] = 0 }), "layer sizes"},
		{"missing section payload", rewriteHeader(t, good, func(h map[string]any) { h["sections"] = []string{"adam_m"} }), "payload"},
		{"infinite weight", nanAt(good), "+Inf"},
		{"negative band", rewriteHeader(t, good, func(h map[string]any) { h["decision"] = map[string]any{"band": -1} }), "band -1"},
		{"unknown decision field", rewriteHeader(t, good, func(h map[string]any) { h["decision"] = map[string]any{"key": "bfd"} }), "unknown field"},
		{"oversized", make([]byte, MaxModelBytes+1), "exceeds"},
		{"unknown activation", rewriteHeader(t, good, func(h map[string]any) { h["hidden_activations"] = []string{"tanh", "gelu"} }), `hidden layer 2: policy: wrong shape: activation "gelu"`},
		{"one activation", rewriteHeader(t, good, func(h map[string]any) { h["hidden_activations"] = []string{"tanh"} }), "1 hidden activations, the network has 2"},
		{"critic activation", rewriteHeader(t, good, func(h map[string]any) { h["activation"] = "tanh" }), "tanh/float32 network"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.b)
			if !errors.Is(err, ErrModel) {
				t.Fatalf("err %v, want ErrModel", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %q does not name %q", err, tc.want)
			}
		})
	}
}

// pokeSection writes v over element i of section s (in the file's sorted
// order) of an encoded file and reseals it: a damaged or hand-made file
// that Encode would refuse to write.
func pokeSection(b []byte, s, i int, v float32) []byte {
	b = append([]byte(nil), b...)
	var h ModelHeader
	hl := int(binary.LittleEndian.Uint32(b[4:8]))
	if err := json.Unmarshal(b[8:8+hl], &h); err != nil {
		panic(err)
	}
	n, err := NewNet(h.Layers.F, h.Layers.H1, h.Layers.H2, h.Layers.HC, nil)
	if err != nil {
		panic(err)
	}
	binary.LittleEndian.PutUint32(b[8+hl+((s+1)*n.NumParams()+i)*4:], math.Float32bits(v))
	return reseal(b)
}

// reviewerCheckpoint is the review's reproduction: a checkpoint whose
// adam_m holds a NaN and whose adam_v a negative value, with adam_step
// -1. The NaN is the file's to refuse (nn.Decode); the negative second
// moment and step are the trainer's (policy/ppo resume).
func reviewerCheckpoint(t testing.TB) []byte {
	m := testModel(t, 1)
	b := encode(t, m, "checkpoint", map[string]*Net{"adam_m": m.Net.Clone(), "adam_v": m.Net.Clone()}, json.RawMessage(`{"adam_step":-1}`))
	return pokeSection(pokeSection(b, 0, 0, float32(math.NaN())), 1, 0, -1)
}

// TestSectionsFinite: a section's values (a checkpoint's optimiser
// moments, its best network) must be finite like the network's own:
// Encode does not write a non-finite one and Decode refuses one, naming
// the section and the element. A finite negative value is the file's to
// keep (what it means is the section's reader's business).
func TestSectionsFinite(t *testing.T) {
	m := testModel(t, 1)
	for _, tc := range []struct {
		name string
		v    float32
		want string // "" = accepted
	}{
		{"NaN", float32(math.NaN()), "section adam_m: w1[3] is NaN"},
		{"+Inf", float32(math.Inf(1)), "section adam_m: w1[3] is +Inf"},
		{"-Inf", float32(math.Inf(-1)), "section adam_m: w1[3] is -Inf"},
		{"negative", -1, ""},
		{"largest float32", math.MaxFloat32, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := m.Net.Clone()
			f32(s.W1)[3] = tc.v
			var buf bytes.Buffer
			err := Encode(&buf, m, "checkpoint", map[string]*Net{"adam_m": s, "adam_v": m.Net.Clone()}, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Encode: %v", err)
				}
			} else if !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Encode: %v, want ErrModel naming %q", err, tc.want)
			}
			// the same file, made by hand
			b := pokeSection(encode(t, m, "checkpoint", map[string]*Net{"adam_m": m.Net.Clone(), "adam_v": m.Net.Clone()}, nil), 0, 3, tc.v)
			d, err := Decode(b)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if got := f32(d.Sections["adam_m"].W1)[3]; got != tc.v {
					t.Fatalf("adam_m w1[3] decoded as %v, want %v", got, tc.v)
				}
				return
			}
			if !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode: %v, want ErrModel naming %q", err, tc.want)
			}
		})
	}
	if _, err := Decode(reviewerCheckpoint(t)); !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), "section adam_m: w1[0] is NaN") {
		t.Fatalf("the review's checkpoint: %v, want ErrModel naming adam_m's NaN", err)
	}
}

// FuzzDecode: no input crashes the decoder, and whatever it accepts
// re-encodes to a file that decodes to the same parameters.
func FuzzDecode(f *testing.F) {
	f.Add(encode(f, testModel(f, 1), "model", nil, nil))
	f.Add(encode(f, testModel(f, 2), "checkpoint", map[string]*Net{"adam_m": testModel(f, 3).Net}, json.RawMessage(`{"a":1}`)))
	f.Add(reviewerCheckpoint(f))
	tanh := testModel(f, 4)
	tanh.Net.Act = [2]Activation{Tanh, ReLU}
	f.Add(encode(f, tanh, "model", nil, nil))
	if b, err := os.ReadFile("../models/default.esm"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrModel) && !errors.Is(err, policy.ErrShape) && !errors.Is(err, policy.ErrSchema) {
				t.Fatalf("unwrapped error %v", err)
			}
			return
		}
		var buf bytes.Buffer
		if err := Encode(&buf, d.Model, d.Header.Kind, d.Sections, d.Header.State); err != nil {
			t.Fatalf("accepted model does not re-encode: %v", err)
		}
		d2, err := Decode(buf.Bytes())
		if err != nil {
			t.Fatalf("re-encoded model refused: %v", err)
		}
		sameNet(t, d.Model.Net, d2.Model.Net)
		if d.Model.Net.Act != d2.Model.Net.Act {
			t.Fatalf("activations %v re-encoded as %v", d.Model.Net.Act, d2.Model.Net.Act)
		}
		if d.Model.Decision != d2.Model.Decision {
			t.Fatalf("decision %+v re-encoded as %+v", d.Model.Decision, d2.Model.Decision)
		}
	})
}

// TestModelBounds: a model's input bounds survive the file (and a model
// without them writes no such fields, so earlier files are what we
// write); its float scorer scores a row beyond the bounds as the row held
// at them, and a row within them exactly as the same network without
// bounds; the decoder refuses crossed bounds.
func TestModelBounds(t *testing.T) {
	m := testModel(t, 7)
	if b := encode(t, m, "model", nil, nil); bytes.Contains(b, []byte(`"lo"`)) || bytes.Contains(b, []byte(`"hi"`)) {
		t.Fatal("a model without bounds wrote bounds")
	}
	const F = policy.NumFeatures
	bounded := &Model{Schema: m.Schema, Net: m.Net, Meta: m.Meta}
	bounded.Schema.Lo, bounded.Schema.Hi = make([]float32, F), make([]float32, F)
	for i := range F {
		bounded.Schema.Lo[i], bounded.Schema.Hi[i] = -1, 1
	}
	d, err := Decode(encode(t, bounded, "model", nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Model.Schema.Lo, bounded.Schema.Lo) || !slices.Equal(d.Model.Schema.Hi, bounded.Schema.Hi) {
		t.Fatalf("bounds after the round trip: %v, %v", d.Model.Schema.Lo[:3], d.Model.Schema.Hi[:3])
	}
	score := func(m *Model, rows []float32) []float32 {
		s, err := NewFloatScorer(m)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float32, len(rows)/F)
		if err := s.Scores(rows, len(out), out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// row 0 within the bounds; row 1 beyond them on two node features
	// (the pod features are the rows' shared part), row 2 that row held
	// at the bounds
	rows := make([]float32, 3*F)
	for i := range F {
		v := float32(i%5)*0.4 - 0.8
		rows[i], rows[F+i], rows[2*F+i] = v, v, v
	}
	rows[F+policy.NumPodFeatures], rows[2*F+policy.NumPodFeatures] = 40, 1
	rows[F+F-1], rows[2*F+F-1] = -7, -1
	got, plain := score(d.Model, rows), score(m, rows)
	if got[0] != plain[0] {
		t.Errorf("a row within the bounds scores %v, %v without bounds", got[0], plain[0])
	}
	if got[1] != got[2] || got[1] == plain[1] {
		t.Errorf("a row beyond the bounds scores %v, the row held at them %v (without bounds %v)", got[1], got[2], plain[1])
	}
	crossed := rewriteHeader(t, encode(t, bounded, "model", nil, nil), func(h map[string]any) {
		h["schema"].(map[string]any)["lo"].([]any)[3] = 2.0
	})
	if _, err := Decode(crossed); !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), "pod_share has bounds [2, 1]") {
		t.Fatalf("crossed bounds: %v", err)
	}
}

// TestIsModelFile: the magic alone tells a model file from the artifacts
// and other files tools are given, without decoding.
func TestIsModelFile(t *testing.T) {
	var model bytes.Buffer
	if err := Encode(&model, testModel(t, 1), "model", nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"model file", model.Bytes(), true},
		{"magic alone", []byte("ESM1"), true},
		{"artifact", []byte("ESA1\x01\x00"), false},
		{"short", []byte("ESM"), false},
		{"empty", nil, false},
		{"text", []byte("apiVersion: v1"), false},
	} {
		if got := IsModelFile(tc.b); got != tc.want {
			t.Errorf("%s: IsModelFile = %v, want %v", tc.name, got, tc.want)
		}
	}
}
