package policy

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
)

// Bounds of a GraphSAGE encoder as plain data (policy/nn's Sage has the
// same).
const (
	MaxSageLayers = 2
	MaxSageWidth  = 256
	// MaxSageFanout bounds a layer's sampled neighbours.
	MaxSageFanout = 1024
)

// ErrSage reports GraphSAGE weights that do not describe an encoder.
var ErrSage = errors.New("policy: bad GraphSAGE weights")

// SageWeights are a GraphSAGE encoder and the link decoder trained with
// it as plain data (policy/sage's Pretrained runs them): what a model that
// reads dep_affinity carries in its signed artifact (package quant), what
// federated rounds train and aggregate beside the scorer (Flat, AddFlat),
// and what the site leader embeds its dependency graph with. The zero
// value is not valid; DefaultSage is the shipped pre-trained pair.
type SageWeights struct {
	// Inputs per service (policy/sage's NumInputs), Hidden units of the
	// first of two layers (0 with one layer), Dim the embedding width,
	// Layers 1 or 2.
	Inputs int `json:"inputs"`
	Hidden int `json:"hidden"`
	Dim    int `json:"dim"`
	Layers int `json:"layers"`
	// Fanouts are the neighbours sampled per service at each layer (len
	// Layers); Seed draws the samples at inference.
	Fanouts []int  `json:"fanouts"`
	Seed    uint64 `json:"seed"`
	// Params are the encoder's parameters in SageShapes order, row-major.
	Params [][]float32 `json:"params"`
	// Decoder is the link decoder's Dim x Dim matrix (its symmetric part
	// scores a pair), nil for a plain dot product; Scale multiplies a
	// score before the sigmoid (0 when the pair has no decoder: the
	// weights are an encoder alone and publish no partners).
	Decoder []float32 `json:"decoder"`
	Scale   float64   `json:"scale"`
}

// SageShapes are the shapes of an encoder's parameters, in order: W1 (2f
// x out1), B1 (out1), and with two layers W2 (2h x d), B2 (d); out1 is h
// with two layers, d with one.
func SageShapes(f, h, d, layers int) [][]int {
	if layers == 1 {
		return [][]int{{2 * f, d}, {d}}
	}
	return [][]int{{2 * f, h}, {h}, {2 * h, d}, {d}}
}

// Validate checks the shape, the fan-outs and that every value is finite.
func (w *SageWeights) Validate() error {
	switch {
	case w.Inputs <= 0 || w.Inputs > MaxSageWidth || w.Dim <= 0 || w.Dim > MaxSageWidth:
		return fmt.Errorf("%w: %d inputs and %d-wide embeddings (widths 1..%d)", ErrSage, w.Inputs, w.Dim, MaxSageWidth)
	case w.Layers < 1 || w.Layers > MaxSageLayers:
		return fmt.Errorf("%w: %d layers, want 1..%d", ErrSage, w.Layers, MaxSageLayers)
	case w.Layers == 2 && (w.Hidden <= 0 || w.Hidden > MaxSageWidth), w.Layers == 1 && w.Hidden != 0:
		return fmt.Errorf("%w: %d hidden units for %d layers (1..%d with two, 0 with one)", ErrSage, w.Hidden, w.Layers, MaxSageWidth)
	case len(w.Fanouts) != w.Layers:
		return fmt.Errorf("%w: %d fan-outs for %d layers", ErrSage, len(w.Fanouts), w.Layers)
	case w.Decoder != nil && len(w.Decoder) != w.Dim*w.Dim:
		return fmt.Errorf("%w: a decoder of %d values, want %d or none", ErrSage, len(w.Decoder), w.Dim*w.Dim)
	case !finite32(w.Decoder):
		return fmt.Errorf("%w: the decoder has a value that is not finite", ErrSage)
	case math.IsNaN(w.Scale) || w.Scale < 0 || w.Scale > 100:
		return fmt.Errorf("%w: decoder scale %v outside [0, 100]", ErrSage, w.Scale)
	case w.Decoder != nil && w.Scale == 0:
		return fmt.Errorf("%w: a decoder with scale 0", ErrSage)
	case w.Inputs != SageFileInputs:
		return fmt.Errorf("%w: %d inputs per service, the encoder reads %d", ErrSage, w.Inputs, SageFileInputs)
	}
	for i, f := range w.Fanouts {
		if f < 1 || f > MaxSageFanout {
			return fmt.Errorf("%w: fan-out %d of layer %d, want 1..%d", ErrSage, f, i+1, MaxSageFanout)
		}
	}
	shapes := SageShapes(w.Inputs, w.Hidden, w.Dim, w.Layers)
	if len(w.Params) != len(shapes) {
		return fmt.Errorf("%w: %d parameters, the encoder has %d", ErrSage, len(w.Params), len(shapes))
	}
	for i, s := range shapes {
		n := 1
		for _, d := range s {
			n *= d
		}
		if len(w.Params[i]) != n || !finite32(w.Params[i]) {
			return fmt.Errorf("%w: parameter %d has %d values, want %d finite ones (shape %v)", ErrSage, i+1, len(w.Params[i]), n, s)
		}
	}
	return nil
}

func finite32(v []float32) bool {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}

// ID names the weights: "sage-" and 16 hex digits of a SHA-256 over the
// shape, the fan-outs, the sampling seed and the encoder's weights, then,
// when there is a decoder or a scale, the decoder and its scale (the
// partners depend on both). Embeddings carry it (kubefmt.Embeddings'
// encoder), so a reader uses them only with the model that carries the
// same weights.
func (w *SageWeights) ID() string {
	h := sha256.New()
	var b [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	for _, v := range []int{w.Inputs, w.Hidden, w.Dim, w.Layers, len(w.Fanouts)} {
		put(uint64(v))
	}
	for _, f := range w.Fanouts {
		put(uint64(f))
	}
	put(w.Seed)
	for _, p := range w.Params {
		for _, v := range p {
			put(uint64(math.Float32bits(v)))
		}
	}
	if w.Decoder != nil || w.Scale != 0 {
		put(uint64(len(w.Decoder)))
		for _, v := range w.Decoder {
			put(uint64(math.Float32bits(v)))
		}
		put(math.Float64bits(w.Scale))
	}
	return "sage-" + hex.EncodeToString(h.Sum(nil)[:8])
}

// Clone returns a deep copy.
func (w *SageWeights) Clone() *SageWeights {
	c := *w
	c.Fanouts = slices.Clone(w.Fanouts)
	c.Params = make([][]float32, len(w.Params))
	for i, p := range w.Params {
		c.Params[i] = slices.Clone(p)
	}
	c.Decoder = slices.Clone(w.Decoder)
	return &c
}

// NumParams is the number of trained values: the encoder's, then the
// decoder's (the scale is fixed).
func (w *SageWeights) NumParams() int {
	n := len(w.Decoder)
	for _, p := range w.Params {
		n += len(p)
	}
	return n
}

// Flat appends the trained values to dst in Flat order (the encoder's
// parameters in order, then the decoder) and returns it.
func (w *SageWeights) Flat(dst []float32) []float32 {
	for _, p := range w.Params {
		dst = append(dst, p...)
	}
	return append(dst, w.Decoder...)
}

// AddFlat adds scale times delta (NumParams values, in Flat order) to
// the trained values.
func (w *SageWeights) AddFlat(delta []float32, scale float32) error {
	if len(delta) != w.NumParams() {
		return fmt.Errorf("%w: %d values for GraphSAGE weights of %d", ErrShape, len(delta), w.NumParams())
	}
	i := 0
	for _, p := range append(slices.Clone(w.Params), w.Decoder) {
		for j := range p {
			p[j] += scale * delta[i]
			i++
		}
	}
	return nil
}

// The shipped pre-trained encoder and decoder (DefaultSage): what
// policy/sage's DefaultPretrainConfig trains on its training graphs,
// written by `SAGE_WRITE_DEFAULT=1 go test -run TestDefaultIsPretrained
// ./policy/sage` on linux/amd64.
//
//go:embed sage-default.json
var defaultSageFile []byte

// SageFileFormat is the format version EncodeSage writes.
const SageFileFormat = 1

// MaxSageFileBytes bounds a GraphSAGE weights file.
const MaxSageFileBytes = 1 << 20

// sageFile is the JSON form of SageWeights (float32 values round-trip
// exactly).
type sageFile struct {
	Format  int         `json:"format"`
	Encoder sageShape   `json:"encoder"`
	Params  [][]float32 `json:"params"`
	Decoder []float32   `json:"decoder"`
	Scale   float64     `json:"scale"`
}

type sageShape struct {
	Hidden  int    `json:"hidden"`
	Dim     int    `json:"dim"`
	Layers  int    `json:"layers"`
	Fanouts []int  `json:"fanouts"`
	Seed    uint64 `json:"seed"`
}

// EncodeSage writes w as JSON (the shipped file's format; the inputs are
// implied by the format: SageFileInputs).
func EncodeSage(w *SageWeights) ([]byte, error) {
	if w.Inputs != SageFileInputs {
		return nil, fmt.Errorf("%w: %d inputs, the file format has %d", ErrSage, w.Inputs, SageFileInputs)
	}
	f := sageFile{Format: SageFileFormat, Encoder: sageShape{Hidden: w.Hidden, Dim: w.Dim, Layers: w.Layers, Fanouts: w.Fanouts, Seed: w.Seed},
		Params: w.Params, Decoder: w.Decoder, Scale: w.Scale}
	b, err := json.Marshal(&f)
	if err != nil {
		return nil, fmt.Errorf("encode GraphSAGE weights: %w", err)
	}
	return b, nil
}

// SageFileInputs is the number of inputs per service of format 1 files
// (policy/sage's NumInputs, which its tests hold equal).
const SageFileInputs = 10

// DecodeSage reads a file EncodeSage wrote: at most MaxSageFileBytes,
// known keys only, every shape and value checked.
func DecodeSage(b []byte) (*SageWeights, error) {
	if len(b) > MaxSageFileBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrSage, len(b), MaxSageFileBytes)
	}
	var f sageFile
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSage, err)
	}
	if d.More() {
		return nil, fmt.Errorf("%w: trailing data", ErrSage)
	}
	if f.Format != SageFileFormat {
		return nil, fmt.Errorf("%w: format %d, this build reads %d", ErrSage, f.Format, SageFileFormat)
	}
	w := &SageWeights{Inputs: SageFileInputs, Hidden: f.Encoder.Hidden, Dim: f.Encoder.Dim, Layers: f.Encoder.Layers,
		Fanouts: f.Encoder.Fanouts, Seed: f.Encoder.Seed, Params: f.Params, Decoder: f.Decoder, Scale: f.Scale}
	if w.Layers == 1 {
		w.Hidden = 0
	}
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if !(w.Scale > 0) {
		return nil, fmt.Errorf("%w: decoder scale %v, want > 0", ErrSage, w.Scale)
	}
	return w, nil
}

var defaultSage = sync.OnceValues(func() (*SageWeights, error) { return DecodeSage(defaultSageFile) })

// DefaultSage returns a copy of the shipped pre-trained encoder and
// decoder (ID AffinityEncoder): what a model that reads dep_affinity runs
// when it carries no weights of its own.
func DefaultSage() *SageWeights {
	w, err := defaultSage()
	if err != nil {
		panic("policy: the embedded sage-default.json does not decode: " + err.Error())
	}
	return w.Clone()
}
