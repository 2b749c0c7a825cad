package quant

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// FuzzStripSignature: no input makes StripSignature ('edgectl model
// inspect' without keys) panic; a refusal returns nothing and wraps
// ErrArtifact; what it returns is the input less its key ID, with a
// zeroed signature and no key ID, within MaxArtifactBytes, and stripping
// it again changes nothing. Whenever the loader accepts the input signed
// (Decode with the keyring), the stripped bytes decode unsigned to the
// same header and tensors, with the key ID StripSignature reported: what
// inspection shows is what a loader would run. Seeded with real signed
// and unsigned artifacts (float32 and int8).
func FuzzStripSignature(f *testing.F) {
	s, keys := testSigner(f, 1)
	for _, a := range []*Artifact{floatArtifact(f, 1), int8Artifact(f, 2)} {
		for _, by := range []*Signer{s, nil} {
			b, err := a.Encode(by)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte(artifactMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, keyID, err := StripSignature(b)
		if err != nil {
			if out != nil || keyID != "" || !errors.Is(err, ErrArtifact) {
				t.Fatalf("refusal %v does not wrap ErrArtifact, or returned bytes or a key ID", err)
			}
			return
		}
		if len(b) > MaxArtifactBytes || len(out) != len(b)-len(keyID) || out[5] != 0 || !bytes.Equal(out[len(out)-sigLen:], make([]byte, sigLen)) {
			t.Fatalf("%d bytes with key ID %q stripped to %d bytes", len(b), keyID, len(out))
		}
		again, id2, err := StripSignature(out)
		if err != nil || id2 != "" || !bytes.Equal(again, out) {
			t.Fatalf("stripping twice: %v, key ID %q", err, id2)
		}
		signed, err := Decode(b, DecodeOptions{Keys: keys})
		if err != nil {
			return
		}
		plain, err := Decode(out, DecodeOptions{AllowUnsigned: true})
		if err != nil {
			t.Fatalf("the loader accepts the artifact, inspection refuses it stripped: %v", err)
		}
		if signed.KeyID != keyID || !reflect.DeepEqual(plain.Header, signed.Header) || !reflect.DeepEqual(plain.Tensors, signed.Tensors) {
			t.Fatalf("inspection shows another artifact than the loader runs (key ID %q, signed by %q)", keyID, signed.KeyID)
		}
	})
}
