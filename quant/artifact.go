package quant

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/edgesched/edgesched/internal/atomicfile"
	"github.com/edgesched/edgesched/internal/boundedio"
	"github.com/edgesched/edgesched/policy"
)

// Artifact file format (format 1), the one model format of the system:
// files, ConfigMaps and NATS objects all carry these bytes.
//
//	"ESA1"  magic
//	uint8   format version (1; 2 for an artifact carrying GraphSAGE
//	        weights, so a reader built before them says the format is
//	        newer instead of refusing the header's "sage" field)
//	uint8   key ID length K (0: unsigned), at most 64
//	K bytes key ID (ASCII, see KeyID)
//	uint32  header length H (little endian), at most MaxHeaderBytes
//	H bytes header: JSON (Header), written by encoding/json from a struct,
//	        so the bytes are canonical for the content
//	payload the tensors of LayoutOf(header), back to back, little
//	        endian (the layout is fixed by the header's dtype and layers,
//	        and its GraphSAGE weights' shape when it has them)
//	64 bytes ed25519 signature over every byte before it (zeros unsigned)
//
// The key ID sits before the header so the decoder verifies the signature
// before it parses anything else.
const (
	artifactMagic = "ESA1"
	// FormatVersion is the format of an artifact without GraphSAGE
	// weights or input bounds, FormatSage of one with GraphSAGE weights
	// (Header.Sage) and no bounds, FormatBounds of one with input bounds
	// (SchemaStats.Lo, Hi), GraphSAGE weights or not; decoders read all
	// three, and refuse each with another's content, so decoding and
	// re-encoding gives the same bytes (and a build that reads only the
	// first two refuses an artifact with bounds by its format number
	// instead of running it without them).
	FormatVersion  = 1
	FormatSage     = 2
	FormatBounds   = 3
	MaxHeaderBytes = 256 << 10
	// MaxArtifactBytes caps an artifact (the policies are kilobytes).
	MaxArtifactBytes = 16 << 20
	maxKeyIDLen      = 64
	sigLen           = ed25519.SignatureSize
)

// DTypes of artifacts and tensors.
const (
	Float32 = "float32"
	Int8    = "int8"
	Int32   = "int32"
)

// Errors of artifacts.
var (
	ErrArtifact  = errors.New("quant: bad artifact")
	ErrSignature = errors.New("quant: bad signature")
	ErrUnsigned  = errors.New("quant: artifact is not signed")
	ErrRollback  = errors.New("quant: model version does not increase")
)

// Header describes an artifact.
type Header struct {
	Format int `json:"format"`
	// ModelID is the content address: the SHA-256 of the schema hash, the
	// dtype and the payload.
	ModelID string `json:"model_id"`
	// Version increases with every model the coordinator publishes; loaders
	// refuse to go back (CheckNewer).
	Version uint64 `json:"version"`
	// Parent is the ModelID this model was trained or quantized from.
	Parent     string        `json:"parent,omitempty"`
	Round      uint64        `json:"round"`
	SchemaID   string        `json:"schema_id"`
	SchemaHash string        `json:"schema_hash"`
	Schema     SchemaStats   `json:"schema"`
	Layers     policy.Layers `json:"layers"`
	Activation string        `json:"activation"`
	DType      string        `json:"dtype"`
	Quant      *QuantParams  `json:"quant,omitempty"`
	// Decision is the model's decision rule (policy.Decision; absent:
	// plain argmax). The model ID covers it when it is set.
	Decision policy.Decision `json:"decision,omitzero"`
	// Sage describes the GraphSAGE weights the model carries (their
	// tensors follow the model's; policy.FloatModel.Sage); absent when it
	// carries none (a model that does not read dep_affinity, or one made
	// before models carried them: it reads the shipped pair's partners).
	Sage *SageHeader `json:"sage,omitempty"`
	// Metrics are training or evaluation figures (finite numbers).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	Created time.Time          `json:"created"`
}

// SchemaStats are the feature schema's normalisation. The feature names
// are not repeated: the schema ID fixes them, and the schema hash covers
// them.
type SchemaStats struct {
	Mean []float32 `json:"mean"`
	Std  []float32 `json:"std"`
	// Lo and Hi are the model's input bounds (policy.Schema.Lo, Hi): both
	// or neither (FormatBounds). Every scorer of the artifact holds its
	// raw inputs within them; the model ID covers them when set.
	Lo []float32 `json:"lo,omitempty"`
	Hi []float32 `json:"hi,omitempty"`
}

// QuantParams describe an int8 artifact's quantization.
type QuantParams struct {
	// Scheme is QuantScheme.
	Scheme string `json:"scheme"`
	// Calibration is "minmax" or "percentile:P", followed by
	// ",rounding:adaptive" when the weights were rounded adaptively.
	Calibration string `json:"calibration"`
	// Samples is the number of candidate rows calibrated on.
	Samples int `json:"samples"`
}

// QuantScheme names the int8 layout: int8 inputs (one scale per
// feature), symmetric int8 weights with one scale per output channel,
// int32 biases and accumulators, and unsigned 8-bit activations after
// each ReLU (one scale per channel). Every layer's input scales are
// folded into its weights, so requantization is one multiplier per
// output channel.
const QuantScheme = "int8-weights-u8-activations-per-channel"

// TensorInfo locates a tensor in the payload (see Layout).
type TensorInfo struct {
	Name   string `json:"name"`
	DType  string `json:"dtype"`
	Shape  []int  `json:"shape"`
	Offset int    `json:"offset"`
	Bytes  int    `json:"bytes"`
}

// Tensor is a named tensor: exactly one of F32, I8, I32 is set, by DType.
type Tensor struct {
	Name  string
	DType string
	Shape []int
	F32   []float32
	I8    []int8
	I32   []int32
}

func (t *Tensor) size() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

func dtypeBytes(d string) int {
	switch d {
	case Float32, Int32:
		return 4
	case Int8:
		return 1
	}
	return 0
}

// Artifact is a decoded (or to be encoded) model artifact.
type Artifact struct {
	Header  Header
	Tensors []Tensor
	// KeyID is who signed it ("" when unsigned).
	KeyID string
}

// Tensor returns the tensor with a name, or nil.
func (a *Artifact) Tensor(name string) *Tensor {
	for i := range a.Tensors {
		if a.Tensors[i].Name == name {
			return &a.Tensors[i]
		}
	}
	return nil
}

// Schema returns the artifact's feature schema.
func (a *Artifact) Schema() policy.Schema {
	s := a.Header.Schema
	return policy.Schema{ID: a.Header.SchemaID, Names: policy.NewSchema().Names, Mean: s.Mean, Std: s.Std, Lo: s.Lo, Hi: s.Hi}
}

// bounded reports whether the header carries input bounds.
func (h *Header) bounded() bool { return h.Schema.Lo != nil || h.Schema.Hi != nil }

func (a *Artifact) payload() ([]byte, error) {
	var buf bytes.Buffer
	for i := range a.Tensors {
		t := &a.Tensors[i]
		n := t.size()
		var got int
		switch t.DType {
		case Float32:
			got = len(t.F32)
			for _, v := range t.F32 {
				_ = binary.Write(&buf, binary.LittleEndian, math.Float32bits(v))
			}
		case Int8:
			got = len(t.I8)
			for _, v := range t.I8 {
				buf.WriteByte(byte(v))
			}
		case Int32:
			got = len(t.I32)
			_ = binary.Write(&buf, binary.LittleEndian, t.I32)
		default:
			return nil, fmt.Errorf("%w: tensor %s has dtype %q", ErrArtifact, t.Name, t.DType)
		}
		if got != n {
			return nil, fmt.Errorf("%w: tensor %s has %d values for shape %v", ErrArtifact, t.Name, got, t.Shape)
		}
	}
	return buf.Bytes(), nil
}

func modelID(hd *Header, payload []byte) string {
	h := sha256.New()
	h.Write([]byte(hd.SchemaHash))
	h.Write([]byte{0})
	h.Write([]byte(hd.DType))
	h.Write([]byte{0})
	if d := hd.Decision; d != (policy.Decision{}) {
		// Only a set rule is hashed, so artifacts without one keep the
		// IDs they always had.
		h.Write([]byte("decision.band=" + strconv.FormatFloat(d.Band, 'g', -1, 64)))
		h.Write([]byte{0})
		if d.WholeGPUBand != 0 {
			h.Write([]byte("decision.whole_gpu_band=" + strconv.FormatFloat(d.WholeGPUBand, 'g', -1, 64)))
			h.Write([]byte{0})
		}
		if d.PressureWeight != 0 {
			h.Write([]byte("decision.pressure_weight=" + strconv.FormatFloat(d.PressureWeight, 'g', -1, 64)))
			h.Write([]byte{0})
		}
		if d.StrandWeight != 0 {
			h.Write([]byte("decision.strand_weight=" + strconv.FormatFloat(d.StrandWeight, 'g', -1, 64)))
			h.Write([]byte{0})
		}
		if d.CPUCap != 0 {
			h.Write([]byte("decision.cpu_cap=" + strconv.FormatFloat(d.CPUCap, 'g', -1, 64)))
			h.Write([]byte{0})
		}
		if d.BusyCap != 0 {
			h.Write([]byte("decision.busy_cap=" + strconv.FormatFloat(d.BusyCap, 'g', -1, 64)))
			h.Write([]byte{0})
		}
	}
	if sage := hd.Sage; sage != nil {
		// the weights' ID covers what the payload does not: the shape,
		// fan-outs, sampling seed and scale (only set, as the rule)
		h.Write([]byte("sage=" + sage.ID))
		h.Write([]byte{0})
	}
	if hd.bounded() {
		// input bounds (only set, as the rule): each value's bits
		for _, side := range []struct {
			name string
			v    []float32
		}{{"schema.lo=", hd.Schema.Lo}, {"schema.hi=", hd.Schema.Hi}} {
			h.Write([]byte(side.name))
			for _, v := range side.v {
				h.Write(binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)))
			}
			h.Write([]byte{0})
		}
	}
	h.Write(payload)
	return hex.EncodeToString(h.Sum(nil))
}

// Encode validates the artifact, fills in the header's format, model ID
// and tensor table, and returns its bytes signed by s (unsigned when s is
// nil: only for local experiments; loaders refuse them by default).
func (a *Artifact) Encode(s *Signer) ([]byte, error) {
	payload, err := a.payload()
	if err != nil {
		return nil, err
	}
	a.Header.Format = FormatVersion
	switch {
	case a.Header.bounded():
		a.Header.Format = FormatBounds
	case a.Header.Sage != nil:
		a.Header.Format = FormatSage
	}
	a.Header.ModelID = modelID(&a.Header, payload)
	if err := a.validate(); err != nil {
		return nil, err
	}
	hb, err := json.Marshal(a.Header)
	if err != nil {
		return nil, fmt.Errorf("encode header: %w", err)
	}
	if len(hb) > MaxHeaderBytes {
		return nil, fmt.Errorf("%w: header of %d bytes exceeds %d", ErrArtifact, len(hb), MaxHeaderBytes)
	}
	a.KeyID = ""
	if s != nil {
		a.KeyID = s.ID
	}
	var buf bytes.Buffer
	buf.WriteString(artifactMagic)
	buf.WriteByte(byte(a.Header.Format))
	buf.WriteByte(byte(len(a.KeyID)))
	buf.WriteString(a.KeyID)
	_ = binary.Write(&buf, binary.LittleEndian, uint32(len(hb)))
	buf.Write(hb)
	buf.Write(payload)
	if buf.Len()+sigLen > MaxArtifactBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrArtifact, buf.Len()+sigLen, MaxArtifactBytes)
	}
	sig := make([]byte, sigLen)
	if s != nil {
		sig = s.Sign(buf.Bytes())
	}
	buf.Write(sig)
	return buf.Bytes(), nil
}

// DecodeOptions say which artifacts to accept. The zero value accepts
// nothing signed (no keys) and nothing unsigned.
type DecodeOptions struct {
	// Keys are the trusted signing keys.
	Keys *Keyring
	// AllowUnsigned accepts artifacts without a signature (inspection and
	// local experiments only).
	AllowUnsigned bool
}

// Decode verifies and parses an artifact: size, magic, format, key ID and
// signature first (nothing else is read before the signature holds), then
// the header (strict JSON), the schema (this build's, hash matching its
// statistics), layer sizes, the tensor table against the payload, and
// every value (finite floats, int8 in [-127, 127]). Every refusal wraps
// ErrArtifact, ErrSignature, ErrUnsigned or ErrUnknownKey and names the
// problem.
func Decode(b []byte, opt DecodeOptions) (*Artifact, error) {
	if len(b) > MaxArtifactBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrArtifact, len(b), MaxArtifactBytes)
	}
	if len(b) < 4+2+4+sigLen || string(b[:4]) != artifactMagic {
		return nil, fmt.Errorf("%w: not an edgesched artifact (magic)", ErrArtifact)
	}
	if b[4] < FormatVersion || b[4] > FormatBounds {
		return nil, fmt.Errorf("%w: format version %d, this build reads %d to %d", ErrArtifact, b[4], FormatVersion, FormatBounds)
	}
	k := int(b[5])
	if k > maxKeyIDLen || 6+k+4+sigLen > len(b) {
		return nil, fmt.Errorf("%w: key ID length %d out of range", ErrArtifact, k)
	}
	keyID := string(b[6 : 6+k])
	body, sig := b[:len(b)-sigLen], b[len(b)-sigLen:]
	if k == 0 {
		if !opt.AllowUnsigned {
			return nil, ErrUnsigned
		}
		if !bytes.Equal(sig, make([]byte, sigLen)) {
			return nil, fmt.Errorf("%w: unsigned artifact with a non-zero signature block", ErrSignature)
		}
	} else {
		if opt.Keys == nil {
			return nil, fmt.Errorf("%w: %q (no keyring given)", ErrUnknownKey, keyID)
		}
		pub, err := opt.Keys.Lookup(keyID)
		if err != nil {
			return nil, err
		}
		if !ed25519.Verify(pub, body, sig) {
			return nil, fmt.Errorf("%w: signature by %s does not verify (tampered or corrupt)", ErrSignature, keyID)
		}
	}
	off := 6 + k
	hl := int(binary.LittleEndian.Uint32(body[off:]))
	off += 4
	if hl > MaxHeaderBytes || hl > len(body)-off {
		return nil, fmt.Errorf("%w: header length %d out of range", ErrArtifact, hl)
	}
	a := &Artifact{KeyID: keyID}
	dec := json.NewDecoder(bytes.NewReader(body[off : off+hl]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a.Header); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrArtifact, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: header: trailing data", ErrArtifact)
	}
	payload := body[off+hl:]
	switch {
	case a.Header.Format != int(b[4]):
		return nil, fmt.Errorf("%w: header format %d, the file's is %d", ErrArtifact, a.Header.Format, b[4])
	case a.Header.Format == FormatSage && a.Header.Sage == nil:
		return nil, fmt.Errorf("%w: format %d without GraphSAGE weights (header sage)", ErrArtifact, FormatSage)
	case a.Header.Format == FormatVersion && a.Header.Sage != nil:
		return nil, fmt.Errorf("%w: GraphSAGE weights (header sage) in format %d, want %d", ErrArtifact, FormatVersion, FormatSage)
	case a.Header.Format == FormatBounds && !a.Header.bounded():
		return nil, fmt.Errorf("%w: format %d without input bounds (header schema.lo, schema.hi)", ErrArtifact, FormatBounds)
	case a.Header.Format != FormatBounds && a.Header.bounded():
		return nil, fmt.Errorf("%w: input bounds (header schema.lo, schema.hi) in format %d, want %d", ErrArtifact, a.Header.Format, FormatBounds)
	}
	// The layout follows from the dtype and the layer sizes: tensors in
	// order, back to back, covering the payload exactly.
	layout, err := LayoutOf(&a.Header)
	if err != nil {
		return nil, err
	}
	if end := layout[len(layout)-1].Offset + layout[len(layout)-1].Bytes; end != len(payload) {
		return nil, fmt.Errorf("%w: payload of %d bytes, a %s artifact of layers %+v has %d", ErrArtifact, len(payload), a.Header.DType, a.Header.Layers, end)
	}
	for _, ti := range layout {
		t := Tensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape}
		raw := payload[ti.Offset : ti.Offset+ti.Bytes]
		n := ti.Bytes / dtypeBytes(ti.DType)
		switch ti.DType {
		case Float32:
			t.F32 = make([]float32, n)
			for i := range t.F32 {
				t.F32[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		case Int32:
			t.I32 = make([]int32, n)
			for i := range t.I32 {
				t.I32[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		case Int8:
			t.I8 = make([]int8, n)
			for i := range t.I8 {
				t.I8[i] = int8(raw[i])
			}
		}
		a.Tensors = append(a.Tensors, t)
	}
	if got := modelID(&a.Header, payload); got != a.Header.ModelID {
		return nil, fmt.Errorf("%w: model ID %s does not match the content (%s)", ErrArtifact, a.Header.ModelID, got)
	}
	if err := a.validate(); err != nil {
		return nil, err
	}
	return a, nil
}

// StripSignature returns an artifact's bytes as if unsigned (key ID
// removed, signature block zeroed) and the key ID it carried, so its
// content can be checked by a tool that has no keyring (inspection). A
// loader never does this.
func StripSignature(b []byte) ([]byte, string, error) {
	if len(b) > MaxArtifactBytes || len(b) < 4+2+4+sigLen || string(b[:4]) != artifactMagic {
		return nil, "", fmt.Errorf("%w: not an edgesched artifact (magic)", ErrArtifact)
	}
	k := int(b[5])
	if k > maxKeyIDLen || 6+k+4+sigLen > len(b) {
		return nil, "", fmt.Errorf("%w: key ID length %d out of range", ErrArtifact, k)
	}
	out := make([]byte, 0, len(b)-k)
	out = append(out, b[:5]...)
	out = append(out, 0)
	out = append(out, b[6+k:len(b)-sigLen]...)
	out = append(out, make([]byte, sigLen)...)
	return out, string(b[6 : 6+k]), nil
}

// shapeSize multiplies dimensions, refusing non-positive ones and sizes
// beyond the artifact cap.
func shapeSize(shape []int) (int, bool) {
	if len(shape) == 0 || len(shape) > 4 {
		return 0, false
	}
	n := 1
	for _, d := range shape {
		if d <= 0 || d > MaxArtifactBytes || n > MaxArtifactBytes/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// tensorSpec is what a tensor of a dtype's artifact must be.
type tensorSpec struct {
	name, dtype string
	shape       []int
}

// expectedTensors lists the tensors of an artifact with header h, in
// order: the model's, then its GraphSAGE weights'.
func expectedTensors(h *Header) ([]tensorSpec, error) {
	specs, err := modelTensors(h.DType, h.Layers)
	if err != nil || h.Sage == nil {
		return specs, err
	}
	ss, err := sageTensors(h.Sage)
	if err != nil {
		return nil, err
	}
	return append(specs, ss...), nil
}

// modelTensors lists a model's tensors, in order, for its dtype.
func modelTensors(dtype string, l policy.Layers) ([]tensorSpec, error) {
	switch dtype {
	case Float32:
		names := []string{"w1", "b1", "w2", "b2", "w3", "b3", "wc1", "bc1", "wc2", "bc2"}
		var out []tensorSpec
		for i, s := range policy.Shapes(l.F, l.H1, l.H2, l.HC) {
			out = append(out, tensorSpec{names[i], Float32, s})
		}
		return out, nil
	case Int8:
		return []tensorSpec{
			{"in_scale", Float32, []int{l.F}},
			{"w1", Int8, []int{l.H1, l.F}}, {"w1_scale", Float32, []int{l.H1}}, {"b1", Int32, []int{l.H1}}, {"a1_scale", Float32, []int{l.H1}},
			{"w2", Int8, []int{l.H2, l.H1}}, {"w2_scale", Float32, []int{l.H2}}, {"b2", Int32, []int{l.H2}}, {"a2_scale", Float32, []int{l.H2}},
			{"w3", Int8, []int{1, l.H2}}, {"w3_scale", Float32, []int{1}}, {"b3", Int32, []int{1}},
		}, nil
	}
	return nil, fmt.Errorf("%w: dtype %q (want float32 or int8)", ErrArtifact, dtype)
}

// Layout is the tensor table of an artifact of a dtype and layer sizes
// without GraphSAGE weights: names, shapes, and where each sits in the
// payload.
func Layout(dtype string, l policy.Layers) ([]TensorInfo, error) {
	return LayoutOf(&Header{DType: dtype, Layers: l})
}

// LayoutOf is the tensor table of an artifact with header h.
func LayoutOf(h *Header) ([]TensorInfo, error) {
	l := h.Layers
	if l.F != policy.NumFeatures || l.H1 < 1 || l.H2 < 1 || l.HC < 1 || l.H1 > 1024 || l.H2 > 1024 || l.HC > 1024 {
		return nil, fmt.Errorf("%w: layer sizes %+v", ErrArtifact, l)
	}
	specs, err := expectedTensors(h)
	if err != nil {
		return nil, err
	}
	var out []TensorInfo
	off := 0
	for _, s := range specs {
		n, _ := shapeSize(s.shape)
		size := n * dtypeBytes(s.dtype)
		out = append(out, TensorInfo{Name: s.name, DType: s.dtype, Shape: s.shape, Offset: off, Bytes: size})
		off += size
	}
	return out, nil
}

func (a *Artifact) validate() error {
	h := &a.Header
	schema := a.Schema()
	if err := schema.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrArtifact, err)
	}
	if got := schema.Hash(); got != h.SchemaHash {
		return fmt.Errorf("%w: schema hash %s does not match its statistics (%s)", ErrArtifact, h.SchemaHash, got)
	}
	if err := h.Decision.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrArtifact, err)
	}
	l := h.Layers
	if l.F != policy.NumFeatures || l.H1 < 1 || l.H2 < 1 || l.HC < 1 || l.H1 > 1024 || l.H2 > 1024 || l.HC > 1024 {
		return fmt.Errorf("%w: layer sizes %+v", ErrArtifact, l)
	}
	if h.Activation != "relu" {
		return fmt.Errorf("%w: activation %q, this build runs relu", ErrArtifact, h.Activation)
	}
	for k, v := range h.Metrics {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: metric %s is %v", ErrArtifact, k, v)
		}
	}
	specs, err := expectedTensors(h)
	if err != nil {
		return err
	}
	if len(a.Tensors) != len(specs) {
		return fmt.Errorf("%w: %d tensors, a %s artifact has %d", ErrArtifact, len(a.Tensors), h.DType, len(specs))
	}
	for i, s := range specs {
		t := &a.Tensors[i]
		if t.Name != s.name || t.DType != s.dtype || !equalInts(t.Shape, s.shape) {
			return fmt.Errorf("%w: tensor %d is %s %s %v, want %s %s %v", ErrArtifact, i, t.Name, t.DType, t.Shape, s.name, s.dtype, s.shape)
		}
		for j, v := range t.F32 {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("%w: %s[%d] is %v", ErrArtifact, t.Name, j, v)
			}
			if strings.HasSuffix(s.name, "_scale") && !(v > 0) {
				return fmt.Errorf("%w: %s[%d] is %v, scales must be > 0", ErrArtifact, t.Name, j, v)
			}
		}
		for j, v := range t.I8 {
			if v == math.MinInt8 {
				return fmt.Errorf("%w: %s[%d] is -128, symmetric int8 uses [-127, 127]", ErrArtifact, t.Name, j)
			}
		}
	}
	if h.DType == Int8 {
		if q := h.Quant; q == nil || q.Scheme != QuantScheme {
			return fmt.Errorf("%w: int8 artifact without %s parameters", ErrArtifact, QuantScheme)
		}
	} else if h.Quant != nil {
		return fmt.Errorf("%w: float32 artifact with quantization parameters", ErrArtifact)
	}
	return a.checkSage()
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// CheckNewer refuses next unless its version is above current's (the
// same model again is accepted as a no-op). Loaders use it for rollback
// protection.
func CheckNewer(current, next *Header) error {
	if current == nil {
		return nil
	}
	if next.ModelID == current.ModelID && next.Version == current.Version {
		return nil
	}
	if next.Version <= current.Version {
		return fmt.Errorf("%w: offered version %d (%s) is not above the running %d (%s)", ErrRollback, next.Version, ShortID(next.ModelID), current.Version, ShortID(current.ModelID))
	}
	return nil
}

// ShortIDLen is how many leading characters of a model ID ShortID keeps.
const ShortIDLen = 12

// ShortID abbreviates a model ID (Header.ModelID, 64 hex digits) to its
// first ShortIDLen characters, for logs, messages and tables; a shorter
// ID is returned as it is. It only abbreviates: an abbreviated ID never
// names a model to load or compare.
func ShortID(id string) string {
	if len(id) > ShortIDLen {
		return id[:ShortIDLen]
	}
	return id
}

// ReadFile reads and decodes an artifact file (a regular file of at most
// MaxArtifactBytes: internal/boundedio).
func ReadFile(path string, opt DecodeOptions) (*Artifact, error) {
	return ReadFileContext(context.Background(), path, opt)
}

// ReadFileContext is ReadFile honouring ctx while it reads.
func ReadFileContext(ctx context.Context, path string, opt DecodeOptions) (*Artifact, error) {
	b, err := boundedio.ReadFile(ctx, path, MaxArtifactBytes)
	if err != nil {
		if errors.Is(err, boundedio.ErrTooLarge) || errors.Is(err, boundedio.ErrNotRegular) {
			return nil, fmt.Errorf("read artifact: %w: %w", ErrArtifact, err)
		}
		return nil, fmt.Errorf("read artifact: %w", err)
	}
	a, err := Decode(b, opt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

// WriteFile encodes, signs and writes an artifact atomically.
func WriteFile(path string, a *Artifact, s *Signer) error {
	b, err := a.Encode(s)
	if err != nil {
		return err
	}
	// a temporary file beside it, synced, then renamed: on error path is
	// unchanged and nothing is left behind (internal/atomicfile)
	if err := atomicfile.Write(path, b, 0o644); err != nil {
		return fmt.Errorf("write artifact: %w", err)
	}
	return nil
}

// Info is the provenance a new artifact records.
type Info struct {
	Version uint64
	Parent  string
	Round   uint64
	Metrics map[string]float64
	Created time.Time
}

func newHeader(m *policy.FloatModel, dtype string, info Info) Header {
	return Header{
		Version: info.Version, Parent: info.Parent, Round: info.Round,
		SchemaID: m.Schema.ID, SchemaHash: m.Schema.Hash(),
		Schema:     SchemaStats{Mean: m.Schema.Mean, Std: m.Schema.Std, Lo: m.Schema.Lo, Hi: m.Schema.Hi},
		Layers:     m.Layers,
		Activation: "relu", DType: dtype, Decision: m.Decision, Metrics: info.Metrics, Created: info.Created.UTC(),
	}
}

// FromModel makes a float32 artifact of a model (actor and critic: what
// training and federated aggregation work on). Models with Tanh hidden
// layers are refused (CheckQuantizable).
// (policy/nn's Model.Float gives m.) Models with Tanh hidden layers are
// refused (CheckQuantizable).
func FromModel(m *policy.FloatModel, info Info) (*Artifact, error) {
	if err := checkFloat(m); err != nil {
		return nil, err
	}
	if !m.AllReLU() {
		return nil, fmt.Errorf("%w: the network's hidden layers are %v and %v: artifacts carry ReLU networks only (the int8 path they lead to runs ReLU)", ErrArtifact, m.Act[0], m.Act[1])
	}
	a := &Artifact{Header: newHeader(m, Float32, info)}
	specs, _ := modelTensors(Float32, a.Header.Layers)
	for i, p := range m.Params {
		a.Tensors = append(a.Tensors, Tensor{Name: specs[i].name, DType: Float32, Shape: specs[i].shape, F32: append([]float32(nil), p...)})
	}
	if err := a.addSage(m); err != nil {
		return nil, err
	}
	return a, nil
}

// addSage appends m's GraphSAGE weights (m.Sage), if any, to a.
func (a *Artifact) addSage(m *policy.FloatModel) error {
	if m.Sage == nil {
		return nil
	}
	h, ts, err := sageSection(m.Sage)
	if err != nil {
		return err
	}
	a.Header.Sage, a.Tensors = h, append(a.Tensors, ts...)
	return nil
}

// Float returns a float32 artifact's model as plain data (its tensors
// shared: do not modify), for policy/nn's FromFloat; ModelMeta gives the
// provenance to keep with it.
func (a *Artifact) Float() (*policy.FloatModel, error) {
	if a.Header.DType != Float32 {
		return nil, fmt.Errorf("%w: a %s artifact has no float model", ErrArtifact, a.Header.DType)
	}
	f := &policy.FloatModel{Schema: a.Schema(), Layers: a.Header.Layers, Act: [2]string{"relu", "relu"}, Decision: a.Header.Decision, Sage: a.Sage()}
	n := len(policy.Shapes(a.Header.Layers.F, a.Header.Layers.H1, a.Header.Layers.H2, a.Header.Layers.HC))
	for _, t := range a.Tensors[:n] {
		f.Params = append(f.Params, t.F32)
	}
	return f, nil
}

// ModelMeta is the provenance a float model made from the artifact
// records: its model ID and version.
func (a *Artifact) ModelMeta() map[string]any {
	return map[string]any{"model_id": a.Header.ModelID, "version": a.Header.Version}
}
