package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/boltkv"
)

// bbolt layout (coordinator.db). Every state change is one transaction.
var (
	BucketMeta    = []byte("meta")    // schema, current round, current model version, audit sequence
	BucketRounds  = []byte("rounds")  // round (uint64 BE) -> Round record
	BucketUpdates = []byte("updates") // round (uint64 BE) -> bucket: site (sync) or MsgID (async) -> stored update
	BucketSites   = []byte("sites")   // site -> Site record
	BucketModels  = []byte("models")  // version (uint64 BE) -> Model record
	BucketBlobs   = []byte("blobs")   // "<version>/float32" | "<version>/int8" -> artifact bytes (signed)
	BucketAudit   = []byte("audit")   // sequence (uint64 BE) -> Event record (the newest Config.AuditKeep)
	BucketRejects = []byte("rejects") // reason -> count (uint64 BE)
	BucketJudged  = []byte("judged")  // site 0x00 seq (uint64 BE) -> verdict record (judgedWindow per site)
	BucketRefused = []byte("refused") // stream seq (uint64 BE) of unattributable refused messages (refusedWindow)
	BucketSums    = []byte("sums")    // round (uint64 BE) -> a summing round's running sums (sum record, records.go)

	allBuckets = [][]byte{BucketMeta, BucketRounds, BucketUpdates, BucketSites, BucketModels, BucketBlobs, BucketAudit, BucketRejects, BucketJudged, BucketRefused, BucketSums}

	KeySchema  = []byte("schema")
	KeyRound   = []byte("round")
	KeyVersion = []byte("version")
	// KeyDPSecret holds 32 random bytes drawn when the store is created
	// (or first opened by a build that has them): the DP noise of a round
	// is drawn from them, the configured seed and the round number, so a
	// recomputation after a crash adds the same noise while no one without
	// the store can regenerate it and subtract it from a published model.
	KeyDPSecret = []byte("dp_secret")
	keyAudit    = []byte("audit")
)

// schemaVersion is the store's layout: "2" has checksummed records and
// binary stored updates (records.go); a store of schema "1" is migrated
// when it is opened (integrity.go).
//
// "3" adds summing rounds (bucket sums, stored updates without their
// payload): a store of schema "2" is migrated by creating the bucket (its
// rounds keep their payloads), and a build that reads "2" refuses a
// schema "3" store by name rather than misreading its records.
const SchemaVersion = "3"

// ErrStore wraps a damaged or foreign database.
var ErrStore = errors.New("coordinator: bad store")

// Round states.
const (
	StateCollecting  = "collecting"
	StateAggregating = "aggregating"
	StatePublished   = "published"
	StateFailed      = "failed"
)

// Round is a round's durable record.
type Round struct {
	Round       uint64                  `json:"round"`
	Mode        federated.Mode          `json:"mode"`
	State       string                  `json:"state"`
	BaseModel   string                  `json:"base_model"`
	BaseVersion uint64                  `json:"base_version"`
	Opened      time.Time               `json:"opened"`
	Deadline    time.Time               `json:"deadline"`
	MinUpdates  int                     `json:"min_updates"`
	Expected    []string                `json:"expected"`
	Local       federated.LocalTraining `json:"local"`
	Accepted    int                     `json:"accepted"`
	Rejected    map[string]int          `json:"rejected,omitempty"`
	// Closed is when aggregation started (the published artifacts carry it
	// as their creation time, so a recomputation is byte-identical).
	Closed time.Time `json:"closed,omitzero"`
	// Result is the model version the round published (0 before).
	Result uint64 `json:"result,omitempty"`
	// Note says why a round failed, or what its aggregation reported.
	Note  string             `json:"note,omitempty"`
	Stats map[string]float64 `json:"stats,omitempty"`
	// Reason classifies a failed round's failure (a FailReason* value).
	Reason string `json:"reason,omitempty"`
	// The round's bounds on updates, from the configuration when it
	// opened (0: none): an update whose L2 norm is above MaxNorm is
	// refused as too_large, one claiming more than MaxSamples samples as
	// too_heavy, and every update is clipped to ClipNorm when aggregated.
	MaxNorm    float64 `json:"max_norm,omitempty"`
	MaxSamples int64   `json:"max_samples,omitempty"`
	ClipNorm   float64 `json:"clip_norm,omitempty"`
	// Sum, when set, makes the round a summing one (FedAvg or FedBuff with
	// finite bounds): each accepted update is added to the round's running
	// sums (bucket sums) when it is judged, and only a small record of it
	// (stored update format 2: no payload) is kept. nil: the updates are
	// stored and combined when the round closes.
	Sum *SumSpec `json:"sum,omitempty"`
}

// SumSpec is how a summing round adds its updates (federated.FixedSum):
// the rule (fedavg or fedbuff, with FedBuff's staleness exponent), whether
// every update weighs 1 (DP) or its sample count, the bounds the fixed
// point was sized for (at most N updates, weights at most MaxWeight,
// values at most MaxAbs after clipping) and the shifts made from them.
type SumSpec struct {
	Rule       string  `json:"rule"`
	Exponent   float64 `json:"exponent,omitempty"`
	UnitWeight bool    `json:"unit_weight,omitempty"`
	N          int     `json:"n"`
	MaxWeight  float64 `json:"max_weight"`
	MaxAbs     float64 `json:"max_abs"`
	Shift      int     `json:"shift"`
	WShift     int     `json:"wshift"`
}

// Limit is the largest |weight * value| of a term.
func (s *SumSpec) Limit() float64 { return s.MaxWeight * s.MaxAbs }

// Reasons a round fails (Round.Reason, the label of the
// round_failures_total metric).
const (
	FailReasonQuorum    = "quorum"     // fewer updates than MinUpdates by the deadline
	FailReasonAggregate = "aggregate"  // the rule could not combine the updates
	FailReasonDP        = "dp"         // the DP noise could not be added
	FailReasonNonFinite = "non_finite" // the new weights are not finite
	FailReasonQuantize  = "quantize"   // the new model cannot be quantized to int8
	FailReasonSanity    = "sanity"     // the new model scores the calibration set absurdly
	FailReasonCalibrate = "calibrate"  // no calibration rows for the new model
	// FailReasonSuperseded: a newer model version was published while the
	// round ran (an operator's rollback or promotion); the round's model,
	// made from the older base, would have undone it.
	FailReasonSuperseded = "superseded"
)

// Site is what the coordinator knows of a site.
type Site struct {
	Site string `json:"site"`
	// HWM is the highest update sequence seen from the site (accepted or
	// not): anything at or below it is a duplicate or a replay.
	HWM       uint64         `json:"hwm"`
	LastSeen  time.Time      `json:"last_seen,omitzero"` // zero (omitted) until the site sends an update
	LastRound uint64         `json:"last_round"`
	Accepted  int            `json:"accepted"`
	Rejected  map[string]int `json:"rejected,omitempty"`
	// ModelVersion is the base version of the site's last update (the
	// model it trained from).
	ModelVersion uint64 `json:"model_version"`
	// LastStatus and LastReason are the verdict on update HWM: should the
	// stream deliver that update again (the coordinator stopped after
	// recording it, before acking it), it gets the same verdict.
	LastStatus federated.AckStatus `json:"last_status,omitempty"`
	LastReason string              `json:"last_reason,omitempty"`
	// JudgedFrom is the first sequence whose verdict is kept in the judged
	// bucket (1 for sites first seen by a coordinator that keeps them; HWM+1
	// for a site recorded before): an update at or below HWM and below
	// JudgedFrom, or more than judgedWindow below HWM, is a replay.
	JudgedFrom uint64 `json:"judged_from,omitempty"`
}

// judgedWindow is how many sequences below a site's HWM keep their
// verdicts. The stream redelivers an update the coordinator fetched but
// did not ack (it crashed) only after AckWait, while the site's newer
// updates may be judged meanwhile: such an update arrives below HWM but
// was never judged, and must be judged then, not refused as a replay. A
// site sends far fewer than 4,096 updates in an AckWait.
const JudgedWindow = 4096

// VerdictKept reports whether the verdict on update seq of a site at mark
// hwm, whose verdicts are kept from sequence from, is still in the judged
// bucket (should it have one): seq is at or above from and less than
// JudgedWindow below hwm. An update at or below hwm outside that range
// was judged, or is a replay; within it, only a kept verdict says so.
func VerdictKept(seq, from, hwm uint64) bool {
	return seq >= from && seq+JudgedWindow > hwm
}

// verdict is a judged update's recorded outcome.
type Verdict struct {
	Status federated.AckStatus `json:"status"`
	Reason string              `json:"reason,omitempty"`
	// Stream is the update stream's sequence of the message judged (0:
	// not from the stream): the same stream message delivered again (the
	// coordinator stopped after recording its verdict, before acking it)
	// gets this verdict again and counts nothing, whereas a copy published
	// anew (a replay) has another stream sequence.
	Stream uint64 `json:"stream,omitempty"`
}

func judgedKey(site string, seq uint64) []byte {
	k := make([]byte, 0, len(site)+9)
	k = append(k, site...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

// Model statuses.
const (
	ModelPending   = "pending"   // stored, not yet on the bus
	ModelPublished = "published" // in the object store and announced
	ModelCandidate = "candidate" // stored, waiting for promotion (AutoPublish off)
)

// Model is a registry entry.
type Model struct {
	Version    uint64    `json:"version"`
	Round      uint64    `json:"round"`
	Status     string    `json:"status"`
	FloatModel string    `json:"float_model"`
	Int8Model  string    `json:"int8_model"`
	Parent     string    `json:"parent,omitempty"`
	Created    time.Time `json:"created"`
	// Note records where the model came from (bootstrap, round, promote).
	Note string `json:"note,omitempty"`
}

// Event is an audit log entry.
type Event struct {
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"`
	Round  uint64    `json:"round,omitempty"`
	Site   string    `json:"site,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

// u64 and getU64 are the stores' big-endian uint64 keys and values.
var u64, getU64 = boltkv.U64, boltkv.GetU64

// maxAuditDetail caps an audit event's detail (error texts can be long).
const maxAuditDetail = 256

// audit appends an event in tx and forgets the oldest beyond keep (0:
// keep all).
func Audit(tx *bolt.Tx, now time.Time, keep int, kind string, round uint64, site, detail string) error {
	m := tx.Bucket(BucketMeta)
	seq := getU64(m, keyAudit) + 1
	if err := m.Put(keyAudit, u64(seq)); err != nil {
		return err
	}
	if len(detail) > maxAuditDetail {
		detail = detail[:maxAuditDetail] + "..."
	}
	b := tx.Bucket(BucketAudit)
	if err := PutRecord(b, u64(seq), Event{Seq: seq, Time: now.UTC(), Kind: kind, Round: round, Site: site, Detail: detail}); err != nil {
		return err
	}
	if keep > 0 && seq > uint64(keep) {
		return b.Delete(u64(seq - uint64(keep)))
	}
	return nil
}

// pruneAudit forgets every event but the newest keep (once, at open:
// afterwards audit keeps the log at its size).
func pruneAudit(tx *bolt.Tx, keep int) (int, error) {
	if keep <= 0 {
		return 0, nil
	}
	seq := getU64(tx.Bucket(BucketMeta), keyAudit)
	if seq <= uint64(keep) {
		return 0, nil
	}
	cutoff := u64(seq - uint64(keep) + 1)
	c := tx.Bucket(BucketAudit).Cursor()
	n := 0
	for k, _ := c.First(); k != nil && bytes.Compare(k, cutoff) < 0; k, _ = c.First() {
		if err := c.Delete(); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// GetRound reads a round record (nil when there is none).
func GetRound(tx *bolt.Tx, round uint64) (*Round, error) {
	var r Round
	ok, err := GetRecord(tx, BucketRounds, u64(round), &r)
	if err != nil || !ok {
		return nil, err
	}
	return &r, nil
}

// PutRound writes a round record.
func PutRound(tx *bolt.Tx, r *Round) error {
	return PutRecord(tx.Bucket(BucketRounds), u64(r.Round), r)
}

// RoundCache keeps the last round record decoded, with its stored bytes:
// a round lists every expected site, and it is read on every group of
// updates and by every status request, while it changes once per group.
type RoundCache struct {
	mu  sync.Mutex
	raw []byte
	r   Round
}

// Get is GetRound through the cache (the record is decoded again when
// its stored bytes differ). The Round returned is the caller's. Safe for
// concurrent use.
func (rc *RoundCache) Get(tx *bolt.Tx, round uint64) (*Round, error) {
	raw := tx.Bucket(BucketRounds).Get(u64(round))
	if raw == nil {
		return nil, nil
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !bytes.Equal(raw, rc.raw) {
		var r Round
		if err := DecodeRecord(raw, &r, RecordName(BucketRounds, u64(round))); err != nil {
			return nil, err
		}
		rc.raw, rc.r = append(rc.raw[:0], raw...), r
	}
	out := rc.r
	out.Expected = slices.Clone(rc.r.Expected)
	out.Rejected = maps.Clone(rc.r.Rejected)
	out.Stats = maps.Clone(rc.r.Stats)
	return &out, nil
}

// GetModel reads a registry entry (nil when there is none).
func GetModel(tx *bolt.Tx, version uint64) (*Model, error) {
	var m Model
	ok, err := GetRecord(tx, BucketModels, u64(version), &m)
	if err != nil || !ok {
		return nil, err
	}
	return &m, nil
}

// PutModel writes a registry entry.
func PutModel(tx *bolt.Tx, m *Model) error {
	return PutRecord(tx.Bucket(BucketModels), u64(m.Version), m)
}

// GetSite reads a site record (the zero Site when there is none).
func GetSite(tx *bolt.Tx, site string) (*Site, error) {
	var s Site
	if _, err := GetRecord(tx, BucketSites, []byte(site), &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// SitesAfter returns, in name order, the site records whose names sort
// after after ("": from the first), merged with the names of also (sorted,
// as federated.Registry.Sites gives them) that have no record, as zero
// records naming them; at most limit of them (limit <= 0: every one). A
// page of a listing: the next page starts after the last name returned.
func SitesAfter(tx *bolt.Tx, after string, limit int, also []string) ([]Site, error) {
	var out []Site
	full := func() bool { return limit > 0 && len(out) >= limit }
	i, _ := slices.BinarySearch(also, after)
	if i < len(also) && also[i] == after {
		i++
	}
	// names of also before name, not recorded: added in order
	upTo := func(name string, recorded bool) {
		for ; i < len(also) && (!recorded || also[i] <= name) && !full(); i++ {
			if !recorded || also[i] != name {
				out = append(out, Site{Site: also[i]})
			}
		}
	}
	c := tx.Bucket(BucketSites).Cursor()
	k, v := c.Seek([]byte(after))
	if k != nil && string(k) == after {
		k, v = c.Next()
	}
	for ; k != nil && !full(); k, v = c.Next() {
		upTo(string(k), true)
		if full() {
			break
		}
		var s Site
		if err := DecodeRecord(v, &s, RecordName(BucketSites, k)); err != nil {
			return out, err
		}
		out = append(out, s)
	}
	upTo("", false)
	return out, nil
}

// BlobKey is the key of a model version's artifact of dtype.
func BlobKey(version uint64, dtype string) []byte {
	return []byte(fmt.Sprintf("%020d/%s", version, dtype))
}

// CountReject counts one refusal for reason.
func CountReject(tx *bolt.Tx, reason string) error {
	b := tx.Bucket(BucketRejects)
	return b.Put([]byte(reason), u64(getU64(b, []byte(reason))+1))
}

// getVerdict returns the recorded verdict on site's update seq, if any.
func GetVerdict(tx *bolt.Tx, site string, seq uint64) (*Verdict, error) {
	var v Verdict
	ok, err := GetRecord(tx, BucketJudged, judgedKey(site, seq), &v)
	if err != nil || !ok {
		return nil, err
	}
	return &v, nil
}

// putVerdict records the verdict on site's update seq and forgets the
// site's verdicts more than judgedWindow below hwm.
func PutVerdict(tx *bolt.Tx, site string, seq, hwm uint64, v Verdict) error {
	b := tx.Bucket(BucketJudged)
	if err := PutRecord(b, judgedKey(site, seq), &v); err != nil {
		return err
	}
	if hwm <= JudgedWindow {
		return nil
	}
	prefix := append([]byte(site), 0)
	cutoff := judgedKey(site, hwm-JudgedWindow)
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && bytes.Compare(k, cutoff) < 0; k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// refusedWindow is how many stream sequences below the newest the record
// of refused unattributable messages covers (a redelivery comes back
// within the consumer's ack-pending limit).
const refusedWindow = 1 << 16

// seenUnattributed reports whether the unattributable message at stream
// sequence seq was refused before, and records it if not (forgetting the
// ones more than refusedWindow older).
func SeenUnattributed(tx *bolt.Tx, seq uint64) (bool, error) {
	if tx.Bucket(BucketRefused).Get(u64(seq)) != nil {
		return true, nil
	}
	return false, RecordRefusal(tx, seq, "")
}

// RefusedAs is the reason stream message seq was recorded refused for
// (RecordRefusal), "" when it was not (or as unattributable).
func RefusedAs(tx *bolt.Tx, seq uint64) string {
	return string(tx.Bucket(BucketRefused).Get(u64(seq)))
}

// RecordRefusal records stream message seq refused for reason ("": an
// unattributable message), forgetting the records more than
// refusedWindow stream sequences older.
func RecordRefusal(tx *bolt.Tx, seq uint64, reason string) error {
	b := tx.Bucket(BucketRefused)
	if err := b.Put(u64(seq), []byte(reason)); err != nil {
		return err
	}
	if seq > refusedWindow {
		cutoff := u64(seq - refusedWindow)
		c := b.Cursor()
		for k, _ := c.First(); k != nil && bytes.Compare(k, cutoff) < 0; k, _ = c.First() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
	}
	return nil
}
