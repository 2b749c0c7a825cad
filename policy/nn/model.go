package nn

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"time"

	"github.com/edgesched/edgesched/internal/atomicfile"
	"github.com/edgesched/edgesched/internal/boundedio"
	"github.com/edgesched/edgesched/policy"
)

// Model file format (float32, until the quant package's signed artifact
// replaces it):
//
//	"ESM1"  magic
//	uint32  header length (little endian), at most MaxHeaderBytes
//	header  JSON (ModelHeader)
//	payload float32 little endian, the parameters in Net.Params order
//	        (length given by the header's layer sizes), then any extra
//	        sections the header lists (checkpoints: optimiser state)
//	uint32  CRC-32 (IEEE) of everything before it
//
// The decoder is strict: every refusal wraps ErrModel and names its reason.
const (
	modelMagic     = "ESM1"
	FormatVersion  = 1
	MaxHeaderBytes = 1 << 20
	MaxModelBytes  = 64 << 20
)

// ErrModel is wrapped by every refusal of a model or checkpoint file.
var ErrModel = errors.New("policy: bad model file")

// ModelHeader is the self-description of a model file.
type ModelHeader struct {
	Format     int    `json:"format"`
	Kind       string `json:"kind"` // "model" or "checkpoint"
	SchemaID   string `json:"schema_id"`
	SchemaHash string `json:"schema_hash"`
	Schema     struct {
		Names []string  `json:"names"`
		Mean  []float32 `json:"mean"`
		Std   []float32 `json:"std"`
		// Lo and Hi are the model's input bounds (policy.Schema.Lo, Hi;
		// absent: none, as in every file before them).
		Lo []float32 `json:"lo,omitempty"`
		Hi []float32 `json:"hi,omitempty"`
	} `json:"schema"`
	Layers     policy.Layers `json:"layers"`
	Activation string        `json:"activation"` // "relu": the critic's, and the scorer's unless HiddenActivations says otherwise
	DType      string        `json:"dtype"`
	// HiddenActivations are the scorer's two hidden layers' activations
	// (Activation names) when one is not ReLU; absent (every file before
	// it, and every all-ReLU network) means ReLU for both.
	HiddenActivations []string `json:"hidden_activations,omitempty"`
	// Decision is the model's decision rule (absent: plain argmax).
	Decision policy.Decision `json:"decision,omitzero"`
	// Sections after the parameters, each the size of the parameters
	// (checkpoints: "adam_m", "adam_v").
	Sections []string `json:"sections,omitempty"`
	// Sage are the model's own GraphSAGE weights (Model.Sage; absent:
	// none, as in every file before them).
	Sage *policy.SageWeights `json:"sage,omitempty"`
	// Meta records provenance: seed, config, training figures.
	Meta    map[string]any `json:"meta,omitempty"`
	Created time.Time      `json:"created"`
	// State is opaque trainer state (checkpoints).
	State json.RawMessage `json:"state,omitempty"`
}

// Model is a trained network with the schema its inputs follow.
type Model struct {
	Schema policy.Schema
	Net    *Net
	Meta   map[string]any
	// Decision is how the model's scores become a choice; the zero value
	// is plain argmax.
	Decision policy.Decision
	// Created is when the model was written; zero for a fresh model.
	Created time.Time
	// Sage are GraphSAGE weights the model carries (its artifacts sign
	// them, federated rounds train them beside the network: Flat), nil
	// for none: then a network that reads dep_affinity reads partners of
	// the shipped pair (SageWeights). edge-coordinator --train-graphsage
	// gives a starting model the shipped pair, to train.
	Sage *policy.SageWeights
}

// SageWeights are the GraphSAGE weights the model's dep_affinity reads
// partners of: its own (Sage), else the shipped ones
// (policy.DefaultSage) when its network reads the feature, else nil.
// Artifacts carry them (Float).
func (m *Model) SageWeights() *policy.SageWeights {
	switch {
	case m.Sage != nil:
		return m.Sage
	case m.Net.ReadsInput(policy.AffinityFeature):
		return policy.DefaultSage()
	}
	return nil
}

// WithoutBounds returns m itself when it has no input bounds
// (policy.Schema.Lo, Hi), else a shallow copy without them (the network
// and the rest shared): the network alone, to compare models trained on
// different ranges.
func (m *Model) WithoutBounds() *Model {
	if m.Schema.Lo == nil && m.Schema.Hi == nil {
		return m
	}
	u := *m
	u.Schema.Lo, u.Schema.Hi = nil, nil
	return &u
}

// UnreadConstants marks the inputs m's network does not read whose
// normalisation statistics are the floor, policy.MinStd: the inputs its
// training found constant, which the trainer leaves unread (policy/ppo).
// Training that starts from m (a fine-tune, a federated round) must keep
// them unread: their statistics say nothing of the values they may take.
// It returns nil when there are none.
func (m *Model) UnreadConstants() []bool {
	var mask []bool
	for f := range min(m.Net.F, len(m.Schema.Std)) {
		if m.Schema.Std[f] <= policy.MinStd && !m.Net.ReadsInput(f) {
			if mask == nil {
				mask = make([]bool, m.Net.F)
			}
			mask[f] = true
		}
	}
	return mask
}

// AffinityEncoder is the ID of SageWeights ("" without them; the shipped
// pair's is the constant policy.AffinityEncoder, so no copy is hashed).
func (m *Model) AffinityEncoder() string {
	switch {
	case m.Sage != nil:
		return m.Sage.ID()
	case m.Net.ReadsInput(policy.AffinityFeature):
		return policy.AffinityEncoder
	}
	return ""
}

// Flat returns what federated updates carry, as one vector: the
// network's parameters (Net.Flat), then those of the model's own
// GraphSAGE weights (policy.SageWeights.Flat).
func (m *Model) Flat() []float32 {
	out := m.Net.Flat()
	if m.Sage != nil {
		out = m.Sage.Flat(out)
	}
	return out
}

// NumParams is the length of Flat.
func (m *Model) NumParams() int {
	n := m.Net.NumParams()
	if m.Sage != nil {
		n += m.Sage.NumParams()
	}
	return n
}

// AddFlat adds scale * delta (in Flat's layout) to the parameters.
func (m *Model) AddFlat(delta []float32, scale float32) error {
	if len(delta) != m.NumParams() {
		return fmt.Errorf("%w: delta of %d values for a model of %d parameters", policy.ErrShape, len(delta), m.NumParams())
	}
	k := m.Net.NumParams()
	if err := m.Net.AddFlat(delta[:k], scale); err != nil {
		return err
	}
	if m.Sage != nil {
		return m.Sage.AddFlat(delta[k:], scale)
	}
	return nil
}

// Clone returns a deep copy of the network and the GraphSAGE weights
// (Meta is shared).
func (m *Model) Clone() *Model {
	c := *m
	c.Net = m.Net.Clone()
	if m.Sage != nil {
		c.Sage = m.Sage.Clone()
	}
	return &c
}

// Validate checks the schema and the network's parameters (shapes and
// finite values).
func (m *Model) Validate() error {
	if err := m.Schema.Validate(); err != nil {
		return err
	}
	if err := m.Decision.Validate(); err != nil {
		return err
	}
	if m.Net == nil || m.Net.F != policy.NumFeatures {
		return fmt.Errorf("%w: network input is not %d features", policy.ErrShape, policy.NumFeatures)
	}
	for i, a := range m.Net.Act {
		if a != ReLU && a != Tanh {
			return fmt.Errorf("%w: hidden layer %d has %v", policy.ErrShape, i+1, a)
		}
	}
	if m.Sage != nil {
		if err := m.Sage.Validate(); err != nil {
			return err
		}
	}
	shapes := policy.Shapes(m.Net.F, m.Net.H1, m.Net.H2, m.Net.HC)
	for i, p := range m.Net.Params() {
		if !slices.Equal(p.Dims(), shapes[i]) {
			return fmt.Errorf("%w: %s is %v, want %v", policy.ErrShape, p.Name, p.Dims(), shapes[i])
		}
		for j, v := range f32(p.T) {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("%w: %s[%d] is %v", ErrModel, p.Name, j, v)
			}
		}
	}
	return nil
}

// Encode writes a model file with optional extra sections (same size as the
// parameters each, finite values) and trainer state.
func Encode(w io.Writer, m *Model, kind string, sections map[string]*Net, state json.RawMessage) error {
	if err := m.Validate(); err != nil {
		return err
	}
	h := ModelHeader{
		Format: FormatVersion, Kind: kind, SchemaID: m.Schema.ID, SchemaHash: m.Schema.Hash(),
		Layers:     policy.Layers{F: m.Net.F, H1: m.Net.H1, H2: m.Net.H2, HC: m.Net.HC},
		Activation: "relu", DType: "float32", Decision: m.Decision, Sage: m.Sage, Meta: m.Meta, Created: m.Created, State: state,
	}
	h.Schema.Names, h.Schema.Mean, h.Schema.Std = m.Schema.Names, m.Schema.Mean, m.Schema.Std
	h.Schema.Lo, h.Schema.Hi = m.Schema.Lo, m.Schema.Hi
	if !m.Net.AllReLU() {
		h.HiddenActivations = []string{m.Net.Act[0].String(), m.Net.Act[1].String()}
	}
	for name := range sections {
		h.Sections = append(h.Sections, name)
	}
	sortStrings(h.Sections)
	hb, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encode model header: %w", err)
	}
	if len(hb) > MaxHeaderBytes {
		return fmt.Errorf("%w: header of %d bytes exceeds %d", ErrModel, len(hb), MaxHeaderBytes)
	}
	var buf bytes.Buffer
	buf.WriteString(modelMagic)
	_ = binary.Write(&buf, binary.LittleEndian, uint32(len(hb)))
	buf.Write(hb)
	writeParams := func(n *Net) {
		for _, p := range n.Params() {
			_ = binary.Write(&buf, binary.LittleEndian, f32(p.T))
		}
	}
	writeParams(m.Net)
	for _, name := range h.Sections {
		s := sections[name]
		if s == nil || s.F != m.Net.F || s.H1 != m.Net.H1 || s.H2 != m.Net.H2 || s.HC != m.Net.HC {
			return fmt.Errorf("%w: section %s does not match the network's shape", policy.ErrShape, name)
		}
		if err := finiteSection(name, s); err != nil {
			return err
		}
		writeParams(s)
	}
	_ = binary.Write(&buf, binary.LittleEndian, crc32.ChecksumIEEE(buf.Bytes()))
	_, err = w.Write(buf.Bytes())
	return err
}

// Decoded is a parsed model file.
type Decoded struct {
	Model    *Model
	Header   ModelHeader
	Sections map[string]*Net
}

// IsModelFile reports whether b starts as a model or checkpoint file does
// (its magic), without decoding it: a cheap test for tools that read
// other formats (edgectl model inspect, which reads artifacts) to say
// what they were given.
func IsModelFile(b []byte) bool { return bytes.HasPrefix(b, []byte(modelMagic)) }

// Decode parses and verifies a model file: magic, sizes, checksum, format
// version, schema (ID, names and hash must be this build's), layer sizes,
// finite weights and finite section values, in that order.
func Decode(b []byte) (*Decoded, error) {
	if len(b) > MaxModelBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrModel, len(b), MaxModelBytes)
	}
	if len(b) < 12 || string(b[:4]) != modelMagic {
		return nil, fmt.Errorf("%w: not an edgesched model (magic)", ErrModel)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch (corrupt or truncated)", ErrModel)
	}
	hl := binary.LittleEndian.Uint32(b[4:8])
	if hl > MaxHeaderBytes || int(hl) > len(body)-8 {
		return nil, fmt.Errorf("%w: header length %d out of range", ErrModel, hl)
	}
	var h ModelHeader
	dec := json.NewDecoder(bytes.NewReader(b[8 : 8+hl]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrModel, err)
	}
	switch {
	case h.Format != FormatVersion:
		return nil, fmt.Errorf("%w: format version %d, this build reads %d", ErrModel, h.Format, FormatVersion)
	case h.Kind != "model" && h.Kind != "checkpoint":
		return nil, fmt.Errorf("%w: kind %q", ErrModel, h.Kind)
	case h.Activation != "relu" || h.DType != "float32":
		return nil, fmt.Errorf("%w: %s/%s network, this build runs relu/float32", ErrModel, h.Activation, h.DType)
	}
	schema := policy.Schema{ID: h.SchemaID, Names: h.Schema.Names, Mean: h.Schema.Mean, Std: h.Schema.Std, Lo: h.Schema.Lo, Hi: h.Schema.Hi}
	if err := schema.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrModel, err)
	}
	if got := schema.Hash(); got != h.SchemaHash {
		return nil, fmt.Errorf("%w: schema hash %s does not match its statistics (%s)", ErrModel, h.SchemaHash, got)
	}
	var act [2]Activation
	if h.HiddenActivations != nil {
		if len(h.HiddenActivations) != 2 {
			return nil, fmt.Errorf("%w: %d hidden activations, the network has 2 hidden layers", ErrModel, len(h.HiddenActivations))
		}
		for i, s := range h.HiddenActivations {
			a, err := ParseActivation(s)
			if err != nil {
				return nil, fmt.Errorf("%w: hidden layer %d: %v", ErrModel, i+1, err)
			}
			act[i] = a
		}
	}
	l := h.Layers
	if l.F != policy.NumFeatures || l.H1 <= 0 || l.H2 <= 0 || l.HC <= 0 || l.H1 > 4096 || l.H2 > 4096 || l.HC > 4096 {
		return nil, fmt.Errorf("%w: layer sizes %+v", ErrModel, l)
	}
	if len(h.Sections) > 4 {
		return nil, fmt.Errorf("%w: %d sections", ErrModel, len(h.Sections))
	}
	var perNet int
	for _, s := range policy.Shapes(l.F, l.H1, l.H2, l.HC) {
		n := 1
		for _, d := range s {
			n *= d
		}
		perNet += n
	}
	payload := body[8+hl:]
	if want := perNet * 4 * (1 + len(h.Sections)); len(payload) != want {
		return nil, fmt.Errorf("%w: payload of %d bytes, the layer sizes need %d", ErrModel, len(payload), want)
	}
	read := func(off int) (*Net, error) {
		n, err := NewNet(l.F, l.H1, l.H2, l.HC, nil)
		if err != nil {
			return nil, err
		}
		n.Act = act
		for _, p := range n.Params() {
			d := f32(p.T)
			for i := range d {
				d[i] = math.Float32frombits(binary.LittleEndian.Uint32(payload[off:]))
				off += 4
			}
		}
		return n, nil
	}
	net, err := read(0)
	if err != nil {
		return nil, err
	}
	m := &Model{Schema: schema, Net: net, Meta: h.Meta, Decision: h.Decision, Created: h.Created, Sage: h.Sage}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrModel, err)
	}
	out := &Decoded{Model: m, Header: h, Sections: map[string]*Net{}}
	for i, name := range h.Sections {
		s, err := read((i + 1) * perNet * 4)
		if err != nil {
			return nil, err
		}
		if err := finiteSection(name, s); err != nil {
			return nil, err
		}
		out.Sections[name] = s
	}
	return out, nil
}

// finiteSection refuses a section (a checkpoint's optimiser moments or
// best network) holding a NaN or an infinity, as Validate refuses one in
// the network: a trainer resuming from it would make every weight NaN.
func finiteSection(name string, s *Net) error {
	for _, p := range s.Params() {
		for j, v := range f32(p.T) {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("%w: section %s: %s[%d] is %v", ErrModel, name, p.Name, j, v)
			}
		}
	}
	return nil
}

// WriteFile encodes a model to path atomically (temporary file + rename).
func WriteFile(path string, m *Model, kind string, sections map[string]*Net, state json.RawMessage) error {
	var buf bytes.Buffer
	if err := Encode(&buf, m, kind, sections, state); err != nil {
		return err
	}
	// a temporary file beside it, synced, then renamed: on error path is
	// unchanged and nothing is left behind (internal/atomicfile)
	if err := atomicfile.Write(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write model: %w", err)
	}
	return nil
}

// ReadFile reads and decodes a model or checkpoint file (a regular file
// of at most MaxModelBytes: internal/boundedio).
func ReadFile(path string) (*Decoded, error) {
	b, err := boundedio.ReadFile(context.Background(), path, MaxModelBytes)
	if err != nil {
		return nil, fmt.Errorf("read model: %w", err)
	}
	d, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

func sortStrings(s []string) { slices.Sort(s) }

// Float returns m as plain data (policy.FloatModel) for package quant,
// sharing m's parameters; its NewScorer is NewFloatScorer(m).
func (m *Model) Float() *policy.FloatModel {
	f := &policy.FloatModel{Schema: m.Schema, Decision: m.Decision,
		Layers: policy.Layers{F: m.Net.F, H1: m.Net.H1, H2: m.Net.H2, HC: m.Net.HC},
		Act:    [2]string{m.Net.Act[0].String(), m.Net.Act[1].String()},
		Sage:   m.Sage,
		NewScorer: func() (policy.Scorer, error) {
			sc, err := NewFloatScorer(m)
			if err != nil {
				return nil, err
			}
			return sc, nil
		}}
	for _, p := range m.Net.Params() {
		f.Params = append(f.Params, p.Values())
	}
	return f
}

// FromFloat builds a model from plain data (a float32 artifact's, quant's
// Artifact.Float), copying the parameters, and validates it.
func FromFloat(f *policy.FloatModel, meta map[string]any) (*Model, error) {
	l := f.Layers
	net, err := NewNet(l.F, l.H1, l.H2, l.HC, nil)
	if err != nil {
		return nil, err
	}
	for i, a := range f.Act {
		if net.Act[i], err = ParseActivation(a); err != nil {
			return nil, err
		}
	}
	ps := net.Params()
	if len(f.Params) != len(ps) {
		return nil, fmt.Errorf("%w: %d parameter tensors, want %d", policy.ErrShape, len(f.Params), len(ps))
	}
	for i, p := range ps {
		if len(f.Params[i]) != len(p.Values()) {
			return nil, fmt.Errorf("%w: %s has %d values, want %d", policy.ErrShape, p.Name, len(f.Params[i]), len(p.Values()))
		}
		copy(p.Values(), f.Params[i])
	}
	m := &Model{Schema: f.Schema, Net: net, Meta: meta, Decision: f.Decision}
	if f.Sage != nil {
		m.Sage = f.Sage.Clone()
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// FloatSource is what a float32 artifact (quant's Artifact) offers for a
// model to be rebuilt from it, without policy/nn importing quant.
type FloatSource interface {
	Float() (*policy.FloatModel, error)
	ModelMeta() map[string]any
}

// FromArtifact rebuilds the float model of a float32 artifact.
func FromArtifact(a FloatSource) (*Model, error) {
	f, err := a.Float()
	if err != nil {
		return nil, err
	}
	return FromFloat(f, a.ModelMeta())
}
