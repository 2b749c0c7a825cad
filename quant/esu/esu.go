// Package esu is the codec of federated weight updates (format ESU1): a
// site's weight delta against a base model, int8 with per-chunk scales and
// stochastic rounding (or float32), with a CRC; the error-feedback
// residual a site keeps between rounds (Residual); and a zero-copy view of
// an encoded update for aggregation (View). The federated envelope signs
// it; the coordinator decodes it at the edge of its memory budget.
//
// Concurrency and lifetimes: encoding and decoding are pure functions of
// their inputs; a Residual belongs to one site's client; a View aliases the
// bytes it was made from and is read-only.
package esu

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
)

// Update wire format (format 1): a weight delta against a base model,
// sent by an edge site to the coordinator.
//
//	"ESU1"   magic
//	uint8    format version (1)
//	uint8    encoding: 1 int8 (per-chunk scales, stochastic rounding),
//	         2 float32 (the fallback)
//	uint16   chunk size (int8: values per scale; float32: 0)
//	32 bytes base model ID (the SHA-256 ModelID, raw)
//	uint32   number of values N
//	payload  int8: per chunk a float32 scale then its int8 values (the last
//	         chunk may be shorter); float32: N values
//	uint32   CRC-32 (IEEE) of everything before it
//
// All numbers little endian. Authenticity is the transport's job (the
// federated envelope is signed); the CRC catches corruption.
const (
	updateMagic      = "ESU1"
	updateHeaderLen  = 4 + 1 + 1 + 2 + 32 + 4
	MaxValues        = 1 << 22
	DefaultChunkSize = 512
)

// Encoding is how an update's values travel.
type Encoding uint8

// Update encodings.
const (
	Int8    Encoding = 1
	Float32 Encoding = 2
)

func (e Encoding) String() string {
	switch e {
	case Int8:
		return "int8"
	case Float32:
		return "float32"
	}
	return fmt.Sprintf("encoding(%d)", uint8(e))
}

// ErrUpdate wraps every refusal of an update; ErrNonFinite and ErrShape
// are wrapped as well for NaN/Inf values and a wrong number of values.
var (
	ErrUpdate    = errors.New("esu: bad update")
	ErrNonFinite = errors.New("esu: non-finite value")
	ErrShape     = errors.New("esu: wrong number of values")
)

// Update is a decoded weight delta.
type Update struct {
	// Base is the ModelID (hex) the delta applies to.
	Base     string
	Encoding Encoding
	Values   []float32
}

// Options configure Encode. Start from DefaultOptions.
type Options struct {
	Encoding Encoding
	// ChunkSize is the number of values sharing one scale (int8), 1..65535.
	ChunkSize int
	// Seed drives stochastic rounding; record it with the update to
	// reproduce the bytes.
	Seed uint64
}

// DefaultOptions: int8, chunks of 512 values.
func DefaultOptions(seed uint64) Options {
	return Options{Encoding: Int8, ChunkSize: DefaultChunkSize, Seed: seed}
}

// Encode encodes a delta. int8 values are rounded stochastically
// (v/s rounds up with probability equal to its fractional part), so the
// decoded value is an unbiased estimate of v.
func Encode(u *Update, opt Options) ([]byte, error) {
	base, err := hex.DecodeString(u.Base)
	if err != nil || len(base) != 32 {
		return nil, fmt.Errorf("%w: base %q is not a 64-hex-digit model ID", ErrUpdate, u.Base)
	}
	n := len(u.Values)
	if n == 0 || n > MaxValues {
		return nil, fmt.Errorf("%w: %d values (want 1..%d)", ErrUpdate, n, MaxValues)
	}
	for i, v := range u.Values {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("%w: %w: value %d is %v", ErrUpdate, ErrNonFinite, i, v)
		}
	}
	var buf bytes.Buffer
	buf.WriteString(updateMagic)
	buf.WriteByte(1)
	buf.WriteByte(byte(opt.Encoding))
	switch opt.Encoding {
	case Int8:
		if opt.ChunkSize < 1 || opt.ChunkSize > math.MaxUint16 {
			return nil, fmt.Errorf("%w: chunk size %d (want 1..65535)", ErrUpdate, opt.ChunkSize)
		}
		_ = binary.Write(&buf, binary.LittleEndian, uint16(opt.ChunkSize))
	case Float32:
		_ = binary.Write(&buf, binary.LittleEndian, uint16(0))
	default:
		return nil, fmt.Errorf("%w: encoding %v", ErrUpdate, opt.Encoding)
	}
	buf.Write(base)
	_ = binary.Write(&buf, binary.LittleEndian, uint32(n))
	if opt.Encoding == Float32 {
		for _, v := range u.Values {
			_ = binary.Write(&buf, binary.LittleEndian, math.Float32bits(v))
		}
	} else {
		rng := rand.New(rand.NewPCG(opt.Seed, 0x5700))
		for lo := 0; lo < n; lo += opt.ChunkSize {
			chunk := u.Values[lo:min(lo+opt.ChunkSize, n)]
			var mx float64
			for _, v := range chunk {
				mx = math.Max(mx, math.Abs(float64(v)))
			}
			scale := float32(mx / 127)
			_ = binary.Write(&buf, binary.LittleEndian, math.Float32bits(scale))
			for _, v := range chunk {
				var q float64
				if scale > 0 {
					q = math.Floor(float64(v)/float64(scale) + rng.Float64())
					q = math.Max(-127, math.Min(127, q))
				}
				buf.WriteByte(byte(int8(q)))
			}
		}
	}
	_ = binary.Write(&buf, binary.LittleEndian, crc32.ChecksumIEEE(buf.Bytes()))
	return buf.Bytes(), nil
}

// Decode verifies and decodes an update: magic, format, encoding,
// sizes (at most maxValues values; 0 means MaxValues), exact length,
// checksum, finite non-negative scales, int8 values in [-127, 127] and
// finite float32 values. Refusals wrap ErrUpdate and name the problem.
func Decode(b []byte, maxValues int) (*Update, error) {
	return DecodeInto(b, maxValues, nil)
}

// DecodeInto is Decode decoding into dst when it has room for
// the values (a receiver decoding many updates reuses one buffer); the
// Update's Values then alias dst.
func DecodeInto(b []byte, maxValues int, dst []float32) (*Update, error) {
	h, err := parseUpdate(b, maxValues)
	if err != nil {
		return nil, err
	}
	vals := dst
	if cap(vals) >= h.n {
		vals = vals[:h.n]
	} else {
		vals = make([]float32, h.n)
	}
	if err := h.values(vals); err != nil {
		return nil, err
	}
	return &Update{Base: hex.EncodeToString(b[8:40]), Encoding: h.enc, Values: vals}, nil
}

// Info is what Check learns of an update without decoding
// its values.
type Info struct {
	Base     string // the base ModelID (hex)
	Encoding Encoding
	Values   int     // number of values
	Norm     float64 // L2 norm of the values (float64 accumulation)
}

// Check verifies an update as Decode does (every check, every
// value) and returns its base model, size and L2 norm without allocating
// its values: a receiver can judge an update before it keeps it. For int8
// updates the norm is sqrt(sum over chunks of scale^2 * sum of q^2),
// exact up to float64 rounding of the values Decode returns.
func Check(b []byte, maxValues int) (Info, error) {
	h, err := parseUpdate(b, maxValues)
	if err != nil {
		return Info{}, err
	}
	norm, err := h.norm()
	if err != nil {
		return Info{}, err
	}
	return Info{Base: hex.EncodeToString(b[8:40]), Encoding: h.enc, Values: h.n, Norm: norm}, nil
}

// CheckView is Check that also returns a view of the values
// (one parse and checksum for both).
func CheckView(b []byte, maxValues int) (Info, *View, error) {
	h, err := parseUpdate(b, maxValues)
	if err != nil {
		return Info{}, nil, err
	}
	norm, err := h.norm()
	if err != nil {
		return Info{}, nil, err
	}
	return Info{Base: hex.EncodeToString(b[8:40]), Encoding: h.enc, Values: h.n, Norm: norm}, &View{h: h}, nil
}

// parsedUpdate is an update whose framing and checksum verified.
type parsedUpdate struct {
	enc   Encoding
	chunk int
	n     int
	p     []byte // the payload after the header, before the checksum
}

func parseUpdate(b []byte, maxValues int) (*parsedUpdate, error) {
	if maxValues <= 0 || maxValues > MaxValues {
		maxValues = MaxValues
	}
	if len(b) < updateHeaderLen+4 || string(b[:4]) != updateMagic {
		return nil, fmt.Errorf("%w: not an edgesched update (magic)", ErrUpdate)
	}
	if b[4] != 1 {
		return nil, fmt.Errorf("%w: format version %d, this build reads 1", ErrUpdate, b[4])
	}
	enc := Encoding(b[5])
	chunk := int(binary.LittleEndian.Uint16(b[6:]))
	n := int(binary.LittleEndian.Uint32(b[40:]))
	if n == 0 || n > maxValues {
		return nil, fmt.Errorf("%w: %w: %d values (this receiver takes 1..%d)", ErrUpdate, ErrShape, n, maxValues)
	}
	var want int
	switch enc {
	case Int8:
		if chunk == 0 {
			return nil, fmt.Errorf("%w: int8 update with chunk size 0", ErrUpdate)
		}
		want = n + 4*((n+chunk-1)/chunk)
	case Float32:
		if chunk != 0 {
			return nil, fmt.Errorf("%w: float32 update with chunk size %d", ErrUpdate, chunk)
		}
		want = 4 * n
	default:
		return nil, fmt.Errorf("%w: unknown encoding %d", ErrUpdate, uint8(enc))
	}
	if len(b) != updateHeaderLen+want+4 {
		return nil, fmt.Errorf("%w: %d bytes, %d %s values need %d", ErrUpdate, len(b), n, enc, updateHeaderLen+want+4)
	}
	body := b[:len(b)-4]
	if crc32.ChecksumIEEE(body) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, fmt.Errorf("%w: checksum mismatch (corrupt or truncated)", ErrUpdate)
	}
	return &parsedUpdate{enc: enc, chunk: chunk, n: n, p: body[updateHeaderLen:]}, nil
}

// scale reads and checks the scale of the chunk at off.
func (h *parsedUpdate) scale(off, lo int) (float32, error) {
	scale := math.Float32frombits(binary.LittleEndian.Uint32(h.p[off:]))
	if !(scale >= 0) || scale > math.MaxFloat32/127 {
		return 0, fmt.Errorf("%w: %w: chunk %d scale is %v", ErrUpdate, ErrNonFinite, lo/h.chunk, scale)
	}
	return scale, nil
}

// values decodes into out (len n).
func (h *parsedUpdate) values(out []float32) error {
	p := h.p
	if h.enc == Float32 {
		for i := range out {
			v := math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("%w: %w: value %d is %v", ErrUpdate, ErrNonFinite, i, v)
			}
			out[i] = v
		}
		return nil
	}
	off := 0
	for lo := 0; lo < h.n; lo += h.chunk {
		scale, err := h.scale(off, lo)
		if err != nil {
			return err
		}
		off += 4
		hi := min(lo+h.chunk, h.n)
		q, dst := p[off:off+hi-lo], out[lo:hi]
		off += hi - lo
		if i := bytes.IndexByte(q, 0x80); i >= 0 {
			return fmt.Errorf("%w: value %d is -128, symmetric int8 uses [-127, 127]", ErrUpdate, lo+i)
		}
		dst = dst[:len(q)]
		for i, v := range q {
			dst[i] = float32(int8(v)) * scale
		}
	}
	return nil
}

// norm is the L2 norm of the values, checking them as values does.
func (h *parsedUpdate) norm() (float64, error) {
	p := h.p
	if h.enc == Float32 {
		var s float64
		for i := range h.n {
			v := math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return 0, fmt.Errorf("%w: %w: value %d is %v", ErrUpdate, ErrNonFinite, i, v)
			}
			s += float64(v) * float64(v)
		}
		return math.Sqrt(s), nil
	}
	var s float64
	off := 0
	for lo := 0; lo < h.n; lo += h.chunk {
		scale, err := h.scale(off, lo)
		if err != nil {
			return 0, err
		}
		off += 4
		hi := min(lo+h.chunk, h.n)
		q := p[off : off+hi-lo]
		off += hi - lo
		if i := bytes.IndexByte(q, 0x80); i >= 0 {
			return 0, fmt.Errorf("%w: value %d is -128, symmetric int8 uses [-127, 127]", ErrUpdate, lo+i)
		}
		s += float64(scale) * float64(scale) * float64(sumSquares(q))
	}
	return math.Sqrt(s), nil
}

// Residual is error feedback for compressed updates: the part of a delta
// that int8 rounding did not transmit is added to the next delta, so over
// rounds the coordinator receives what the site learned (without it, the
// rounding noise of every round accumulates in the global model). A site
// keeps one Residual across rounds and persists Values with its outbox.
// The zero value is empty; not safe for concurrent use.
type Residual struct {
	v []float32
}

// NewResidual restores a residual saved with Values.
func NewResidual(values []float32) *Residual {
	return &Residual{v: append([]float32(nil), values...)}
}

// Values returns the residual (nil before the first Encode).
func (r *Residual) Values() []float32 { return r.v }

// Encode encodes delta plus the residual and keeps what the encoding lost.
func (r *Residual) Encode(u *Update, opt Options) ([]byte, error) {
	x := append([]float32(nil), u.Values...)
	if r.v != nil {
		if len(r.v) != len(x) {
			return nil, fmt.Errorf("%w: residual of %d values for a delta of %d", ErrUpdate, len(r.v), len(x))
		}
		for i := range x {
			x[i] += r.v[i]
		}
	}
	b, err := Encode(&Update{Base: u.Base, Values: x}, opt)
	if err != nil {
		return nil, err
	}
	sent, err := Decode(b, len(x))
	if err != nil {
		return nil, err
	}
	if r.v == nil {
		r.v = make([]float32, len(x))
	}
	for i := range x {
		r.v[i] = x[i] - sent.Values[i]
	}
	return b, nil
}

// View is a verified update's values as they travel (int8 chunks
// with their scales, or float32 values), for a receiver that combines
// them without decoding them into float32 first (the coordinator's exact
// fixed-point sum). Make it only from bytes Check accepted: the
// view checks the framing and checksum again, not the values.
type View struct {
	h *parsedUpdate
}

// ViewOf returns a view of update b (at most maxValues values, 0:
// MaxValues).
func ViewOf(b []byte, maxValues int) (*View, error) {
	h, err := parseUpdate(b, maxValues)
	if err != nil {
		return nil, err
	}
	return &View{h: h}, nil
}

// Encoding is the update's encoding.
func (v *View) Encoding() Encoding { return v.h.enc }

// Len is the number of values.
func (v *View) Len() int { return v.h.n }

// ChunkSize is the number of int8 values sharing a scale (0 for float32).
func (v *View) ChunkSize() int {
	if v.h.enc != Int8 {
		return 0
	}
	return v.h.chunk
}

// Chunks is the number of int8 chunks (0 for float32).
func (v *View) Chunks() int {
	if v.h.enc != Int8 {
		return 0
	}
	return (v.h.n + v.h.chunk - 1) / v.h.chunk
}

// Int8Chunk returns int8 chunk j's scale and values (value i of the chunk
// is int8(q[i]) * scale): values j*ChunkSize() on.
func (v *View) Int8Chunk(j int) (scale float32, q []byte) {
	off := j * (4 + v.h.chunk)
	lo := j * v.h.chunk
	hi := min(lo+v.h.chunk, v.h.n)
	scale = math.Float32frombits(binary.LittleEndian.Uint32(v.h.p[off:]))
	return scale, v.h.p[off+4 : off+4+hi-lo]
}

// Float32 returns value i of a float32 update.
func (v *View) Float32(i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(v.h.p[4*i:]))
}

// squares[b] is int8(b)^2.
var squares = func() (t [256]uint32) {
	for i := range t {
		x := int32(int8(i))
		t[i] = uint32(x * x)
	}
	return t
}()

// sumSquares is the sum of the squares of int8 values (a table look-up a
// value, four independent sums: a chunk of 65,535 values of 127 stays far
// below 2^63).
func sumSquares(q []byte) int64 {
	var s0, s1, s2, s3 uint64
	i := 0
	for ; i+4 <= len(q); i += 4 {
		s0 += uint64(squares[q[i]])
		s1 += uint64(squares[q[i+1]])
		s2 += uint64(squares[q[i+2]])
		s3 += uint64(squares[q[i+3]])
	}
	for ; i < len(q); i++ {
		s0 += uint64(squares[q[i]])
	}
	return int64(s0 + s1 + s2 + s3)
}
