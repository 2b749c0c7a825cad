package quant

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/edgesched/edgesched/policy"
)

// sageArtifacts are a float32 and an int8 artifact of one model that
// carries GraphSAGE weights (the shipped ones, one decoder value moved so
// their ID is the model's own).
func sageArtifacts(t testing.TB) (*policy.SageWeights, *Artifact, *Artifact) {
	t.Helper()
	w := policy.DefaultSage()
	w.Decoder[3] += 0.25
	m := randomModel(t, 16, 8, 5)
	m.Sage = w
	fa, err := FromModel(m.Float(), Info{Version: 7, Created: time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	qa, err := Quantize(m.Float(), benchRows(2000, 5), DefaultCalibration(), Info{Version: 7, Created: time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	return w, fa, qa
}

// TestArtifactSage: both dtypes carry the model's GraphSAGE weights
// after its own tensors, bit for bit, under their ID; the model ID and
// the signature cover them (the int8 scorer names their ID: quant/int8net's
// TestNewReadsArtifact); the float model read back carries them.
func TestArtifactSage(t *testing.T) {
	s, keys := testSigner(t, 1)
	w, fa, qa := sageArtifacts(t)
	plain := floatArtifact(t, 5)
	for _, a := range []*Artifact{fa, qa} {
		_, got := signedRoundTrip(t, a, s, keys)
		if got.Header.Sage == nil || got.Header.Sage.ID != w.ID() || got.AffinityEncoder() != w.ID() || w.ID() == policy.AffinityEncoder {
			t.Fatalf("%s: sage header %+v, want ID %s", a.Header.DType, got.Header.Sage, w.ID())
		}
		back := got.Sage()
		if back.ID() != w.ID() || len(back.Params) != len(w.Params) {
			t.Fatalf("%s: weights read back are %s", a.Header.DType, back.ID())
		}
		for i := range w.Params {
			for j := range w.Params[i] {
				if math.Float32bits(back.Params[i][j]) != math.Float32bits(w.Params[i][j]) {
					t.Fatalf("%s: parameter %d[%d] changed", a.Header.DType, i, j)
				}
			}
		}
		layout, err := LayoutOf(&got.Header)
		if err != nil || layout[len(layout)-1].Name != "sage_decoder" {
			t.Fatalf("%s: layout ends with %v (%v)", a.Header.DType, layout[len(layout)-1], err)
		}
	}
	// the weights change the model ID (the scorer's tensors are the same)
	if fa.Header.ModelID == plain.Header.ModelID {
		t.Fatal("a model with GraphSAGE weights has the model ID of the one without")
	}
	f, err := fa.Float()
	if err != nil || f.Sage == nil || f.Sage.ID() != w.ID() || len(f.Params) != len(policy.Shapes(1, 1, 1, 1)) {
		t.Fatalf("float model: %v, %d tensors", err, len(f.Params))
	}
	// without weights: the shipped ones
	if plain.AffinityEncoder() != policy.AffinityEncoder || plain.Header.Sage != nil {
		t.Fatalf("a plain artifact names %s", plain.AffinityEncoder())
	}
}

// TestArtifactSageRefusals: a changed weight under the signature, an ID
// that does not match the weights, and a header whose shape does not
// match the payload are refused, each naming the problem.
func TestArtifactSageRefusals(t *testing.T) {
	s, keys := testSigner(t, 1)
	_, fa, _ := sageArtifacts(t)
	b, err := fa.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	// a flipped bit in the last weight (the decoder's): the signature
	flipped := append([]byte(nil), b...)
	flipped[len(flipped)-sigLen-1] ^= 1
	if _, err := Decode(flipped, DecodeOptions{Keys: keys}); !errors.Is(err, ErrSignature) {
		t.Fatalf("a changed weight: %v, want ErrSignature", err)
	}
	for _, c := range []struct {
		name    string
		edit    func(h map[string]any)
		payload func(p []byte) []byte
		want    string
	}{
		{"another ID", func(h map[string]any) { h["sage"].(map[string]any)["id"] = "sage-0000000000000000" }, nil, "do not match their ID"},
		{"changed weights under the old ID", nil, func(p []byte) []byte { p[len(p)-1] ^= 0x40; return p }, "do not match their ID"},
		{"one layer claimed", func(h map[string]any) { h["sage"].(map[string]any)["layers"] = 1 }, nil, "hidden units"},
		{"no decoder claimed", func(h map[string]any) { h["sage"].(map[string]any)["decoder"] = false }, nil, "payload of"},
		{"too wide", func(h map[string]any) { h["sage"].(map[string]any)["dim"] = 4096 }, nil, "widths"},
		{"seed changed under the old IDs", func(h map[string]any) {
			h["sage"].(map[string]any)["seed"] = 99
			h["model_id"] = "keep"
		}, nil, "do not match their ID"},
		{"another weights ID under the old model ID", func(h map[string]any) {
			h["sage"].(map[string]any)["id"] = "sage-0000000000000000"
			h["model_id"] = "keep"
		}, nil, "model ID"},
	} {
		_, err := Decode(resign(t, b, s, c.edit, c.payload), DecodeOptions{Keys: keys})
		if !errors.Is(err, ErrArtifact) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrArtifact naming %q", c.name, err, c.want)
		}
	}
}

// TestArtifactSageFormat: an artifact carrying GraphSAGE weights is format
// 2 (FormatSage) in its first bytes and its header, so a reader built
// before them (which reads format 1 alone) names the format instead of
// the header's unknown "sage" field; one without weights stays format 1,
// byte for byte. The other combinations are refused, so what decodes
// re-encodes to the same bytes (FuzzDecode).
func TestArtifactSageFormat(t *testing.T) {
	s, keys := testSigner(t, 1)
	_, fa, _ := sageArtifacts(t)
	withSage, err := fa.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := floatArtifact(t, 5).Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	if withSage[4] != FormatSage || plain[4] != FormatVersion {
		t.Fatalf("format bytes %d (with weights) and %d (without), want %d and %d", withSage[4], plain[4], FormatSage, FormatVersion)
	}
	// as format byte and header say
	as := func(b []byte, file byte, header int) []byte {
		c := append([]byte(nil), b...)
		c[4] = file
		return resign(t, c, s, func(h map[string]any) { h["format"] = header }, nil)
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string // "" decodes
	}{
		{"as written", withSage, ""},
		{"weights in format 1", as(withSage, 1, 1), "GraphSAGE weights (header sage) in format 1, want 2"},
		{"format 2 without weights", as(plain, 2, 2), "without GraphSAGE weights"},
		{"the header's format is not the file's", as(withSage, 2, 1), "header format 1, the file's is 2"},
		{"format 3 without bounds", as(withSage, 3, 3), "format 3 without input bounds"},
		{"a newer format", as(withSage, 4, 4), "format version 4, this build reads 1 to 3"},
	} {
		a, err := Decode(c.b, DecodeOptions{Keys: keys})
		switch {
		case c.want == "" && (err != nil || a.Header.Sage == nil):
			t.Errorf("%s: %v, want it read with its weights", c.name, err)
		case c.want != "" && (!errors.Is(err, ErrArtifact) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want ErrArtifact naming %q", c.name, err, c.want)
		}
	}
}
