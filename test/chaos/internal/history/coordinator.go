package history

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/coordinator/store"
)

// Verdict is the coordinator's recorded decision on one site update.
type Verdict struct {
	Site     string    `json:"site"`
	Seq      uint64    `json:"seq"`
	Round    uint64    `json:"round"`
	Accepted bool      `json:"accepted"`
	Reason   string    `json:"reason,omitempty"`
	Time     time.Time `json:"time"`
}

// CoordinatorView is what a coordinator.db holds that the checker needs.
type CoordinatorView struct {
	Verdicts []Verdict
	// Unattributed counts refusals of messages that named no valid site
	// (malformed, bad signature, unknown site), by reason.
	Unattributed map[string]int
	Rounds       []coordinator.Round
	Models       []coordinator.Model
	Sites        []coordinator.Site
	// Rejects are the store's refusal counters by reason.
	Rejects map[string]uint64
	// Events counts audit events by kind.
	Events map[string]int
}

// coordinator.db's buckets, as coordinator/store.go lays them out.
var (
	bucketRounds  = []byte("rounds")
	bucketSites   = []byte("sites")
	bucketModels  = []byte("models")
	bucketAudit   = []byte("audit")
	bucketRejects = []byte("rejects")
)

// Audit details of update verdicts: "seq N, ..." (accepted) and
// "seq N: REASON: ..." (refused, with the site named).
var (
	acceptedDetail = regexp.MustCompile(`^seq (\d+),`)
	rejectedDetail = regexp.MustCompile(`^seq (\d+): ([a-z_]+):`)
	reasonOnly     = regexp.MustCompile(`^([a-z_]+):`)
)

// ReadCoordinator reads a coordinator.db (read-only; the coordinator must
// have stopped). An audit entry of an update verdict whose detail cannot
// be parsed is an error: the checker would otherwise miss verdicts.
func ReadCoordinator(path string) (*CoordinatorView, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("history: open %s: %w", path, err)
	}
	defer db.Close()
	v := &CoordinatorView{Unattributed: map[string]int{}, Rejects: map[string]uint64{}, Events: map[string]int{}}
	err = db.View(func(tx *bolt.Tx) error {
		if err := eachJSON(tx, bucketRounds, func(r coordinator.Round) { v.Rounds = append(v.Rounds, r) }); err != nil {
			return err
		}
		if err := eachJSON(tx, bucketModels, func(m coordinator.Model) { v.Models = append(v.Models, m) }); err != nil {
			return err
		}
		if err := eachJSON(tx, bucketSites, func(s coordinator.Site) { v.Sites = append(v.Sites, s) }); err != nil {
			return err
		}
		if b := tx.Bucket(bucketRejects); b != nil {
			if err := b.ForEach(func(k, val []byte) error {
				if len(val) == 8 {
					v.Rejects[string(k)] = binary.BigEndian.Uint64(val)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		var bad error
		err := eachJSON(tx, bucketAudit, func(e coordinator.Event) {
			v.Events[e.Kind]++
			if bad != nil {
				return
			}
			if vd, ok, err := verdictOf(e); err != nil {
				bad = err
			} else if ok {
				v.Verdicts = append(v.Verdicts, vd)
			} else if e.Kind == "update.rejected" {
				reason := "unknown"
				if m := reasonOnly.FindStringSubmatch(e.Detail); m != nil {
					reason = m[1]
				}
				v.Unattributed[reason]++
			}
		})
		if err != nil {
			return err
		}
		return bad
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// verdictOf turns an audit event into a site update's verdict (ok false
// for other events and for refusals of unattributed messages).
func verdictOf(e coordinator.Event) (Verdict, bool, error) {
	switch {
	case e.Kind == "update.accepted":
		m := acceptedDetail.FindStringSubmatch(e.Detail)
		if m == nil || e.Site == "" {
			return Verdict{}, false, fmt.Errorf("history: audit %d: accepted update without site or seq: %q", e.Seq, e.Detail)
		}
		seq, err := strconv.ParseUint(m[1], 10, 64)
		return Verdict{Site: e.Site, Seq: seq, Round: e.Round, Accepted: true, Time: e.Time}, err == nil, err
	case e.Kind == "update.rejected" && e.Site != "":
		m := rejectedDetail.FindStringSubmatch(e.Detail)
		if m == nil {
			return Verdict{}, false, fmt.Errorf("history: audit %d: refused update of %s without seq and reason: %q", e.Seq, e.Site, e.Detail)
		}
		seq, err := strconv.ParseUint(m[1], 10, 64)
		return Verdict{Site: e.Site, Seq: seq, Round: e.Round, Reason: m[2], Time: e.Time}, err == nil, err
	}
	return Verdict{}, false, nil
}

func eachJSON[T any](tx *bolt.Tx, bucket []byte, f func(T)) error {
	b := tx.Bucket(bucket)
	if b == nil {
		return fmt.Errorf("history: coordinator.db has no %s bucket", bucket)
	}
	return b.ForEach(func(k, raw []byte) error {
		if raw == nil {
			return nil // a nested bucket
		}
		var v T
		// the coordinator's own strict decoder: records carry a checksum
		what := fmt.Sprintf("%s/%x", bucket, k)
		if err := store.DecodeRecord(raw, &v, what); err != nil {
			return fmt.Errorf("history: %w", err)
		}
		f(v)
		return nil
	})
}
