package policy

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// FuzzDecodeSage: no GraphSAGE weights file makes DecodeSage panic; a
// refusal returns nothing and wraps ErrSage; a file over
// MaxSageFileBytes is refused; accepted weights are valid (Validate, a
// positive scale) and encode (EncodeSage) to a file that decodes to the
// same weights with the same ID. Seeded with the shipped file
// (sage-default.json), its encoder alone, and small one- and two-layer
// files EncodeSage wrote.
func FuzzDecodeSage(f *testing.F) {
	f.Add(defaultSageFile)
	f.Add(defaultSageFile[:len(defaultSageFile)/2])
	f.Add(append(bytes.Clone(defaultSageFile), " {}"...))
	enc := DefaultSage()
	enc.Decoder, enc.Scale = nil, 0 // the encoder alone (refused: no scale)
	for _, w := range []*SageWeights{
		enc,
		{Inputs: SageFileInputs, Dim: 1, Layers: 1, Fanouts: []int{1}, Seed: 1, Params: [][]float32{make([]float32, 2*SageFileInputs), {0.5}}, Scale: 1},
		{Inputs: SageFileInputs, Dim: 2, Layers: 1, Fanouts: []int{3}, Seed: 2, Params: [][]float32{make([]float32, 2*SageFileInputs*2), {0.5, -0.25}},
			Decoder: []float32{1, 0, 0, -1}, Scale: 4},
		{Inputs: SageFileInputs, Hidden: 1, Dim: 1, Layers: 2, Fanouts: []int{2, 1}, Seed: 3,
			Params: [][]float32{make([]float32, 2*SageFileInputs), {1}, {1, -1}, {0}}, Decoder: []float32{2}, Scale: 0.5},
	} {
		b, err := EncodeSage(w)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := DecodeSage(b)
		if err != nil {
			if w != nil || !errors.Is(err, ErrSage) {
				t.Fatalf("refusal %v (weights %v) does not wrap ErrSage or returned weights", err, w)
			}
			return
		}
		if len(b) > MaxSageFileBytes {
			t.Fatalf("accepted a file of %d bytes, over the %d-byte cap", len(b), MaxSageFileBytes)
		}
		if err := w.Validate(); err != nil || !(w.Scale > 0) {
			t.Fatalf("accepted invalid weights (scale %v): %v", w.Scale, err)
		}
		again, err := EncodeSage(w)
		if err != nil {
			t.Fatalf("accepted weights do not encode: %v", err)
		}
		back, err := DecodeSage(again)
		if err != nil {
			t.Fatalf("re-encoded weights refused: %v", err)
		}
		if !reflect.DeepEqual(back, w) || back.ID() != w.ID() {
			t.Fatalf("round trip changed the weights: %s -> %s", w.ID(), back.ID())
		}
	})
}

// TestDecodeSageCap: a file over MaxSageFileBytes is refused from its
// length, even when it is the shipped file padded with white space.
func TestDecodeSageCap(t *testing.T) {
	b := append(bytes.Clone(defaultSageFile), bytes.Repeat([]byte(" "), MaxSageFileBytes+1-len(defaultSageFile))...)
	if _, err := DecodeSage(b); !errors.Is(err, ErrSage) {
		t.Fatalf("a %d-byte file: %v, want ErrSage", len(b), err)
	}
	if _, err := DecodeSage(b[:MaxSageFileBytes]); err != nil {
		t.Fatalf("a file of exactly %d bytes: %v", MaxSageFileBytes, err)
	}
}
