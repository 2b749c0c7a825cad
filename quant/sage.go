package quant

import (
	"fmt"
	"slices"

	"github.com/edgesched/edgesched/policy"
)

// SageHeader describes the GraphSAGE encoder and decoder an artifact
// carries (Header.Sage): a model that reads dep_affinity carries the
// weights its partners come from, so the signature and the model ID
// cover them, federated rounds train them with the scorer, and the site
// leader embeds its graph with them. Their tensors follow the model's,
// float32 in both dtypes (the leader runs them in float): sage_w1,
// sage_b1, with two layers sage_w2, sage_b2 (policy.SageShapes), then
// sage_decoder (Dim x Dim) when Decoder is set.
type SageHeader struct {
	// ID is policy.SageWeights.ID of the weights; Decode checks it.
	ID      string  `json:"id"`
	Inputs  int     `json:"inputs"`
	Hidden  int     `json:"hidden"`
	Dim     int     `json:"dim"`
	Layers  int     `json:"layers"`
	Fanouts []int   `json:"fanouts"`
	Seed    uint64  `json:"seed"`
	Decoder bool    `json:"decoder"`
	Scale   float64 `json:"scale"`
}

// sageNames are the encoder's tensors' names, in policy.SageShapes order.
var sageNames = []string{"sage_w1", "sage_b1", "sage_w2", "sage_b2"}

// sageTensors lists the tensors of h's weights, in order.
func sageTensors(h *SageHeader) ([]tensorSpec, error) {
	w := h.weights()
	if err := w.Validate(); err != nil {
		return nil, fmt.Errorf("%w: sage header: %w", ErrArtifact, err)
	}
	var out []tensorSpec
	for i, s := range policy.SageShapes(h.Inputs, h.Hidden, h.Dim, h.Layers) {
		out = append(out, tensorSpec{sageNames[i], Float32, s})
	}
	if h.Decoder {
		out = append(out, tensorSpec{"sage_decoder", Float32, []int{h.Dim, h.Dim}})
	}
	return out, nil
}

// shape is h's shape as SageWeights without values.
func (h *SageHeader) shape() *policy.SageWeights {
	return &policy.SageWeights{Inputs: h.Inputs, Hidden: h.Hidden, Dim: h.Dim, Layers: h.Layers, Fanouts: slices.Clone(h.Fanouts), Seed: h.Seed, Scale: h.Scale}
}

// weights is h's shape as SageWeights with zero values (for checking
// the shape and the fan-outs).
func (h *SageHeader) weights() *policy.SageWeights {
	w := h.shape()
	if h.Layers < 1 || h.Layers > policy.MaxSageLayers || h.Inputs < 1 || h.Inputs > policy.MaxSageWidth ||
		h.Dim < 1 || h.Dim > policy.MaxSageWidth || h.Hidden < 0 || h.Hidden > policy.MaxSageWidth {
		return w // Validate names the problem
	}
	for _, s := range policy.SageShapes(h.Inputs, h.Hidden, h.Dim, h.Layers) {
		n := 1
		for _, d := range s {
			n *= d
		}
		w.Params = append(w.Params, make([]float32, n))
	}
	if h.Decoder {
		w.Decoder = make([]float32, h.Dim*h.Dim)
	}
	return w
}

// sageSection is the header and tensors of w (copied).
func sageSection(w *policy.SageWeights) (*SageHeader, []Tensor, error) {
	if err := w.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrArtifact, err)
	}
	h := &SageHeader{ID: w.ID(), Inputs: w.Inputs, Hidden: w.Hidden, Dim: w.Dim, Layers: w.Layers, Fanouts: slices.Clone(w.Fanouts),
		Seed: w.Seed, Decoder: w.Decoder != nil, Scale: w.Scale}
	specs, err := sageTensors(h)
	if err != nil {
		return nil, nil, err
	}
	vals := append(slices.Clone(w.Params), w.Decoder)
	var ts []Tensor
	for i, s := range specs {
		ts = append(ts, Tensor{Name: s.name, DType: Float32, Shape: s.shape, F32: slices.Clone(vals[i])})
	}
	return h, ts, nil
}

// Sage returns the GraphSAGE weights the artifact carries (a copy), or
// nil when it carries none (Header.Sage).
func (a *Artifact) Sage() *policy.SageWeights {
	h := a.Header.Sage
	if h == nil {
		return nil
	}
	w := h.shape()
	for _, name := range sageNames[:len(policy.SageShapes(h.Inputs, h.Hidden, h.Dim, h.Layers))] {
		if t := a.Tensor(name); t != nil {
			w.Params = append(w.Params, slices.Clone(t.F32))
		}
	}
	if t := a.Tensor("sage_decoder"); t != nil {
		w.Decoder = slices.Clone(t.F32)
	}
	return w
}

// AffinityEncoder is the ID of the GraphSAGE weights whose partners the
// model's dep_affinity is defined on: those it carries, else the shipped
// ones (policy.AffinityEncoder).
func (a *Artifact) AffinityEncoder() string {
	if a.Header.Sage != nil {
		return a.Header.Sage.ID
	}
	return policy.AffinityEncoder
}

// checkSage checks the carried weights against the header's ID (after
// the tensor table and the values were checked).
func (a *Artifact) checkSage() error {
	if a.Header.Sage == nil {
		return nil
	}
	w := a.Sage()
	if err := w.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrArtifact, err)
	}
	if got := w.ID(); got != a.Header.Sage.ID {
		return fmt.Errorf("%w: GraphSAGE weights %s do not match their ID %s", ErrArtifact, got, a.Header.Sage.ID)
	}
	return nil
}
