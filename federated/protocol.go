package federated

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/edgesched/edgesched/quant"
)

// ProtocolVersion is the version every message carries; decoders refuse
// others.
const ProtocolVersion = 1

// NATS layout (docs/federated.md).
const (
	// UpdateStream is the JetStream stream of site updates, subjects
	// UpdateSubjectPrefix + site; duplicates (same Nats-Msg-Id, MsgID)
	// are dropped by the server within its window.
	UpdateStream        = "EDGESCHED_UPDATES"
	UpdateSubjectPrefix = "edgesched.update."
	// AckSubjectPrefix + site carries the coordinator's Ack of each update.
	AckSubjectPrefix = "edgesched.ack."
	// StateBucket is the KV bucket of shared state: KeyRound holds the
	// current RoundAnnouncement, KeyModel the current ModelNotice.
	StateBucket = "EDGESCHED_STATE"
	KeyRound    = "round"
	KeyModel    = "model"
	// ModelBucket is the Object Store bucket of published artifacts,
	// named by ModelNotice.FloatObject and Int8Object.
	ModelBucket = "EDGESCHED_MODELS"
	// The coordinator's own buckets when it runs as replicas (--ha,
	// docs/federated.md "Highly available coordinator"): the active's
	// lease (LeaseBucket, entries expire), the checkpoint pointer
	// (HABucket) and the checkpoints (CheckpointBucket, an object store).
	// Sites never read them.
	LeaseBucket      = "EDGESCHED_COORDINATOR_LEASE"
	HABucket         = "EDGESCHED_COORDINATOR"
	CheckpointBucket = "EDGESCHED_CHECKPOINTS"
	// AdminService is the NATS micro service name of the coordinator's
	// admin API; its endpoints live under AdminSubjectPrefix.
	AdminService       = "edgesched-coordinator"
	AdminSubjectPrefix = "edgesched.admin"
)

// Size caps of decoders.
const (
	MaxControlBytes = 64 << 10
	MaxUpdateBytes  = 64 << 20
)

// MaxSeq is the highest update sequence a site may use (2^63-1: a million
// updates a second would take 292,000 years). Decoders refuse a sequence
// above it (ErrMessage), so none from the wire can take a site's
// high-water mark to the top of uint64, where every later update would
// look like a replay; sites stop there (flclient.ErrSequenceExhausted)
// instead of wrapping to 0.
const MaxSeq uint64 = 1<<63 - 1

// MaxSeqJump is how far above a site's high-water mark an update's
// sequence may be: 2^32 updates, beyond any site's history. The
// coordinator and a region refuse one further ahead (ReasonSeqJump, the
// mark unmoved), so whoever holds a site's key lifts the mark at most
// this far a message (about 2^31 messages to MaxSeq, where one used to
// do); a site follows a mark ahead of its own sequence this far a replay
// ack (flclient), so it is back above the mark once they stop.
const MaxSeqJump uint64 = 1 << 32

// SeqJump reports whether seq is more than MaxSeqJump above hwm.
func SeqJump(hwm, seq uint64) bool { return seq > hwm && seq-hwm > MaxSeqJump }

// Errors of the protocol.
var (
	ErrMessage = errors.New("federated: bad message")
	// ErrSiteSignature: the update's site signature is missing, from an
	// unknown key, or does not verify.
	ErrSiteSignature = errors.New("federated: bad site signature")
	// ErrUnknownSite: the update names a site that is not registered
	// (wraps ErrSiteSignature too: nothing it says can be trusted).
	ErrUnknownSite = fmt.Errorf("%w: unknown site", ErrSiteSignature)
)

var siteName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidSite reports whether s is a usable site ID: a DNS label (it is
// part of NATS subjects and Kubernetes names).
func ValidSite(s string) bool { return siteName.MatchString(s) }

// Mode is how a round aggregates.
type Mode string

// Round modes.
const (
	// Sync rounds collect updates trained from the round's base model until
	// the deadline or all expected sites, then aggregate once.
	Sync Mode = "sync"
	// Async (FedBuff) aggregates every Buffer updates, whatever model each
	// was trained from, weighting stale ones down.
	Async Mode = "async"
)

// LocalTraining tells sites how to train in a round.
type LocalTraining struct {
	Iterations int     `json:"iterations"`
	Episodes   int     `json:"episodes"`
	LR         float64 `json:"lr"`
	// ProxMu is FedProx's proximal coefficient (0: plain FedAvg training).
	ProxMu float64 `json:"prox_mu,omitempty"`
}

// RoundAnnouncement is the coordinator's call for updates (KV StateBucket,
// key KeyRound).
type RoundAnnouncement struct {
	V     int    `json:"v"`
	Round uint64 `json:"round"`
	Mode  Mode   `json:"mode"`
	// BaseModel is the float32 artifact's model ID to train from (object
	// BaseObject in ModelBucket), BaseVersion its version.
	BaseModel   string        `json:"base_model"`
	BaseObject  string        `json:"base_object"`
	BaseVersion uint64        `json:"base_version"`
	Opened      time.Time     `json:"opened"`
	Deadline    time.Time     `json:"deadline"`
	MinUpdates  int           `json:"min_updates"`
	Local       LocalTraining `json:"local"`
}

// ModelNotice announces a published model (KV StateBucket, key KeyModel).
type ModelNotice struct {
	V       int    `json:"v"`
	Version uint64 `json:"version"`
	Round   uint64 `json:"round"`
	// FloatModel/FloatObject: the float32 artifact (training);
	// Int8Model/Int8Object: the signed int8 artifact (scheduling).
	FloatModel  string    `json:"float_model"`
	FloatObject string    `json:"float_object"`
	Int8Model   string    `json:"int8_model"`
	Int8Object  string    `json:"int8_object"`
	Published   time.Time `json:"published"`
}

// AckStatus is the coordinator's verdict on an update.
type AckStatus string

// Ack statuses.
const (
	Accepted  AckStatus = "accepted"
	Duplicate AckStatus = "duplicate"
	Rejected  AckStatus = "rejected"
)

// Ack answers one update (subject AckSubjectPrefix + site).
type Ack struct {
	V      int       `json:"v"`
	Site   string    `json:"site"`
	Seq    uint64    `json:"seq"`
	Round  uint64    `json:"round"`
	Status AckStatus `json:"status"`
	// Reason names why an update was rejected (a RejectReason).
	Reason string `json:"reason,omitempty"`
	// HWM, on a replay (Duplicate, ReasonReplay) only, is the highest
	// sequence the coordinator has seen from the site: a site whose
	// store lost its sequence (a new agent.db) continues above it rather
	// than have every update refused until its count passes it. Zero is
	// absent (a coordinator before it sends none). An agent before it
	// refuses the field (decoders are strict): it misses counting that
	// duplicate, nothing else.
	HWM uint64 `json:"hwm,omitempty"`
}

// Reasons an update is rejected; the coordinator counts each.
const (
	ReasonMalformed   = "malformed"
	ReasonSignature   = "bad_signature"
	ReasonUnknownSite = "unknown_site"
	ReasonStaleRound  = "stale_round"
	ReasonFutureRound = "unknown_round"
	ReasonReplay      = "replay"
	ReasonBaseModel   = "wrong_base_model"
	ReasonShape       = "wrong_shape"
	ReasonNonFinite   = "non_finite"
	// ReasonTooLarge: the message exceeds MaxUpdateBytes, or the update's
	// L2 norm exceeds the round's bound.
	ReasonTooLarge = "too_large"
	// ReasonTooHeavy: the update claims more samples (its FedAvg weight)
	// than the round's cap.
	ReasonTooHeavy    = "too_heavy"
	ReasonRoundClosed = "round_closed"
	// ReasonSubject: the update arrived on another site's subject than
	// the one its header names (a site relaying a message it did not
	// make); it is not attributed to either site.
	ReasonSubject = "wrong_subject"
	// ReasonSeqJump: the update's sequence is more than MaxSeqJump above
	// the site's high-water mark, which it does not move.
	ReasonSeqJump = "seq_jump"
)

// UpdateHeader describes an update message.
type UpdateHeader struct {
	V    int    `json:"v"`
	Site string `json:"site"`
	// Seq increases by one with every update the site makes (1 to
	// MaxSeq); with Site it is the idempotency key (MsgID).
	Seq   uint64 `json:"seq"`
	Round uint64 `json:"round"`
	// BaseModel is the model ID the delta applies to; BaseVersion its
	// version (async staleness).
	BaseModel   string `json:"base_model"`
	BaseVersion uint64 `json:"base_version"`
	// Samples weighs the update (scheduling decisions trained on).
	Samples int64     `json:"samples"`
	Created time.Time `json:"created"`
	// Metrics: the site's local training figures.
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// MsgID is the JetStream de-duplication ID of a site's update.
func MsgID(site string, seq uint64) string { return fmt.Sprintf("%s:%d", site, seq) }

// Update message layout (signed by the site's ed25519 key):
//
//	"ESUP"   magic
//	uint8    protocol version
//	uint8    key ID length K, K bytes key ID (the site's key)
//	uint32   header length H, H bytes header (JSON UpdateHeader)
//	uint32   payload length P, P bytes payload (a quant update, ESU1)
//	64 bytes ed25519 signature over every byte before it
const updateMagic = "ESUP"

// UpdateMsg is a decoded update message.
type UpdateMsg struct {
	Header  UpdateHeader
	KeyID   string
	Payload []byte
}

// EncodeUpdateMsg builds and signs an update message.
func EncodeUpdateMsg(h UpdateHeader, payload []byte, s *quant.Signer) ([]byte, error) {
	h.V = ProtocolVersion
	if err := h.validate(); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("%w: no signing key", ErrSiteSignature)
	}
	hb, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode update header: %w", err)
	}
	if len(hb) > MaxControlBytes {
		return nil, fmt.Errorf("%w: update header of %d bytes exceeds %d", ErrMessage, len(hb), MaxControlBytes)
	}
	var buf bytes.Buffer
	buf.WriteString(updateMagic)
	buf.WriteByte(ProtocolVersion)
	buf.WriteByte(byte(len(s.ID)))
	buf.WriteString(s.ID)
	_ = binary.Write(&buf, binary.LittleEndian, uint32(len(hb)))
	buf.Write(hb)
	_ = binary.Write(&buf, binary.LittleEndian, uint32(len(payload)))
	buf.Write(payload)
	return sealSigned(&buf, s, ErrMessage, "update")
}

// sealSigned appends s's signature over buf (a signed message's body: the
// update message's or the regional aggregate's) and returns the message,
// refused with kind when it would exceed MaxUpdateBytes.
func sealSigned(buf *bytes.Buffer, s *quant.Signer, kind error, what string) ([]byte, error) {
	if buf.Len()+ed25519.SignatureSize > MaxUpdateBytes {
		return nil, fmt.Errorf("%w: %s of %d bytes exceeds %d", kind, what, buf.Len(), MaxUpdateBytes)
	}
	buf.Write(s.Sign(buf.Bytes()))
	return buf.Bytes(), nil
}

// openSigned checks a signed message's frame (size cap, magic, protocol
// version, at least minLen bytes signature included) and splits off its
// signature; the caller parses the body and verifies the signature with
// the key the body names. Refusals wrap kind; name is the message's kind
// with its article ("an update").
func openSigned(b []byte, magic string, minLen int, kind error, name string) (body, sig []byte, err error) {
	if len(b) > MaxUpdateBytes {
		return nil, nil, fmt.Errorf("%w: %d bytes exceeds %d", kind, len(b), MaxUpdateBytes)
	}
	if len(b) < minLen || string(b[:len(magic)]) != magic {
		return nil, nil, fmt.Errorf("%w: not %s (magic)", kind, name)
	}
	if b[len(magic)] != ProtocolVersion {
		return nil, nil, fmt.Errorf("%w: protocol version %d, this build speaks %d", kind, b[len(magic)], ProtocolVersion)
	}
	return b[:len(b)-ed25519.SignatureSize], b[len(b)-ed25519.SignatureSize:], nil
}

// SiteKeys maps the sites allowed to send updates to their public keys.
type SiteKeys interface {
	// SiteKey returns the key registered for a site.
	SiteKey(site string) (ed25519.PublicKey, bool)
}

// DecodeUpdateMsg verifies and parses an update message: size, magic,
// version; the header (strict JSON) for the claimed site; the site must be
// registered in keys with exactly the key ID the message names, and the
// signature must verify, before the payload is handed back. Refusals wrap
// ErrMessage or ErrSiteSignature.
func DecodeUpdateMsg(b []byte, keys SiteKeys) (*UpdateMsg, error) {
	body, sig, err := openSigned(b, updateMagic, 4+2+4+4+ed25519.SignatureSize, ErrMessage, "an update")
	if err != nil {
		return nil, err
	}
	k := int(b[5])
	off := 6 + k
	if k == 0 || k > 64 || off+4 > len(body) {
		return nil, fmt.Errorf("%w: key ID length %d", ErrSiteSignature, k)
	}
	keyID := string(b[6:off])
	hl := int(binary.LittleEndian.Uint32(body[off:]))
	off += 4
	if hl > MaxControlBytes || off+hl+4 > len(body) {
		return nil, fmt.Errorf("%w: header length %d out of range", ErrMessage, hl)
	}
	var h UpdateHeader
	if err := decodeStrict(body[off:off+hl], &h); err != nil {
		return nil, fmt.Errorf("%w: update header: %v", ErrMessage, err)
	}
	off += hl
	pl := int(binary.LittleEndian.Uint32(body[off:]))
	off += 4
	if pl != len(body)-off {
		return nil, fmt.Errorf("%w: payload length %d, %d bytes follow", ErrMessage, pl, len(body)-off)
	}
	if keys == nil {
		return nil, fmt.Errorf("%w: no site keys to verify %q", ErrSiteSignature, h.Site)
	}
	pub, ok := keys.SiteKey(h.Site)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not registered", ErrUnknownSite, h.Site)
	}
	if quant.KeyID(pub) != keyID {
		return nil, fmt.Errorf("%w: site %q signs with %s, the message names %s", ErrSiteSignature, h.Site, quant.KeyID(pub), keyID)
	}
	if !ed25519.Verify(pub, body, sig) {
		return nil, fmt.Errorf("%w: signature of site %q does not verify (tampered or corrupt)", ErrSiteSignature, h.Site)
	}
	if err := h.validate(); err != nil {
		return nil, err
	}
	return &UpdateMsg{Header: h, KeyID: keyID, Payload: body[off:]}, nil
}

func (h *UpdateHeader) validate() error {
	switch {
	case h.V != ProtocolVersion:
		return fmt.Errorf("%w: update version %d, this build speaks %d", ErrMessage, h.V, ProtocolVersion)
	case !ValidSite(h.Site):
		return fmt.Errorf("%w: site %q is not a DNS label", ErrMessage, h.Site)
	case h.Seq == 0:
		return fmt.Errorf("%w: sequence 0 (sequences start at 1)", ErrMessage)
	case h.Seq > MaxSeq:
		return fmt.Errorf("%w: sequence %d above the highest a site may use (%d)", ErrMessage, h.Seq, MaxSeq)
	case len(h.BaseModel) != 64:
		return fmt.Errorf("%w: base model %q is not a model ID", ErrMessage, h.BaseModel)
	case h.Samples <= 0:
		return fmt.Errorf("%w: %d samples", ErrMessage, h.Samples)
	}
	return checkMetrics(h.Metrics)
}

// decodeStrict decodes one JSON value, refusing unknown fields and
// trailing data.
func decodeStrict(b []byte, v any) error { return decodeStrictMax(b, v, MaxControlBytes) }

// decodeStrictMax is decodeStrict for documents of at most limit bytes.
func decodeStrictMax(b []byte, v any, limit int) error {
	if len(b) > limit {
		return fmt.Errorf("%d bytes exceeds %d", len(b), limit)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	// dec.More reports false for a trailing '}' or ']', so ask for the
	// next token: only the end of input (after white space) is clean.
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data")
	}
	return nil
}

// DecodeAnnouncement parses a round announcement strictly.
func DecodeAnnouncement(b []byte) (*RoundAnnouncement, error) {
	var a RoundAnnouncement
	if err := decodeStrict(b, &a); err != nil {
		return nil, fmt.Errorf("%w: round announcement: %v", ErrMessage, err)
	}
	switch {
	case a.V != ProtocolVersion:
		return nil, fmt.Errorf("%w: announcement version %d, this build speaks %d", ErrMessage, a.V, ProtocolVersion)
	case a.Round == 0:
		return nil, fmt.Errorf("%w: round 0", ErrMessage)
	case a.Mode != Sync && a.Mode != Async:
		return nil, fmt.Errorf("%w: mode %q", ErrMessage, a.Mode)
	case len(a.BaseModel) != 64 || a.BaseObject == "":
		return nil, fmt.Errorf("%w: base model %q / object %q", ErrMessage, a.BaseModel, a.BaseObject)
	case a.Local.Iterations < 1 || a.Local.Iterations > 10000 || a.Local.Episodes < 1 || a.Local.Episodes > 1000 || !(a.Local.LR > 0 && a.Local.LR < 1) || !(a.Local.ProxMu >= 0 && a.Local.ProxMu < 1e6):
		return nil, fmt.Errorf("%w: local training %+v", ErrMessage, a.Local)
	case a.MinUpdates < 1:
		return nil, fmt.Errorf("%w: min_updates %d", ErrMessage, a.MinUpdates)
	}
	return &a, nil
}

// DecodeModelNotice parses a model notice strictly.
func DecodeModelNotice(b []byte) (*ModelNotice, error) {
	var n ModelNotice
	if err := decodeStrict(b, &n); err != nil {
		return nil, fmt.Errorf("%w: model notice: %v", ErrMessage, err)
	}
	switch {
	case n.V != ProtocolVersion:
		return nil, fmt.Errorf("%w: notice version %d, this build speaks %d", ErrMessage, n.V, ProtocolVersion)
	case n.Version == 0:
		return nil, fmt.Errorf("%w: model version 0", ErrMessage)
	case len(n.FloatModel) != 64 || len(n.Int8Model) != 64 || n.FloatObject == "" || n.Int8Object == "":
		return nil, fmt.Errorf("%w: model IDs/objects missing", ErrMessage)
	}
	return &n, nil
}

// DecodeAck parses an ack strictly.
func DecodeAck(b []byte) (*Ack, error) {
	var a Ack
	if err := decodeStrict(b, &a); err != nil {
		return nil, fmt.Errorf("%w: ack: %v", ErrMessage, err)
	}
	switch {
	case a.V != ProtocolVersion:
		return nil, fmt.Errorf("%w: ack version %d", ErrMessage, a.V)
	case !ValidSite(a.Site) || a.Seq == 0:
		return nil, fmt.Errorf("%w: ack for site %q seq %d", ErrMessage, a.Site, a.Seq)
	case a.Status != Accepted && a.Status != Duplicate && a.Status != Rejected:
		return nil, fmt.Errorf("%w: ack status %q", ErrMessage, a.Status)
	case a.HWM != 0 && (a.Status != Duplicate || a.Reason != ReasonReplay):
		return nil, fmt.Errorf("%w: ack %s (%s) with a high-water mark: only a replay carries one", ErrMessage, a.Status, a.Reason)
	case a.HWM != 0 && (a.HWM < a.Seq || a.HWM > MaxSeq):
		return nil, fmt.Errorf("%w: ack of replayed seq %d with high-water mark %d: want from the seq to %d", ErrMessage, a.Seq, a.HWM, uint64(MaxSeq))
	}
	return &a, nil
}

// Marshal encodes a control message (announcement, notice, ack).
func Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	return b, nil
}

func checkMetrics(m map[string]float64) error {
	if len(m) > 64 {
		return fmt.Errorf("%w: %d metrics (at most 64)", ErrMessage, len(m))
	}
	for k, v := range m {
		if v != v || v > 1e300 || v < -1e300 {
			return fmt.Errorf("%w: metric %s is %v", ErrMessage, k, v)
		}
	}
	return nil
}
