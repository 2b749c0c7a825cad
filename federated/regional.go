package federated

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/edgesched/edgesched/quant"
)

// Hierarchical rounds (docs/federated.md "Hierarchical rounds"): a
// regional aggregator verifies its region's site updates as the root
// does, adds them to exact fixed-point partial sums (FixedSum) and, when
// the round closes, forwards one RegionalAggregate to the root on
// RegionalSubjectPrefix + region, into the RegionalStream.
const (
	RegionalStream        = "EDGESCHED_REGIONAL"
	RegionalSubjectPrefix = "edgesched.regional."
)

// RegionUpdateStream is the stream a regional aggregator keeps on its
// region's NATS server: its own sites' update subjects only, under a name
// of its own, so that its NATS permissions (natsauth.RegionPermissions)
// can name its stream and consumer and no other (not the root's update
// stream, not another region's).
func RegionUpdateStream(region string) string { return "EDGESCHED_REGION_" + region }

// RegionConsumer is the regional aggregator's durable consumer of its
// RegionUpdateStream.
const RegionConsumer = "region"

// ErrRegional wraps every refusal of a regional aggregate message.
var ErrRegional = errors.New("federated: bad regional aggregate")

// RegionalSite is one site update a regional aggregate covers: what the
// root needs to check it (the site's sequence), to weigh it (its samples
// and base version: the root recomputes the weight totals from these) and
// to report it (its L2 norm).
type RegionalSite struct {
	Site        string  `json:"site"`
	Seq         uint64  `json:"seq"`
	Samples     int64   `json:"samples"`
	BaseVersion uint64  `json:"base_version"`
	Norm        float64 `json:"norm"`
}

// RegionalHeader describes a regional aggregate.
type RegionalHeader struct {
	V      int    `json:"v"`
	Region string `json:"region"`
	Round  uint64 `json:"round"`
	// Shift is the fixed point of the sums (the round's SumSpec.Shift).
	Shift int            `json:"shift"`
	Sites []RegionalSite `json:"sites"`
}

// RegionalAggregate is a decoded regional aggregate: the header and the
// exact coordinate sums (Hi[i]*2^64 + Lo[i], in units of 2^-Shift) of
// weight * clip * value over the sites it lists.
type RegionalAggregate struct {
	Header RegionalHeader
	Hi     []int64
	Lo     []uint64
}

// MsgID is the JetStream de-duplication ID of a regional aggregate: one
// per region and round.
func (a *RegionalAggregate) MsgID() string {
	return fmt.Sprintf("region:%s:%d", a.Header.Region, a.Header.Round)
}

// Regional aggregate layout (signed by the region's ed25519 key):
//
//	"ESRA"   magic
//	uint8    protocol version
//	uint32   header length H, H bytes header (JSON RegionalHeader)
//	uint32   coordinate count D, D*16 bytes: Hi (int64), Lo (uint64)
//	64 bytes ed25519 signature over every byte before it
//
// Numbers little endian, as the update message's.
const regionalMagic = "ESRA"

// maxRegionalHeader bounds the header: 100,000 sites of about 100 bytes.
const maxRegionalHeader = 16 << 20

// EncodeRegional builds and signs a regional aggregate.
func EncodeRegional(a *RegionalAggregate, s *quant.Signer) ([]byte, error) {
	h := a.Header
	h.V = ProtocolVersion
	if err := h.validate(); err != nil {
		return nil, err
	}
	if len(a.Hi) != len(a.Lo) {
		return nil, fmt.Errorf("%w: %d high and %d low words", ErrRegional, len(a.Hi), len(a.Lo))
	}
	if s == nil {
		return nil, fmt.Errorf("%w: no signing key", ErrRegional)
	}
	hb, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode regional header: %w", err)
	}
	if len(hb) > maxRegionalHeader {
		return nil, fmt.Errorf("%w: header of %d bytes exceeds %d", ErrRegional, len(hb), maxRegionalHeader)
	}
	var buf bytes.Buffer
	buf.Grow(4 + 1 + 8 + len(hb) + 16*len(a.Hi) + ed25519.SignatureSize)
	buf.WriteString(regionalMagic)
	buf.WriteByte(ProtocolVersion)
	buf.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(hb))))
	buf.Write(hb)
	buf.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(a.Hi))))
	var w [16]byte
	for i := range a.Hi {
		binary.LittleEndian.PutUint64(w[:], uint64(a.Hi[i]))
		binary.LittleEndian.PutUint64(w[8:], a.Lo[i])
		buf.Write(w[:])
	}
	return sealSigned(&buf, s, ErrRegional, "regional aggregate")
}

// RegionKeys maps regions to the public key each signs its aggregates
// with.
type RegionKeys interface {
	RegionKey(region string) (ed25519.PublicKey, bool)
}

// DecodeRegional verifies and parses a regional aggregate: size, magic,
// version, the header (strict JSON), the region's key (keys) and its
// signature, then the coordinates. Refusals wrap ErrRegional, a bad or
// unknown key also ErrSiteSignature.
func DecodeRegional(b []byte, keys RegionKeys) (*RegionalAggregate, error) {
	body, sig, err := openSigned(b, regionalMagic, 4+1+4+4+ed25519.SignatureSize, ErrRegional, "a regional aggregate")
	if err != nil {
		return nil, err
	}
	hl := int(binary.LittleEndian.Uint32(body[5:]))
	off := 9
	if hl > maxRegionalHeader || off+hl+4 > len(body) {
		return nil, fmt.Errorf("%w: header length %d out of range", ErrRegional, hl)
	}
	var a RegionalAggregate
	if err := decodeStrictMax(body[off:off+hl], &a.Header, maxRegionalHeader); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrRegional, err)
	}
	off += hl
	d := int(binary.LittleEndian.Uint32(body[off:]))
	off += 4
	if d != (len(body)-off)/16 || (len(body)-off)%16 != 0 {
		return nil, fmt.Errorf("%w: %d coordinates, %d bytes follow", ErrRegional, d, len(body)-off)
	}
	if keys == nil {
		return nil, fmt.Errorf("%w: %w: no region keys", ErrRegional, ErrSiteSignature)
	}
	pub, ok := keys.RegionKey(a.Header.Region)
	if !ok {
		return nil, fmt.Errorf("%w: %w: region %q is not registered", ErrRegional, ErrSiteSignature, a.Header.Region)
	}
	if !ed25519.Verify(pub, body, sig) {
		return nil, fmt.Errorf("%w: %w: signature of region %q does not verify", ErrRegional, ErrSiteSignature, a.Header.Region)
	}
	if err := a.Header.validate(); err != nil {
		return nil, err
	}
	a.Hi, a.Lo = make([]int64, d), make([]uint64, d)
	for i := range d {
		a.Hi[i] = int64(binary.LittleEndian.Uint64(body[off+16*i:]))
		a.Lo[i] = binary.LittleEndian.Uint64(body[off+16*i+8:])
	}
	return &a, nil
}

func (h *RegionalHeader) validate() error {
	switch {
	case h.V != ProtocolVersion:
		return fmt.Errorf("%w: version %d", ErrRegional, h.V)
	case !ValidSite(h.Region):
		return fmt.Errorf("%w: region %q is not a DNS label", ErrRegional, h.Region)
	case h.Round == 0:
		return fmt.Errorf("%w: round 0", ErrRegional)
	case h.Shift < 0 || h.Shift > 1000:
		return fmt.Errorf("%w: shift %d", ErrRegional, h.Shift)
	case len(h.Sites) == 0:
		return fmt.Errorf("%w: no sites", ErrRegional)
	}
	for _, s := range h.Sites {
		if !ValidSite(s.Site) || s.Seq == 0 || s.Seq > MaxSeq || s.Samples <= 0 || !(s.Norm >= 0) || math.IsInf(s.Norm, 0) {
			return fmt.Errorf("%w: site entry %+v", ErrRegional, s)
		}
	}
	return nil
}

// SitesSorted returns the sites listed, sorted (duplicates kept: the root
// refuses them).
func (h *RegionalHeader) SitesSorted() []string {
	out := make([]string, len(h.Sites))
	for i, s := range h.Sites {
		out[i] = s.Site
	}
	slices.Sort(out)
	return out
}
