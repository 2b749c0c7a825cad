package quant

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
	MaxUpdateValues  = 1 << 22
	DefaultChunkSize = 512
)

// UpdateEncoding is how an update's values travel.
type UpdateEncoding uint8

// Update encodings.
const (
	UpdateInt8    UpdateEncoding = 1
	UpdateFloat32 UpdateEncoding = 2
)

func (e UpdateEncoding) String() string {
	switch e {
	case UpdateInt8:
		return "int8"
	case UpdateFloat32:
		return "float32"
	}
	return fmt.Sprintf("encoding(%d)", uint8(e))
}

// ErrUpdate wraps every refusal of an update; ErrNonFinite and ErrShape
// are wrapped as well for NaN/Inf values and a wrong number of values.
var (
	ErrUpdate    = errors.New("quant: bad update")
	ErrNonFinite = errors.New("quant: non-finite value")
	ErrShape     = errors.New("quant: wrong number of values")
)

// Update is a decoded weight delta.
type Update struct {
	// Base is the ModelID (hex) the delta applies to.
	Base     string
	Encoding UpdateEncoding
	Values   []float32
}

// UpdateOptions configure EncodeUpdate. Start from DefaultUpdateOptions.
type UpdateOptions struct {
	Encoding UpdateEncoding
	// ChunkSize is the number of values sharing one scale (int8), 1..65535.
	ChunkSize int
	// Seed drives stochastic rounding; record it with the update to
	// reproduce the bytes.
	Seed uint64
}

// DefaultUpdateOptions: int8, chunks of 512 values.
func DefaultUpdateOptions(seed uint64) UpdateOptions {
	return UpdateOptions{Encoding: UpdateInt8, ChunkSize: DefaultChunkSize, Seed: seed}
}

// EncodeUpdate encodes a delta. int8 values are rounded stochastically
// (v/s rounds up with probability equal to its fractional part), so the
// decoded value is an unbiased estimate of v.
func EncodeUpdate(u *Update, opt UpdateOptions) ([]byte, error) {
	base, err := hex.DecodeString(u.Base)
	if err != nil || len(base) != 32 {
		return nil, fmt.Errorf("%w: base %q is not a 64-hex-digit model ID", ErrUpdate, u.Base)
	}
	n := len(u.Values)
	if n == 0 || n > MaxUpdateValues {
		return nil, fmt.Errorf("%w: %d values (want 1..%d)", ErrUpdate, n, MaxUpdateValues)
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
	case UpdateInt8:
		if opt.ChunkSize < 1 || opt.ChunkSize > math.MaxUint16 {
			return nil, fmt.Errorf("%w: chunk size %d (want 1..65535)", ErrUpdate, opt.ChunkSize)
		}
		_ = binary.Write(&buf, binary.LittleEndian, uint16(opt.ChunkSize))
	case UpdateFloat32:
		_ = binary.Write(&buf, binary.LittleEndian, uint16(0))
	default:
		return nil, fmt.Errorf("%w: encoding %v", ErrUpdate, opt.Encoding)
	}
	buf.Write(base)
	_ = binary.Write(&buf, binary.LittleEndian, uint32(n))
	if opt.Encoding == UpdateFloat32 {
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

// DecodeUpdate verifies and decodes an update: magic, format, encoding,
// sizes (at most maxValues values; 0 means MaxUpdateValues), exact length,
// checksum, finite non-negative scales, int8 values in [-127, 127] and
// finite float32 values. Refusals wrap ErrUpdate and name the problem.
func DecodeUpdate(b []byte, maxValues int) (*Update, error) {
	if maxValues <= 0 || maxValues > MaxUpdateValues {
		maxValues = MaxUpdateValues
	}
	if len(b) < updateHeaderLen+4 || string(b[:4]) != updateMagic {
		return nil, fmt.Errorf("%w: not an edgesched update (magic)", ErrUpdate)
	}
	if b[4] != 1 {
		return nil, fmt.Errorf("%w: format version %d, this build reads 1", ErrUpdate, b[4])
	}
	enc := UpdateEncoding(b[5])
	chunk := int(binary.LittleEndian.Uint16(b[6:]))
	n := int(binary.LittleEndian.Uint32(b[40:]))
	if n == 0 || n > maxValues {
		return nil, fmt.Errorf("%w: %w: %d values (this receiver takes 1..%d)", ErrUpdate, ErrShape, n, maxValues)
	}
	var want int
	switch enc {
	case UpdateInt8:
		if chunk == 0 {
			return nil, fmt.Errorf("%w: int8 update with chunk size 0", ErrUpdate)
		}
		want = n + 4*((n+chunk-1)/chunk)
	case UpdateFloat32:
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
	u := &Update{Base: hex.EncodeToString(b[8:40]), Encoding: enc, Values: make([]float32, n)}
	p := body[updateHeaderLen:]
	if enc == UpdateFloat32 {
		for i := range u.Values {
			v := math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("%w: %w: value %d is %v", ErrUpdate, ErrNonFinite, i, v)
			}
			u.Values[i] = v
		}
		return u, nil
	}
	off := 0
	for lo := 0; lo < n; lo += chunk {
		scale := math.Float32frombits(binary.LittleEndian.Uint32(p[off:]))
		off += 4
		if !(scale >= 0) || scale > math.MaxFloat32/127 {
			return nil, fmt.Errorf("%w: %w: chunk %d scale is %v", ErrUpdate, ErrNonFinite, lo/chunk, scale)
		}
		for i := lo; i < min(lo+chunk, n); i++ {
			q := int8(p[off])
			off++
			if q == math.MinInt8 {
				return nil, fmt.Errorf("%w: value %d is -128, symmetric int8 uses [-127, 127]", ErrUpdate, i)
			}
			u.Values[i] = float32(q) * scale
		}
	}
	return u, nil
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
func (r *Residual) Encode(u *Update, opt UpdateOptions) ([]byte, error) {
	x := append([]float32(nil), u.Values...)
	if r.v != nil {
		if len(r.v) != len(x) {
			return nil, fmt.Errorf("%w: residual of %d values for a delta of %d", ErrUpdate, len(r.v), len(x))
		}
		for i := range x {
			x[i] += r.v[i]
		}
	}
	b, err := EncodeUpdate(&Update{Base: u.Base, Values: x}, opt)
	if err != nil {
		return nil, err
	}
	sent, err := DecodeUpdate(b, len(x))
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
