package sage

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/edgesched/edgesched/policy"
)

// The shipped pre-trained encoder and decoder (Default) live in package
// policy (policy.DefaultSage, its sage-default.json), so that the
// scheduler, which links no graph network, knows them too. This file
// converts between that plain form and the networks that run it.

// maxPretrainedBytes bounds a pre-trained file.
const maxPretrainedBytes = policy.MaxSageFileBytes

// ErrPretrained marks a pre-trained file or weights that do not decode.
var ErrPretrained = errors.New("sage: bad pre-trained encoder file")

// EncodePretrained writes p as JSON (policy.EncodeSage's format, the
// shipped file's).
func EncodePretrained(p *Pretrained) ([]byte, error) {
	return policy.EncodeSage(p.Weights())
}

// DecodePretrained reads a file EncodePretrained wrote (policy.DecodeSage:
// at most 1 MiB, known keys only, every shape and value checked).
func DecodePretrained(b []byte) (*Pretrained, error) {
	w, err := policy.DecodeSage(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPretrained, err)
	}
	return FromWeights(w)
}

// Weights returns p's encoder and decoder as plain data (a copy).
func (p *Pretrained) Weights() *policy.SageWeights {
	w := p.Encoder.weights()
	if p.Decoder != nil {
		w.Decoder = append([]float32(nil), p.Decoder.M...)
		w.Scale = p.Decoder.Scale
	}
	return w
}

// ID names p's encoder and decoder together (policy.SageWeights.ID):
// the ID its embeddings and partners are published under.
func (p *Pretrained) ID() string { return p.Weights().ID() }

// weights is the encoder alone as plain data (a copy).
func (e *Encoder) weights() *policy.SageWeights {
	w := &policy.SageWeights{Inputs: e.Net.F, Hidden: e.Net.H, Dim: e.Net.D, Layers: e.Net.Layers,
		Fanouts: append([]int(nil), e.Fanouts...), Seed: e.Seed}
	for _, q := range e.Net.Params() {
		w.Params = append(w.Params, append([]float32(nil), q.Values()...))
	}
	return w
}

// ID names the encoder alone (policy.SageWeights.ID without a decoder):
// what embeddings without partners are published under.
func (e *Encoder) ID() string { return e.weights().ID() }

// FromWeights builds the encoder and decoder of w (validated; a copy).
// A w without a decoder scale gives a nil Decoder (an encoder alone).
func FromWeights(w *policy.SageWeights) (*Pretrained, error) {
	if err := w.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPretrained, err)
	}
	if w.Inputs != NumInputs {
		return nil, fmt.Errorf("%w: %d inputs per service, this encoder reads %d", ErrPretrained, w.Inputs, NumInputs)
	}
	cfg := Config{Hidden: w.Hidden, Dim: w.Dim, Layers: w.Layers, Fanouts: append([]int(nil), w.Fanouts...), Seed: w.Seed}
	// the shape comes from w; the weights too, so the draw is unused
	enc, err := New(cfg, rand.New(rand.NewPCG(0, 0)))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPretrained, err)
	}
	for i, q := range enc.Net.Params() {
		copy(q.Values(), w.Params[i])
	}
	p := &Pretrained{Encoder: enc}
	if w.Scale > 0 {
		p.Decoder = &Decoder{D: w.Dim, M: append([]float32(nil), w.Decoder...), Scale: w.Scale}
	}
	return p, nil
}
