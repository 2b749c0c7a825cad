package sage

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// The shipped pre-trained encoder and decoder (Default): what
// DefaultPretrainConfig trains on TrainingGraphs, written by
// `SAGE_WRITE_DEFAULT=1 go test -run TestDefaultIsPretrained
// ./policy/sage` on linux/amd64.
//
//go:embed default-encoder.json
var defaultFile []byte

// PretrainedFormat is the format version EncodePretrained writes.
const PretrainedFormat = 1

// maxPretrainedBytes bounds a pre-trained file.
const maxPretrainedBytes = 1 << 20

// ErrPretrained marks a pre-trained file that does not decode.
var ErrPretrained = errors.New("sage: bad pre-trained encoder file")

// pretrainedFile is the JSON form: the encoder's shape, its parameters
// in nn.Sage.Params order (float32 values round-trip exactly), the
// decoder's matrix (nil for a dot product) and scale.
type pretrainedFile struct {
	Format  int         `json:"format"`
	Encoder fileConfig  `json:"encoder"`
	Params  [][]float32 `json:"params"`
	Decoder []float32   `json:"decoder"`
	Scale   float64     `json:"scale"`
}

// fileConfig is Config in the file.
type fileConfig struct {
	Hidden  int    `json:"hidden"`
	Dim     int    `json:"dim"`
	Layers  int    `json:"layers"`
	Fanouts []int  `json:"fanouts"`
	Seed    uint64 `json:"seed"`
}

// EncodePretrained writes p as JSON (the shipped file's format).
func EncodePretrained(p *Pretrained) ([]byte, error) {
	f := pretrainedFile{Format: PretrainedFormat, Scale: p.Decoder.Scale, Decoder: p.Decoder.M,
		Encoder: fileConfig{Hidden: p.Encoder.Net.H, Dim: p.Encoder.Net.D, Layers: p.Encoder.Net.Layers, Fanouts: p.Encoder.Fanouts, Seed: p.Encoder.Seed}}
	for _, q := range p.Encoder.Net.Params() {
		f.Params = append(f.Params, q.Values())
	}
	b, err := json.Marshal(&f)
	if err != nil {
		return nil, fmt.Errorf("encode pre-trained encoder: %w", err)
	}
	return b, nil
}

// DecodePretrained reads a file EncodePretrained wrote: at most 1 MiB,
// known keys only, every shape and value checked (finite).
func DecodePretrained(b []byte) (*Pretrained, error) {
	if len(b) > maxPretrainedBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrPretrained, len(b), maxPretrainedBytes)
	}
	var f pretrainedFile
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPretrained, err)
	}
	if d.More() {
		return nil, fmt.Errorf("%w: trailing data", ErrPretrained)
	}
	if f.Format != PretrainedFormat {
		return nil, fmt.Errorf("%w: format %d, this build reads %d", ErrPretrained, f.Format, PretrainedFormat)
	}
	cfg := Config(f.Encoder)
	// the shape comes from the file; the weights too, so the draw is unused
	enc, err := New(cfg, rand.New(rand.NewPCG(0, 0)))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPretrained, err)
	}
	ps := enc.Net.Params()
	if len(f.Params) != len(ps) {
		return nil, fmt.Errorf("%w: %d parameters, the encoder has %d", ErrPretrained, len(f.Params), len(ps))
	}
	for i, q := range ps {
		if len(f.Params[i]) != len(q.Values()) || !finite(f.Params[i]) {
			return nil, fmt.Errorf("%w: parameter %s: %d values, want %d finite ones", ErrPretrained, q.Name, len(f.Params[i]), len(q.Values()))
		}
		copy(q.Values(), f.Params[i])
	}
	dim := cfg.Dim
	if f.Decoder != nil && (len(f.Decoder) != dim*dim || !finite(f.Decoder)) || !(f.Scale > 0) || math.IsInf(f.Scale, 0) {
		return nil, fmt.Errorf("%w: a decoder of %d values (want %d finite ones or none) and scale %v", ErrPretrained, len(f.Decoder), dim*dim, f.Scale)
	}
	return &Pretrained{Encoder: enc, Decoder: &Decoder{D: dim, M: f.Decoder, Scale: f.Scale}}, nil
}

func finite(v []float32) bool {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}
