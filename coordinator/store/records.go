package store

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"reflect"
	"strings"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/boltkv"
)

// Stored records (schema 2). Every JSON record is its JSON followed by the
// CRC-32C of that JSON (4 bytes, big endian): bbolt checks the structure of
// its pages, not their content, so a flipped byte in a value — a changed
// deadline, a renamed field — is caught by the checksum. Records are
// decoded strictly: a bad checksum, an unknown field, a missing required
// field (one whose JSON tag has no omitempty), trailing data or a value
// out of range (each record type's check) is ErrStore, naming the bucket
// and key. The checksum guards against corruption, not against someone
// who can write the file: whoever can do that can also read the
// coordinator's signing key.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maxRecordBytes bounds a JSON record (a round lists every expected site:
// 100,000 sites of 63 characters fit).
const maxRecordBytes = 8 << 20

// encodeRecord renders v as a stored record.
func EncodeRecord(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return binary.BigEndian.AppendUint32(raw, crc32.Checksum(raw, castagnoli)), nil
}

// checker is a record type's range check, run after strict decoding.
type checker interface{ check() error }

// decodeRecord decodes a stored record into v (a pointer to a struct)
// strictly; what names it in errors ("rounds/5").
func DecodeRecord(raw []byte, v any, what string) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: record %s: %s", ErrStore, what, fmt.Sprintf(format, a...))
	}
	if len(raw) < 4 {
		return bad("%d bytes, too short for a record", len(raw))
	}
	if len(raw) > maxRecordBytes+4 {
		return bad("%d bytes exceeds %d", len(raw), maxRecordBytes)
	}
	body := raw[:len(raw)-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(raw[len(raw)-4:]) {
		return bad("checksum mismatch (the record was changed or damaged)")
	}
	if err := requireFields(body, v); err != nil {
		return bad("%v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bad("%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad("trailing data")
	}
	if c, ok := v.(checker); ok {
		if err := c.check(); err != nil {
			return bad("%v", err)
		}
	}
	return nil
}

// requiredFields caches, per struct type, the JSON names of its fields
// without omitempty/omitzero.
var requiredFields sync.Map // reflect.Type -> []string

func requireFields(body []byte, v any) error {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	names, ok := requiredFields.Load(t)
	if !ok {
		var req []string
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if !f.IsExported() || name == "-" || name == "" || strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero") {
				continue
			}
			req = append(req, name)
		}
		names, _ = requiredFields.LoadOrStore(t, req)
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(body, &present); err != nil {
		return err
	}
	for _, n := range names.([]string) {
		if _, ok := present[n]; !ok {
			return fmt.Errorf("required field %q missing", n)
		}
	}
	return nil
}

// putRecord stores v under k in b.
func PutRecord(b *bolt.Bucket, k []byte, v any) error {
	raw, err := EncodeRecord(v)
	if err != nil {
		return err
	}
	return b.Put(k, raw)
}

// getRecord decodes the record under k of bucket name into v; false when
// there is none.
func GetRecord(tx *bolt.Tx, bucket []byte, k []byte, v any) (bool, error) {
	raw := tx.Bucket(bucket).Get(k)
	if raw == nil {
		return false, nil
	}
	return true, DecodeRecord(raw, v, RecordName(bucket, k))
}

// recordName names a record in errors: bucket/key, numeric keys as
// numbers.
func RecordName(bucket, k []byte) string {
	switch {
	case len(k) == 8:
		return fmt.Sprintf("%s/%d", bucket, binary.BigEndian.Uint64(k))
	case bytes.IndexByte(k, 0) >= 0:
		site, seq, _ := bytes.Cut(k, []byte{0})
		if len(seq) == 8 {
			return fmt.Sprintf("%s/%s:%d", bucket, site, binary.BigEndian.Uint64(seq))
		}
	}
	return fmt.Sprintf("%s/%q", bucket, k)
}

// Range checks of the record types (decodeRecord runs them).

func (r *Round) check() error {
	switch {
	case r.Round == 0:
		return errors.New("round 0")
	case r.Mode != federated.Sync && r.Mode != federated.Async:
		return fmt.Errorf("mode %q", r.Mode)
	case r.State != StateCollecting && r.State != StateAggregating && r.State != StatePublished && r.State != StateFailed:
		return fmt.Errorf("state %q", r.State)
	case len(r.BaseModel) != 64 || r.BaseVersion == 0:
		return fmt.Errorf("base model %q version %d", r.BaseModel, r.BaseVersion)
	case r.Opened.IsZero() || r.Deadline.Before(r.Opened):
		return fmt.Errorf("opened %s, deadline %s", r.Opened, r.Deadline)
	case r.MinUpdates < 1 || r.Accepted < 0:
		return fmt.Errorf("min_updates %d, accepted %d", r.MinUpdates, r.Accepted)
	case r.State == StatePublished && r.Result == 0:
		return errors.New("published without a result version")
	case r.MaxNorm < 0 || r.ClipNorm < 0 || r.MaxSamples < 0:
		return fmt.Errorf("bounds max_norm %v, clip %v, max_samples %d", r.MaxNorm, r.ClipNorm, r.MaxSamples)
	}
	if s := r.Sum; s != nil {
		shift, wshift, ok := federated.FixedShifts(s.N, s.MaxWeight, s.MaxAbs)
		switch {
		case s.Rule != federated.RuleFedAvg && s.Rule != federated.RuleFedBuff:
			return fmt.Errorf("sum rule %q", s.Rule)
		case !(s.Exponent >= 0) || math.IsInf(s.Exponent, 0):
			return fmt.Errorf("sum exponent %v", s.Exponent)
		case !ok || s.Shift != shift || s.WShift != wshift:
			return fmt.Errorf("sum bounds n %d, weight %v, values %v with shifts %d/%d", s.N, s.MaxWeight, s.MaxAbs, s.Shift, s.WShift)
		}
	}
	for _, s := range r.Expected {
		if !federated.ValidSite(s) {
			return fmt.Errorf("expected site %q", s)
		}
	}
	return nil
}

func (s *Site) check() error {
	if !federated.ValidSite(s.Site) || s.Accepted < 0 {
		return fmt.Errorf("site %q, accepted %d", s.Site, s.Accepted)
	}
	return nil
}

func (m *Model) check() error {
	switch {
	case m.Version == 0:
		return errors.New("version 0")
	case m.Status != ModelPending && m.Status != ModelPublished && m.Status != ModelCandidate:
		return fmt.Errorf("status %q", m.Status)
	case !isModelID(m.FloatModel) || !isModelID(m.Int8Model):
		return fmt.Errorf("model IDs %q / %q", m.FloatModel, m.Int8Model)
	}
	return nil
}

func (e *Event) check() error {
	if e.Seq == 0 || e.Kind == "" {
		return fmt.Errorf("event %d kind %q", e.Seq, e.Kind)
	}
	return nil
}

func (v *Verdict) check() error {
	switch v.Status {
	case federated.Accepted, federated.Duplicate, federated.Rejected:
		return nil
	}
	return fmt.Errorf("status %q", v.Status)
}

func isModelID(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// A stored update (schema 2) is binary: the message was verified when it
// arrived, so the store keeps what aggregation needs and the site's payload
// as it came (a quant update with its own CRC), without re-encoding it:
//
//	"ESST"   magic
//	uint8    format (1; 2: an update of a summing round)
//	uint8    site length S, S bytes site
//	uint64   seq, round, base version
//	int64    samples
//	32 bytes base model ID (raw)
//	format 1: uint32 payload length P, P bytes payload
//	format 2: float64 the payload's L2 norm (its values are in the round's
//	          running sums, bucket sums)
//	uint32   CRC-32C of everything before it
//
// All numbers big endian.
const storedMagic = "ESST"

// storedUpdate is an accepted update as kept in the store.
type StoredUpdate struct {
	Site        string
	Seq         uint64
	Round       uint64
	BaseVersion uint64
	Samples     int64
	BaseModel   string // hex
	Payload     []byte // format 1
	// Summed (format 2): the update was added to its round's sums; Norm
	// is its payload's L2 norm and there is no Payload.
	Summed bool
	Norm   float64
}

// storedHeader appends the fields both formats share.
func storedHeader(format byte, h *federated.UpdateHeader, extra int) ([]byte, error) {
	base, err := hex.DecodeString(h.BaseModel)
	if err != nil || len(base) != 32 || len(h.Site) > 255 {
		return nil, fmt.Errorf("%w: update of %q cannot be stored (base %q)", ErrStore, h.Site, h.BaseModel)
	}
	b := make([]byte, 0, 4+2+len(h.Site)+32+32+extra+4)
	b = append(b, storedMagic...)
	b = append(b, format, byte(len(h.Site)))
	b = append(b, h.Site...)
	b = binary.BigEndian.AppendUint64(b, h.Seq)
	b = binary.BigEndian.AppendUint64(b, h.Round)
	b = binary.BigEndian.AppendUint64(b, h.BaseVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(h.Samples))
	return append(b, base...), nil
}

// EncodeStoredUpdate is the stored form of a verified update.
func EncodeStoredUpdate(h *federated.UpdateHeader, payload []byte) ([]byte, error) {
	b, err := storedHeader(1, h, 4+len(payload))
	if err != nil {
		return nil, err
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, payload...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// EncodeSummedUpdate is the stored form (format 2) of a verified update
// whose values went into its round's running sums: its header and norm.
func EncodeSummedUpdate(h *federated.UpdateHeader, norm float64) ([]byte, error) {
	b, err := storedHeader(2, h, 8)
	if err != nil {
		return nil, err
	}
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(norm))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// decodeStoredUpdate parses a stored update strictly (what names it in
// errors). Payload aliases raw: copy it to keep it past the transaction.
func DecodeStoredUpdate(raw []byte, what string) (*StoredUpdate, error) {
	bad := func(format string, a ...any) (*StoredUpdate, error) {
		return nil, fmt.Errorf("%w: stored update %s: %s", ErrStore, what, fmt.Sprintf(format, a...))
	}
	if len(raw) < 10 || string(raw[:4]) != storedMagic || (raw[4] != 1 && raw[4] != 2) {
		return bad("not a stored update (magic/format)")
	}
	body := raw[:len(raw)-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(raw[len(raw)-4:]) {
		return bad("checksum mismatch (the record was changed or damaged)")
	}
	s := int(raw[5])
	off := 6 + s
	if off+32+32+8 > len(body) {
		return bad("truncated header")
	}
	u := &StoredUpdate{Site: string(raw[6:off])}
	u.Seq = binary.BigEndian.Uint64(body[off:])
	u.Round = binary.BigEndian.Uint64(body[off+8:])
	u.BaseVersion = binary.BigEndian.Uint64(body[off+16:])
	u.Samples = int64(binary.BigEndian.Uint64(body[off+24:]))
	u.BaseModel = hex.EncodeToString(body[off+32 : off+64])
	off += 64
	if raw[4] == 2 {
		if len(body)-off != 8 {
			return bad("%d bytes after the header, want 8 (the norm)", len(body)-off)
		}
		u.Summed, u.Norm = true, math.Float64frombits(binary.BigEndian.Uint64(body[off:]))
		if !(u.Norm >= 0) || math.IsInf(u.Norm, 0) {
			return bad("norm %v", u.Norm)
		}
	} else {
		p := int(binary.BigEndian.Uint32(body[off:]))
		off += 4
		if p != len(body)-off {
			return bad("payload of %d bytes, %d follow", p, len(body)-off)
		}
		u.Payload = body[off:]
	}
	if !federated.ValidSite(u.Site) || u.Seq == 0 || u.Samples <= 0 {
		return bad("site %q seq %d samples %d", u.Site, u.Seq, u.Samples)
	}
	return u, nil
}

// A summing round's running sums (bucket sums, key the round) are binary:
//
//	"ESUM"   magic
//	uint8    format (1)
//	uint64   round
//	uint32   dimension D
//	uint16   shift, weight shift
//	uint64   count, staleness sum, staleness max
//	2 x (int64, uint64)  weight total, sample total (fixed point)
//	D x (int64, uint64)  the coordinates' sums (fixed point)
//	uint32   CRC-32C of everything before it
//
// All numbers big endian.
const sumMagic = "ESUM"

const sumHeaderLen = 4 + 1 + 8 + 4 + 2 + 2 + 3*8 + 2*16

// EncodeSum is the stored form of round's running sums, appended to buf
// (reused from commit to commit: 16 bytes a coordinate).
func EncodeSum(buf []byte, round uint64, s *federated.FixedSum) []byte {
	b := buf[:0]
	b = append(b, sumMagic...)
	b = append(b, 1)
	b = binary.BigEndian.AppendUint64(b, round)
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Hi)))
	b = binary.BigEndian.AppendUint16(b, uint16(s.Shift))
	b = binary.BigEndian.AppendUint16(b, uint16(s.WShift))
	b = binary.BigEndian.AppendUint64(b, s.Count)
	b = binary.BigEndian.AppendUint64(b, s.StaleSum)
	b = binary.BigEndian.AppendUint64(b, s.StaleMax)
	for _, v := range []federated.Int128{s.Weight, s.Samples} {
		b = binary.BigEndian.AppendUint64(b, uint64(v.Hi))
		b = binary.BigEndian.AppendUint64(b, v.Lo)
	}
	n := len(b)
	b = append(b, make([]byte, 16*len(s.Hi))...)
	for i, h := range s.Hi {
		binary.BigEndian.PutUint64(b[n+16*i:], uint64(h))
		binary.BigEndian.PutUint64(b[n+16*i+8:], s.Lo[i])
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// DecodeSum parses round's stored running sums strictly into s (its
// slices reused when they have room; what names the record in errors).
func DecodeSum(raw []byte, round uint64, s *federated.FixedSum, what string) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: sums %s: %s", ErrStore, what, fmt.Sprintf(format, a...))
	}
	if len(raw) < sumHeaderLen+4 || string(raw[:4]) != sumMagic || raw[4] != 1 {
		return bad("not a sum record (magic/format)")
	}
	body := raw[:len(raw)-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(raw[len(raw)-4:]) {
		return bad("checksum mismatch (the record was changed or damaged)")
	}
	if r := binary.BigEndian.Uint64(body[5:]); r != round {
		return bad("holds round %d", r)
	}
	dim := int(binary.BigEndian.Uint32(body[13:]))
	if len(body) != sumHeaderLen+16*dim {
		return bad("%d bytes for %d coordinates", len(body), dim)
	}
	s.Shift = int(binary.BigEndian.Uint16(body[17:]))
	s.WShift = int(binary.BigEndian.Uint16(body[19:]))
	s.Count = binary.BigEndian.Uint64(body[21:])
	s.StaleSum = binary.BigEndian.Uint64(body[29:])
	s.StaleMax = binary.BigEndian.Uint64(body[37:])
	s.Weight = federated.Int128{Hi: int64(binary.BigEndian.Uint64(body[45:])), Lo: binary.BigEndian.Uint64(body[53:])}
	s.Samples = federated.Int128{Hi: int64(binary.BigEndian.Uint64(body[61:])), Lo: binary.BigEndian.Uint64(body[69:])}
	if cap(s.Hi) >= dim && cap(s.Lo) >= dim {
		s.Hi, s.Lo = s.Hi[:dim], s.Lo[:dim]
	} else {
		s.Hi, s.Lo = make([]int64, dim), make([]uint64, dim)
	}
	p := body[sumHeaderLen:]
	for i := range dim {
		s.Hi[i] = int64(binary.BigEndian.Uint64(p[16*i:]))
		s.Lo[i] = binary.BigEndian.Uint64(p[16*i+8:])
	}
	return nil
}

// DecodeEvent decodes an audit log record as stored in coordinator.db
// (bucket "audit"), for tools and tests that read the file itself.
func DecodeEvent(raw []byte) (*Event, error) {
	var e Event
	if err := DecodeRecord(raw, &e, "audit"); err != nil {
		return nil, err
	}
	return &e, nil
}

// Newest decodes the last limit records of bucket, newest (highest key)
// first. check sees each record's stored bytes, with how many were
// decoded before it, before it is decoded: an error from it (a budget of
// bytes spent) ends the listing with that error.
func Newest[T any](tx *bolt.Tx, bucket []byte, limit int, check func(raw []byte, n int) error) ([]T, error) {
	var out []T
	cur := tx.Bucket(bucket).Cursor()
	for k, v := cur.Last(); k != nil && len(out) < limit; k, v = cur.Prev() {
		if err := check(v, len(out)); err != nil {
			return nil, err
		}
		var r T
		if err := DecodeRecord(v, &r, RecordName(bucket, k)); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// PruneUpdates drops the stored updates (BucketUpdates) and running sums
// (BucketSums) of every round below round.
func PruneUpdates(tx *bolt.Tx, round uint64) {
	cutoff := binary.BigEndian.AppendUint64(nil, round) // keys below it go
	var old [][]byte
	ub := tx.Bucket(BucketUpdates)
	cur := ub.Cursor()
	for k, _ := cur.First(); k != nil && bytes.Compare(k, cutoff) < 0; k, _ = cur.Next() {
		old = append(old, bytes.Clone(k))
	}
	for _, k := range old {
		_ = ub.DeleteBucket(k)
	}
	sc := tx.Bucket(BucketSums).Cursor()
	for k, _ := sc.First(); k != nil && bytes.Compare(k, cutoff) < 0; k, _ = sc.First() {
		if sc.Delete() != nil {
			break
		}
	}
}

// keyDPPruned counts the noised rounds whose records PruneRounds dropped.
var keyDPPruned = []byte("dp_pruned")

// Noised reports whether r is a published round whose model was noised
// for differential privacy (a step of the DP accountant).
func (r *Round) Noised() bool { return r.State == StatePublished && r.Stats["dp_epsilon"] > 0 }

// PruneRounds drops the records of the oldest rounds before round, at
// most pruneRoundsMax of them (a store that kept every round catches up
// over later calls, not in one transaction), counting the noised ones
// first (NoisedRounds), so the DP accountant's steps survive them: the
// count is written before any delete, and a record that does not decode
// counts as noised (an overstated privacy loss, never an understated one).
func PruneRounds(tx *bolt.Tx, round uint64) error {
	cutoff := u64(round)
	var noised uint64
	var old [][]byte
	c := tx.Bucket(BucketRounds).Cursor()
	for k, v := c.First(); k != nil && bytes.Compare(k, cutoff) < 0 && len(old) < pruneRoundsMax; k, v = c.Next() {
		var r Round
		if DecodeRecord(v, &r, RecordName(BucketRounds, k)) != nil || r.Noised() {
			noised++
		}
		old = append(old, bytes.Clone(k))
	}
	if noised > 0 {
		meta := tx.Bucket(BucketMeta)
		if err := meta.Put(keyDPPruned, u64(getU64(meta, keyDPPruned)+noised)); err != nil {
			return err
		}
	}
	for _, k := range old {
		if err := tx.Bucket(BucketRounds).Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// pruneRoundsMax is the most round records one PruneRounds drops.
const pruneRoundsMax = 100

// NoisedRounds is how many rounds were noised: the records that say so
// and those PruneRounds dropped (a record that does not decode is not
// counted here: the store's integrity check refuses it at open).
func NoisedRounds(tx *bolt.Tx) uint64 {
	n := getU64(tx.Bucket(BucketMeta), keyDPPruned)
	_ = tx.Bucket(BucketRounds).ForEach(func(k, v []byte) error {
		var r Round
		if DecodeRecord(v, &r, RecordName(BucketRounds, k)) == nil && r.Noised() {
			n++
		}
		return nil
	})
	return n
}

// Rejects returns the counts of refused updates by reason (BucketRejects).
func Rejects(tx *bolt.Tx) map[string]uint64 {
	out := map[string]uint64{}
	b := tx.Bucket(BucketRejects)
	_ = b.ForEach(func(k, _ []byte) error {
		out[string(k)] = boltkv.GetU64(b, k)
		return nil
	})
	return out
}
