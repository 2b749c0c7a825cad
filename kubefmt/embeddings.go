package kubefmt

import (
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Service embeddings: the GraphSAGE embedding of each service of the
// dependency graph (policy/sage), computed by the site leader from the
// graph it publishes and written next to it, in the same ConfigMap under
// EmbeddingsConfigMapKey, so the scheduler plugin only looks them up
// (docs/site-leader.md, "Service embeddings"). Values are int8 with one
// scale per service: value = scale * int8.
const (
	// EmbeddingsConfigMapKey is the key of the embeddings in the
	// dependency graph's ConfigMap.
	EmbeddingsConfigMapKey = "embeddings.json"
	// EmbeddingsVersion is the format version Encode writes; decoders
	// read version 1 too (without partners).
	EmbeddingsVersion = 2
	// MaxPartners bounds a service's partners (the most probable are
	// kept).
	MaxPartners = 32
	// MaxEmbeddingsBytes bounds the encoding; the graph's own bound is
	// reduced by as much when both share a ConfigMap (1 MiB at most).
	MaxEmbeddingsBytes = 256 << 10
	// MaxEmbeddedServices bounds the services embedded.
	MaxEmbeddedServices = 2048
	// MaxEmbeddingDim bounds an embedding's width.
	MaxEmbeddingDim = 64
	// MaxEncoderID bounds the encoder's identifier.
	MaxEncoderID = 128
)

// ErrEmbeddings marks embeddings that do not decode or validate; the
// error names the field.
var ErrEmbeddings = errors.New("kubefmt: bad service embeddings")

// Embeddings are a graph's service embeddings (format version 1 or 2,
// JSON).
type Embeddings struct {
	Version int `json:"version"`
	// Encoder identifies the GraphSAGE weights that computed them
	// (policy.SageWeights.ID: the encoder, and the decoder when partners
	// are published); a reader uses them only with the model that carries
	// the same weights.
	Encoder string `json:"encoder"`
	// Updated is when they were computed (informational).
	Updated  time.Time          `json:"updated,omitzero"`
	Dim      int                `json:"dim"`
	Services []ServiceEmbedding `json:"services"`
}

// ServiceEmbedding is one service's embedding: Dim int8 values, base64
// (standard, padded), each times Scale.
type ServiceEmbedding struct {
	Name   string  `json:"name"`
	Scale  float32 `json:"scale"`
	Values string  `json:"values"`
	// Partners (version 2) are the services within two calls, by
	// descending P then name, at most MaxPartners, each one of the
	// embeddings' services.
	Partners []Partner `json:"-"`
	// PartnersWire is Partners as written: base64 (standard, padded) of
	// three bytes per partner, its index among the services sorted by
	// name (big-endian uint16) and P. Encode sets it and DecodeEmbeddings
	// reads it; leave it empty.
	PartnersWire string `json:"partners,omitempty"`
}

// Partner is a service near another and the predicted probability that
// the two call each other, P/255.
type Partner struct {
	Service string `json:"service"`
	P       uint8  `json:"p"`
}

// PartnerProbability is P as a probability (P/255).
func (p Partner) PartnerProbability() float32 { return float32(p.P) / 255 }

// QuantizeProbability is a probability in [0, 1] (clamped; NaN is 0) in
// steps of 1/255, rounded to the nearest.
func QuantizeProbability(p float64) uint8 {
	if !(p > 0) {
		return 0
	}
	return uint8(math.Round(min(p, 1) * 255))
}

// QuantizeEmbedding turns v (at most MaxEmbeddingDim finite values) into
// a ServiceEmbedding: the scale is the largest magnitude over 127 (1 for
// a zero vector), each value rounded to the nearest step, so dequantizing
// is off by at most half a scale.
func QuantizeEmbedding(name string, v []float32) ServiceEmbedding {
	var hi float32
	for _, x := range v {
		hi = max(hi, float32(math.Abs(float64(x))))
	}
	scale := hi / 127
	if !(scale > 0) || math.IsInf(float64(scale), 0) {
		scale = 1
	}
	q := make([]byte, len(v))
	for i, x := range v {
		r := math.Round(float64(x / scale))
		q[i] = byte(int8(max(-127, min(127, r))))
	}
	return ServiceEmbedding{Name: name, Scale: scale, Values: base64.StdEncoding.EncodeToString(q)}
}

// Vector returns the dequantized values of a validated embedding.
func (s *ServiceEmbedding) Vector() []float32 {
	q, _ := base64.StdEncoding.DecodeString(s.Values)
	out := make([]float32, len(q))
	for i, b := range q {
		out[i] = float32(int8(b)) * s.Scale
	}
	return out
}

// Validate checks the version, the encoder, the width, the bounds, every
// name (once each), scale (finite, positive) and value string (Dim
// bytes of base64).
func (m *Embeddings) Validate() error {
	switch {
	case m.Version != 1 && m.Version != EmbeddingsVersion:
		return fmt.Errorf("%w: version %d, want 1 or %d", ErrEmbeddings, m.Version, EmbeddingsVersion)
	case m.Encoder == "" || len(m.Encoder) > MaxEncoderID:
		return fmt.Errorf("%w: encoder %q: want 1..%d bytes", ErrEmbeddings, m.Encoder, MaxEncoderID)
	case m.Dim < 1 || m.Dim > MaxEmbeddingDim:
		return fmt.Errorf("%w: dim %d, want 1..%d", ErrEmbeddings, m.Dim, MaxEmbeddingDim)
	case len(m.Services) > MaxEmbeddedServices:
		return fmt.Errorf("%w: %d services, at most %d", ErrEmbeddings, len(m.Services), MaxEmbeddedServices)
	}
	if err := validName("encoder", m.Encoder); err != nil {
		return fmt.Errorf("%w: %v", ErrEmbeddings, err)
	}
	seen := make(map[string]bool, len(m.Services))
	for i, s := range m.Services {
		if err := validName("service", s.Name); err != nil {
			return fmt.Errorf("%w: services[%d].name: %v", ErrEmbeddings, i, err)
		}
		if seen[s.Name] {
			return fmt.Errorf("%w: services[%d]: %s given twice", ErrEmbeddings, i, s.Name)
		}
		seen[s.Name] = true
		if sc := float64(s.Scale); !(sc > 0) || math.IsInf(sc, 0) {
			return fmt.Errorf("%w: services[%d] (%s): scale %v, want a finite positive number", ErrEmbeddings, i, s.Name, s.Scale)
		}
		if len(s.Values) != base64.StdEncoding.EncodedLen(m.Dim) {
			return fmt.Errorf("%w: services[%d] (%s): %d characters of values, want %d (base64 of %d bytes)", ErrEmbeddings, i, s.Name, len(s.Values), base64.StdEncoding.EncodedLen(m.Dim), m.Dim)
		}
		q, err := base64.StdEncoding.Strict().DecodeString(s.Values)
		if err != nil || len(q) != m.Dim {
			return fmt.Errorf("%w: services[%d] (%s): values are not base64 of %d bytes", ErrEmbeddings, i, s.Name, m.Dim)
		}
		if err := s.validPartners(m.Version); err != nil {
			return fmt.Errorf("%w: services[%d] (%s): %v", ErrEmbeddings, i, s.Name, err)
		}
	}
	for i, s := range m.Services {
		for j, p := range s.Partners {
			if !seen[p.Service] {
				return fmt.Errorf("%w: services[%d] (%s): partners[%d]: %s has no embedding", ErrEmbeddings, i, s.Name, j, p.Service)
			}
		}
	}
	return nil
}

// PartnersWireBytes is the encoding's bytes for n partners of a service
// (the key, the quotes, the base64; 0 without partners).
func PartnersWireBytes(n int) int {
	if n == 0 {
		return 0
	}
	return len(`,"partners":""`) + base64.StdEncoding.EncodedLen(3*n)
}

// validPartners checks a service's partners: none before version 2, at
// most MaxPartners, valid names, not the service itself, none twice.
func (s *ServiceEmbedding) validPartners(version int) error {
	switch {
	case len(s.Partners) > 0 && version < 2:
		return fmt.Errorf("partners in version %d (they came in 2)", version)
	case len(s.Partners) > MaxPartners:
		return fmt.Errorf("%d partners, at most %d", len(s.Partners), MaxPartners)
	}
	seen := make(map[string]bool, len(s.Partners))
	for j, p := range s.Partners {
		if err := validName("partner", p.Service); err != nil {
			return fmt.Errorf("partners[%d]: %v", j, err)
		}
		if p.Service == s.Name || seen[p.Service] {
			return fmt.Errorf("partners[%d]: %s is the service itself or given twice", j, p.Service)
		}
		seen[p.Service] = true
	}
	return nil
}

// Encode validates m and writes it as JSON with its services sorted by
// name, so the same embeddings always encode to the same bytes.
func (m *Embeddings) Encode() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	c := *m
	c.Services = slices.Clone(m.Services)
	slices.SortFunc(c.Services, func(a, b ServiceEmbedding) int { return cmp.Compare(a.Name, b.Name) })
	if c.Services == nil {
		c.Services = []ServiceEmbedding{}
	}
	idx := make(map[string]int, len(c.Services))
	for i := range c.Services {
		idx[c.Services[i].Name] = i
	}
	for i := range c.Services {
		s := &c.Services[i]
		s.PartnersWire = ""
		if len(s.Partners) == 0 {
			continue
		}
		w := make([]byte, 0, 3*len(s.Partners))
		for _, p := range s.Partners {
			w = binary.BigEndian.AppendUint16(w, uint16(idx[p.Service]))
			w = append(w, p.P)
		}
		s.PartnersWire = base64.StdEncoding.EncodeToString(w)
	}
	return encodeBounded(&c, MaxEmbeddingsBytes, "service embeddings", ErrEmbeddings)
}

// DecodeEmbeddings reads and validates encoded embeddings, as strictly as
// DecodeDependencyGraph: at most MaxEmbeddingsBytes, exactly the
// format's keys, nothing after the object; partners resolved to names
// (an index past the services is refused).
func DecodeEmbeddings(b []byte) (*Embeddings, error) {
	var m Embeddings
	if err := decodeStrict(b, MaxEmbeddingsBytes, embeddingsShape, &m, ErrEmbeddings); err != nil {
		return nil, err
	}
	partners := false
	for i := range m.Services {
		s := &m.Services[i]
		if s.PartnersWire == "" {
			continue
		}
		partners = true
		w, err := base64.StdEncoding.Strict().DecodeString(s.PartnersWire)
		if err != nil || len(w)%3 != 0 || len(w) > 3*MaxPartners {
			return nil, fmt.Errorf("%w: services[%d] (%s): partners are not base64 of at most %d three-byte entries", ErrEmbeddings, i, s.Name, MaxPartners)
		}
		for k := 0; k < len(w); k += 3 {
			j := int(binary.BigEndian.Uint16(w[k:]))
			if j >= len(m.Services) {
				return nil, fmt.Errorf("%w: services[%d] (%s): partner index %d past the %d services", ErrEmbeddings, i, s.Name, j, len(m.Services))
			}
			s.Partners = append(s.Partners, Partner{Service: m.Services[j].Name, P: w[k+2]})
		}
		s.PartnersWire = ""
	}
	if partners && !slices.IsSortedFunc(m.Services, func(a, b ServiceEmbedding) int { return cmp.Compare(a.Name, b.Name) }) {
		// indices refer to the order Encode writes
		return nil, fmt.Errorf("%w: services not sorted by name", ErrEmbeddings)
	}
	if _, err := m.Encode(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Table returns the dequantized embeddings by service name.
func (m *Embeddings) Table() map[string][]float32 {
	out := make(map[string][]float32, len(m.Services))
	for i := range m.Services {
		out[m.Services[i].Name] = m.Services[i].Vector()
	}
	return out
}

var embeddingsShape = &jsonShape{fields: map[string]*jsonShape{
	"version": nil, "encoder": nil, "updated": nil, "dim": nil,
	"services": {elem: &jsonShape{fields: map[string]*jsonShape{"name": nil, "scale": nil, "values": nil, "partners": nil}}},
}}
