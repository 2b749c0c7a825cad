package quant

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
)

// testSigner is a reproducible key pair (seeded reader).
func testSigner(t testing.TB, seed uint64) (*Signer, *Keyring) {
	t.Helper()
	s, pub, err := GenerateKey(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}))
	if err != nil {
		t.Fatal(err)
	}
	k := &Keyring{}
	if _, err := k.Add(pub); err != nil {
		t.Fatal(err)
	}
	return s, k
}

// signedRoundTrip encodes a signed by s and decodes it with keys: the
// bytes and what a reader gets.
func signedRoundTrip(t testing.TB, a *Artifact, s *Signer, keys *Keyring) ([]byte, *Artifact) {
	t.Helper()
	b, err := a.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b, DecodeOptions{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return b, got
}

func floatArtifact(t testing.TB, seed uint64) *Artifact {
	t.Helper()
	a, err := FromModel(randomModel(t, 16, 8, seed).Float(), Info{Version: 3, Round: 2, Metrics: map[string]float64{"reward": -1.5}, Created: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func int8Artifact(t testing.TB, seed uint64) *Artifact {
	t.Helper()
	a, err := Quantize(randomModel(t, 16, 8, seed).Float(), benchRows(2000, seed), DefaultCalibration(), Info{Version: 4, Created: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestArtifactRoundTrip(t *testing.T) {
	s, keys := testSigner(t, 1)
	for _, tc := range []struct {
		name string
		a    *Artifact
	}{{"float32", floatArtifact(t, 1)}, {"int8", int8Artifact(t, 2)}} {
		t.Run(tc.name, func(t *testing.T) {
			b, got := signedRoundTrip(t, tc.a, s, keys)
			if got.KeyID != s.ID || got.Header.ModelID != tc.a.Header.ModelID || got.Header.Version != tc.a.Header.Version {
				t.Fatalf("header %+v", got.Header)
			}
			for i := range tc.a.Tensors {
				w, g := tc.a.Tensors[i], got.Tensors[i]
				if w.Name != g.Name || !equalInts(w.Shape, g.Shape) || len(w.F32) != len(g.F32) || len(w.I8) != len(g.I8) || len(w.I32) != len(g.I32) {
					t.Fatalf("tensor %d: %s %v != %s %v", i, g.Name, g.Shape, w.Name, w.Shape)
				}
				for j := range w.F32 {
					if math.Float32bits(w.F32[j]) != math.Float32bits(g.F32[j]) {
						t.Fatalf("%s[%d]", w.Name, j)
					}
				}
				for j := range w.I8 {
					if w.I8[j] != g.I8[j] {
						t.Fatalf("%s[%d]", w.Name, j)
					}
				}
				for j := range w.I32 {
					if w.I32[j] != g.I32[j] {
						t.Fatalf("%s[%d]", w.Name, j)
					}
				}
			}
			// Canonical: encoding the decoded artifact gives the same bytes.
			b2, err := got.Encode(s)
			if err != nil || !bytes.Equal(b, b2) {
				t.Fatalf("re-encoding differs: %v", err)
			}
		})
	}
	// A float artifact gives back the model it was made from.
	m := randomModel(t, 16, 8, 1)
	a, _ := FromModel(m.Float(), Info{})
	back, err := a.Float()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nn.FromFloat(back, a.ModelMeta()); err != nil {
		t.Fatalf("the artifact's float model does not build: %v", err)
	}
	x := benchRows(3, 5)
	want, _ := ReferenceScores(m.Float(), x, 3)
	got, _ := ReferenceScores(back, x, 3)
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("score %d: %v != %v", i, got[i], want[i])
		}
	}
}

// TestArtifactDecision: the model's decision rule goes into both
// artifacts, survives the round trip, comes back with the model (and
// with the int8 net: quant/int8net's TestNewReadsArtifact), and is
// covered by the model ID (the same weights with another rule are another
// model) and by the signature; an artifact without a rule keeps its ID.
func TestArtifactDecision(t *testing.T) {
	s, keys := testSigner(t, 1)
	m := randomModel(t, 16, 8, 1)
	plain, err := FromModel(m.Float(), Info{})
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := plain.Encode(s)
	m.Decision = policy.Decision{Band: 4}
	for _, tc := range []struct {
		name string
		make func() (*Artifact, error)
	}{
		{"float32", func() (*Artifact, error) { return FromModel(m.Float(), Info{}) }},
		{"int8", func() (*Artifact, error) { return Quantize(m.Float(), benchRows(500, 1), DefaultCalibration(), Info{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := tc.make()
			if err != nil {
				t.Fatal(err)
			}
			_, got := signedRoundTrip(t, a, s, keys)
			if got.Header.Decision != m.Decision {
				t.Fatalf("decision %+v, want %+v", got.Header.Decision, m.Decision)
			}
			if got.Header.DType == Float32 {
				back, err := got.Float()
				if err != nil || back.Decision != m.Decision {
					t.Fatalf("model's decision %+v (%v), want %+v", back.Decision, err, m.Decision)
				}
				if got.Header.ModelID == plain.Header.ModelID {
					t.Fatal("the same weights with a decision rule kept the plain model's ID")
				}
			}
		})
	}
	// The whole-GPU band is covered by the ID too.
	banded, _ := FromModel(m.Float(), Info{})
	m.Decision.WholeGPUBand = 8
	wide, _ := FromModel(m.Float(), Info{})
	bb, _ := banded.Encode(s)
	wb, _ := wide.Encode(s)
	if bytes.Equal(bb, wb) || banded.Header.ModelID == wide.Header.ModelID {
		t.Fatal("a whole-GPU band did not change the model ID")
	}
	// So is a CPU cap, and its value: two caps are two models.
	m.Decision = policy.Decision{CPUCap: 0.8}
	capped, _ := FromModel(m.Float(), Info{})
	m.Decision = policy.Decision{CPUCap: 0.5}
	capped5, _ := FromModel(m.Float(), Info{})
	for _, a := range []*Artifact{capped, capped5} {
		if _, err := a.Encode(s); err != nil { // sets the model ID
			t.Fatal(err)
		}
	}
	if capped.Header.ModelID == plain.Header.ModelID || capped.Header.ModelID == capped5.Header.ModelID {
		t.Fatalf("CPU caps 0.8 and 0.5 give IDs %s and %s (no rule: %s): the ID must cover the cap", capped.Header.ModelID, capped5.Header.ModelID, plain.Header.ModelID)
	}
	if _, got := signedRoundTrip(t, capped, s, keys); got.Header.Decision != (policy.Decision{CPUCap: 0.8}) {
		t.Fatalf("a capped artifact's decision came back as %+v", got.Header.Decision)
	}
	// A busy cap beside it is a third model.
	m.Decision = policy.Decision{CPUCap: 0.8, BusyCap: 0.9}
	busy, _ := FromModel(m.Float(), Info{})
	if _, err := busy.Encode(s); err != nil {
		t.Fatal(err)
	}
	if busy.Header.ModelID == capped.Header.ModelID || busy.Header.ModelID == plain.Header.ModelID {
		t.Fatalf("a busy cap left the model ID at %s: the ID must cover it", busy.Header.ModelID)
	}
	if _, got := signedRoundTrip(t, busy, s, keys); got.Header.Decision != (policy.Decision{CPUCap: 0.8, BusyCap: 0.9}) {
		t.Fatalf("a busy-capped artifact's decision came back as %+v", got.Header.Decision)
	}
	// A strand weight (the fgd-strand key in the band) is a fourth, and
	// comes back.
	m.Decision = policy.Decision{Band: 6, PressureWeight: 10}
	pressed, _ := FromModel(m.Float(), Info{})
	m.Decision = policy.Decision{Band: 6, PressureWeight: 10, StrandWeight: 20}
	stranded, _ := FromModel(m.Float(), Info{})
	for _, a := range []*Artifact{pressed, stranded} {
		if _, err := a.Encode(s); err != nil {
			t.Fatal(err)
		}
	}
	if stranded.Header.ModelID == pressed.Header.ModelID {
		t.Fatalf("a strand weight left the model ID at %s: the ID must cover it", stranded.Header.ModelID)
	}
	if _, got := signedRoundTrip(t, stranded, s, keys); got.Header.Decision != m.Decision {
		t.Fatalf("a strand-weighted artifact's decision came back as %+v", got.Header.Decision)
	}
	// Without a rule there is no "decision" field, and the ID is the one
	// artifacts always had (schema hash, dtype and payload only).
	if bytes.Contains(pb, []byte(`"decision"`)) {
		t.Fatal("an artifact without a rule wrote a decision field")
	}
	payload, _ := plain.payload()
	old := sha256.New() // the ID's definition before rules, GraphSAGE weights and bounds
	old.Write([]byte(plain.Header.SchemaHash + "\x00" + plain.Header.DType + "\x00"))
	old.Write(payload)
	if want := hex.EncodeToString(old.Sum(nil)); plain.Header.ModelID != want {
		t.Fatalf("model ID %s, want %s", plain.Header.ModelID, want)
	}
}

// resign rewrites the payload and the header through the given edits,
// recomputes the model ID (unless edit set one; "keep" keeps the old one)
// and signs again: what a
// buggy producer holding the key could emit. The decoder's content checks
// must still refuse.
func resign(t *testing.T, b []byte, s *Signer, edit func(h map[string]any), payload func(p []byte) []byte) []byte {
	t.Helper()
	k := int(b[5])
	off := 6 + k
	hl := int(binary.LittleEndian.Uint32(b[off:]))
	var h map[string]any
	if err := json.Unmarshal(b[off+4:off+4+hl], &h); err != nil {
		t.Fatal(err)
	}
	p := append([]byte(nil), b[off+4+hl:len(b)-sigLen]...)
	if payload != nil {
		p = payload(p)
	}
	before := h["model_id"]
	if edit != nil {
		edit(h)
	}
	if h["model_id"] == "keep" { // the edit changed content under the old ID
		h["model_id"] = before
	} else if h["model_id"] == before {
		// the edited header's ID (fields of the wrong type stay zero)
		var hd Header
		hb, _ := json.Marshal(h)
		_ = json.Unmarshal(hb, &hd)
		h["model_id"] = modelID(&hd, p)
	}
	hb, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	out := append([]byte(nil), b[:off]...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(hb)))
	out = append(out, hb...)
	out = append(out, p...)
	return append(out, ed25519.Sign(s.priv, out)...)
}

func TestArtifactRefusals(t *testing.T) {
	s, keys := testSigner(t, 1)
	other, otherKeys := testSigner(t, 2)
	fb, err := floatArtifact(t, 1).Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	qb, err := int8Artifact(t, 1).Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	unsigned, err := floatArtifact(t, 1).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	byOther, _ := floatArtifact(t, 1).Encode(other)
	flip := func(b []byte, i int) []byte { c := append([]byte(nil), b...); c[i] ^= 0x10; return c }
	for _, tc := range []struct {
		name string
		b    []byte
		opt  DecodeOptions
		want error
		msg  string
	}{
		{"empty", nil, DecodeOptions{Keys: keys}, ErrArtifact, "magic"},
		{"wrong magic", append([]byte("GGUF"), fb[4:]...), DecodeOptions{Keys: keys}, ErrArtifact, "magic"},
		{"future format", func() []byte { c := append([]byte(nil), fb...); c[4] = 9; return c }(), DecodeOptions{Keys: keys}, ErrArtifact, "format version 9"},
		{"oversized", make([]byte, MaxArtifactBytes+1), DecodeOptions{Keys: keys}, ErrArtifact, "exceeds"},
		{"unsigned by default", unsigned, DecodeOptions{Keys: keys}, ErrUnsigned, "not signed"},
		{"unknown key", byOther, DecodeOptions{Keys: keys}, ErrUnknownKey, other.ID},
		{"no keyring", fb, DecodeOptions{}, ErrUnknownKey, "no keyring"},
		{"flipped header byte", flip(fb, 60), DecodeOptions{Keys: keys}, ErrSignature, "does not verify"},
		{"flipped payload byte", flip(fb, len(fb)-100), DecodeOptions{Keys: keys}, ErrSignature, "does not verify"},
		{"flipped signature", flip(fb, len(fb)-1), DecodeOptions{Keys: keys}, ErrSignature, "does not verify"},
		{"truncated", fb[:len(fb)-10], DecodeOptions{Keys: keys}, ErrSignature, "does not verify"},
		{"key ID swapped", func() []byte {
			c := append([]byte(nil), byOther...)
			copy(c[6:], s.ID) // claims our key, signed by the other
			return c
		}(), DecodeOptions{Keys: keys}, ErrSignature, "does not verify"},
		{"unsigned with junk signature", func() []byte { c := append([]byte(nil), unsigned...); c[len(c)-1] = 1; return c }(), DecodeOptions{AllowUnsigned: true}, ErrSignature, "non-zero"},
		{"signed by other, other keyring", byOther, DecodeOptions{Keys: otherKeys}, nil, ""},
		// Content checks behind a valid signature.
		{"unknown header field", resign(t, fb, s, func(h map[string]any) { h["extra"] = true }, nil), DecodeOptions{Keys: keys}, ErrArtifact, "unknown field"},
		{"negative band", resign(t, fb, s, func(h map[string]any) { h["decision"] = map[string]any{"band": -2.0} }, nil), DecodeOptions{Keys: keys}, ErrArtifact, "band -2"},
		{"band set under the old ID", resign(t, fb, s, func(h map[string]any) {
			h["decision"], h["model_id"] = map[string]any{"band": 3.0}, "keep"
		}, nil), DecodeOptions{Keys: keys}, ErrArtifact, "model ID"},
		{"stale model ID", resign(t, fb, s, func(h map[string]any) { h["model_id"] = strings.Repeat("0", 64) }, nil), DecodeOptions{Keys: keys}, ErrArtifact, "model ID"},
		{"schema hash", resign(t, fb, s, func(h map[string]any) { h["schema_hash"] = "00" }, nil), DecodeOptions{Keys: keys}, ErrArtifact, "schema hash"},
		{"other schema", resign(t, fb, s, func(h map[string]any) { h["schema_id"] = "x/v2" }, nil), DecodeOptions{Keys: keys}, ErrArtifact, "schema"},
		{"layers do not match the payload", resign(t, fb, s, func(h map[string]any) {
			h["layers"].(map[string]any)["hidden1"] = 17
		}, nil), DecodeOptions{Keys: keys}, ErrArtifact, "payload of"},
		{"payload cut short", resign(t, fb, s, nil, func(p []byte) []byte { return p[:len(p)-4] }), DecodeOptions{Keys: keys}, ErrArtifact, "payload of"},
		{"absurd layers", resign(t, fb, s, func(h map[string]any) {
			h["layers"].(map[string]any)["hidden2"] = 1 << 20
		}, nil), DecodeOptions{Keys: keys}, ErrArtifact, "layer sizes"},
		{"int8 artifact without quant", resign(t, qb, s, func(h map[string]any) { delete(h, "quant") }, nil), DecodeOptions{Keys: keys}, ErrArtifact, ""},
		{"unknown dtype", resign(t, fb, s, func(h map[string]any) { h["dtype"] = "bf16" }, nil), DecodeOptions{Keys: keys}, ErrArtifact, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.b, tc.opt)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err %v, want %v naming %q", err, tc.want, tc.msg)
			}
		})
	}
}

// TestArtifactValueChecks: NaN weights and -128 are refused at encode
// time and, smuggled past it, at decode time.
func TestArtifactValueChecks(t *testing.T) {
	s, keys := testSigner(t, 1)
	a := floatArtifact(t, 1)
	a.Tensors[0].F32[3] = float32(math.Inf(-1))
	if _, err := a.Encode(s); !errors.Is(err, ErrArtifact) || !strings.Contains(err.Error(), "w1[3]") {
		t.Fatalf("encode with Inf: %v", err)
	}
	q := int8Artifact(t, 1)
	b, err := q.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	// find w1's first byte and make it -128, with a fresh model ID
	var off int
	layout, err := Layout(Int8, q.Header.Layers)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range layout {
		if ti.Name == "w1" {
			off = ti.Offset
		}
	}
	bad := resign(t, b, s, nil, func(p []byte) []byte { p[off] = 0x80; return p })
	if _, err := Decode(bad, DecodeOptions{Keys: keys}); !errors.Is(err, ErrArtifact) || !strings.Contains(err.Error(), "-128") {
		t.Fatalf("decode with -128: %v", err)
	}
}

func TestCheckNewer(t *testing.T) {
	cur := &Header{ModelID: "aaaa", Version: 5}
	for _, tc := range []struct {
		name string
		next Header
		ok   bool
	}{
		{"newer", Header{ModelID: "bbbb", Version: 6}, true},
		{"same model again", Header{ModelID: "aaaa", Version: 5}, true},
		{"older", Header{ModelID: "cccc", Version: 4}, false},
		{"same version, other model", Header{ModelID: "dddd", Version: 5}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckNewer(cur, &tc.next)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrRollback)) {
				t.Fatalf("CheckNewer = %v, want ok %v", err, tc.ok)
			}
		})
	}
	if err := CheckNewer(nil, &Header{Version: 0}); err != nil {
		t.Fatalf("first model: %v", err)
	}
}

// TestShortID: a model ID is cut to its first ShortIDLen characters; a
// shorter one is kept whole. A real artifact's ID abbreviates to a prefix
// of itself.
func TestShortID(t *testing.T) {
	for _, tc := range []struct {
		name, id, want string
	}{
		{"empty", "", ""},
		{"shorter", "abc", "abc"},
		{"exactly the length", "0123456789ab", "0123456789ab"},
		{"one more", "0123456789abc", "0123456789ab"},
		{"full ID", strings.Repeat("fe", 32), "fefefefefefe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ShortID(tc.id); got != tc.want {
				t.Fatalf("ShortID(%q) = %q, want %q", tc.id, got, tc.want)
			}
		})
	}
	s, keys := testSigner(t, 3)
	b, err := floatArtifact(t, 1).Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Decode(b, DecodeOptions{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	id := a.Header.ModelID
	if got := ShortID(id); len(got) != ShortIDLen || !strings.HasPrefix(id, got) {
		t.Fatalf("ShortID(%s) = %q, want its first %d characters", id, got, ShortIDLen)
	}
}

func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	s, _ := testSigner(t, 7)
	priv, pub, err := WriteKeyPair(dir, "site", s)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(priv); st.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %v, want 0600", st.Mode().Perm())
	}
	if _, _, err := WriteKeyPair(dir, "site", s); err == nil {
		t.Error("overwrote an existing private key")
	}
	s2, err := ReadSigner(priv)
	if err != nil || s2.ID != s.ID {
		t.Fatalf("ReadSigner: %v %v", s2, err)
	}
	k, err := LoadKeyring(dir)
	if err != nil || len(k.IDs()) != 1 || k.IDs()[0] != s.ID {
		t.Fatalf("LoadKeyring: %v %v", k, err)
	}
	if _, err := k.Lookup(s.ID); err != nil {
		t.Fatal(err)
	}
	// A public key whose ID line was edited is refused.
	b, _ := os.ReadFile(pub)
	forged := filepath.Join(dir, "forged.pub")
	os.WriteFile(forged, []byte(strings.Replace(string(b), s.ID, "ed25519:0000000000000000", 1)), 0o644)
	if _, err := ReadPublicKey(forged); !errors.Is(err, ErrKey) {
		t.Fatalf("forged key ID: %v", err)
	}
	if _, err := ReadSigner(pub); !errors.Is(err, ErrKey) {
		t.Fatalf("public key read as private: %v", err)
	}
	if _, err := LoadKeyring(filepath.Join(dir, "none")); err == nil {
		t.Fatal("missing keyring path accepted")
	}
}

func TestArtifactFile(t *testing.T) {
	s, keys := testSigner(t, 1)
	path := filepath.Join(t.TempDir(), "m.esa")
	if err := WriteFile(path, int8Artifact(t, 3), s); err != nil {
		t.Fatal(err)
	}
	a, err := ReadFile(path, DecodeOptions{Keys: keys})
	if err != nil || a.Header.DType != Int8 {
		t.Fatalf("ReadFile: %v", err)
	}
	if _, err := ReadFile(path, DecodeOptions{}); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("error does not name the file: %v", err)
	}
}

// FuzzDecode: no input crashes the decoder or makes it allocate beyond the
// caps; whatever it accepts re-encodes to the same bytes. Seeds are real
// artifacts (plain, with a decision rule, GraphSAGE weights or input
// bounds), signed and unsigned (the unsigned ones let the fuzzer reach
// the parser behind the signature check).
func FuzzDecode(f *testing.F) {
	s, keys := testSigner(f, 1)
	banded := int8Artifact(f, 3)
	banded.Header.Decision = policy.Decision{Band: 4} // the model ID covers it: Encode recomputes
	_, sageFloat, sageInt8 := sageArtifacts(f)        // with GraphSAGE weights
	bm, _, _ := boundedModel(f, 1)                    // with input bounds
	boundedFloat, err := FromModel(bm.Float(), Info{})
	if err != nil {
		f.Fatal(err)
	}
	boundedInt8, err := Quantize(bm.Float(), benchRows(1000, 4), DefaultCalibration(), Info{})
	if err != nil {
		f.Fatal(err)
	}
	for _, a := range []*Artifact{floatArtifact(f, 1), int8Artifact(f, 2), banded, sageFloat, sageInt8, boundedFloat, boundedInt8} {
		b, err := a.Encode(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if b, err = a.Encode(nil); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, opt := range []DecodeOptions{{Keys: keys}, {AllowUnsigned: true}} {
			a, err := Decode(b, opt)
			if err != nil {
				if !errors.Is(err, ErrArtifact) && !errors.Is(err, ErrSignature) && !errors.Is(err, ErrUnsigned) && !errors.Is(err, ErrUnknownKey) {
					t.Fatalf("unwrapped error %v", err)
				}
				continue
			}
			var signer *Signer
			if a.KeyID != "" {
				signer = s
			}
			again, err := a.Encode(signer)
			if err != nil {
				t.Fatalf("accepted artifact does not re-encode: %v", err)
			}
			if !bytes.Equal(again, b) {
				t.Fatalf("accepted artifact is not canonical")
			}
		}
	})
}

// FuzzReadKeyFile: no key file makes ReadPublicKey or ReadSigner panic; a
// refusal wraps ErrKey; an accepted key's ID is its own (KeyID), and
// written back as WriteKeyPair writes it, it reads back the same. Seeded
// with files WriteKeyPair wrote.
func FuzzReadKeyFile(f *testing.F) {
	dir := f.TempDir()
	s, _ := testSigner(f, 7)
	priv, pub, err := WriteKeyPair(dir, "site", s)
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range []string{priv, pub} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(bytes.ReplaceAll(b, []byte(" "), []byte("\n\t ")))
		f.Add(b[:len(b)-3])
	}
	f.Add([]byte(pubPrefix + " ed25519:0000000000000000 AAAA\n"))
	f.Add(bytes.Repeat([]byte(" "), maxKeyFileBytes+1))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "k.pub")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if k, err := ReadPublicKey(path); err != nil {
			if k != nil || !errors.Is(err, ErrKey) {
				t.Fatalf("refusal %v (key %x) does not wrap ErrKey or returned a key", err, k)
			}
		} else {
			if len(k) != ed25519.PublicKeySize || len(b) > maxKeyFileBytes {
				t.Fatalf("accepted a %d-byte key from %d bytes", len(k), len(b))
			}
			line := fmt.Sprintf("%s %s %s\n", pubPrefix, KeyID(k), base64.StdEncoding.EncodeToString(k))
			if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
				t.Fatal(err)
			}
			if back, err := ReadPublicKey(path); err != nil || !back.Equal(k) {
				t.Fatalf("accepted key %x written back reads as %x (%v)", k, back, err)
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		sg, err := ReadSigner(path)
		if err != nil {
			if sg != nil || !errors.Is(err, ErrKey) {
				t.Fatalf("refusal %v does not wrap ErrKey or returned a signer", err)
			}
			return
		}
		if sg.ID != KeyID(sg.Public()) {
			t.Fatalf("signer %s of key %s", sg.ID, KeyID(sg.Public()))
		}
		again := t.TempDir()
		_, pubPath, err := WriteKeyPair(again, "k", sg)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ReadSigner(filepath.Join(again, "k.key"))
		if err != nil || back.ID != sg.ID || !bytes.Equal(back.Public(), sg.Public()) {
			t.Fatalf("accepted signer %s written back reads as %v (%v)", sg.ID, back, err)
		}
		if p, err := ReadPublicKey(pubPath); err != nil || !p.Equal(sg.Public()) {
			t.Fatalf("its public key reads as %x (%v)", p, err)
		}
	})
}
