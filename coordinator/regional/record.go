package regional

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/admin"
	"github.com/edgesched/edgesched/coordinator/aggregation"
	"github.com/edgesched/edgesched/coordinator/bounds"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/boltkv"
)

// The root's judging of a regional aggregate (docs/federated.md
// "Hierarchical rounds"). Verified against its region's key (Decode), an
// aggregate is judged as a whole in one transaction: either every site
// it lists is counted in the round — its exact partial sums merged into
// the round's sums (federated.FixedSum.Merge), each site's weight
// recomputed here from its listed samples and base version, a summed
// stored-update record and a verdict written for each site — or none is,
// and the refusal is named (Reason*), counted and audited. Its verdict
// is kept in Bucket with the aggregate's digest: the stream delivering it
// again, or the region sending it again after a restart, gets the same
// verdict and counts nothing (but for one refused for a round not yet
// open, whose verdict is not kept: it is judged again); once a region's aggregate of a round is
// accepted, any other aggregate of the region for that round is refused
// (ReasonRegionAgain).

// Bucket keeps regional aggregates' verdicts in coordinator.db: round
// (uint64 BE) followed by the region -> store.Verdict (a refused
// aggregate's key goes on with a zero byte and its digest). Created on
// first use; a build without hierarchical rounds ignores it.
var Bucket = []byte("regional")

// Digest identifies an aggregate's bytes in its verdict (never 0).
func Digest(data []byte) uint64 {
	sum := sha256.Sum256(data)
	return binary.BigEndian.Uint64(sum[:]) | 1
}

// Ledger is the root's store as judging an aggregate needs it.
type Ledger struct {
	AuditKeep int                // audit events kept (0: all)
	Regions   *federated.Regions // which sites each region may list
	Rule      string             // the aggregation rule (named when a round does not sum)
	// Round is the current round (nil: none) and Dims a stored model
	// version's parameter count, in tx.
	Round func(tx *bolt.Tx) (*store.Round, error)
	Dims  func(tx *bolt.Tx, version uint64) (int, error)
	// Sums are the current summing round's, as committed.
	Sums *aggregation.Cache
}

// Record judges aggregate a (Digest(its bytes): digest) in tx and records
// its verdict, which it sets in v (v's Region, Round and Sites are the
// aggregate's). It returns the current round when the aggregate was
// judged against it (nil: the verdict was found recorded), and whether
// that round now has every update it waits for. Its error is the
// store's only.
func (l *Ledger) Record(tx *bolt.Tx, a *federated.RegionalAggregate, digest uint64, v *Verdict, now time.Time) (*store.Round, bool, error) {
	v.Status, v.Reason, v.Detail, v.Again = federated.Rejected, "", "", false
	rb, err := tx.CreateBucketIfNotExists(Bucket)
	if err != nil {
		return nil, false, err
	}
	// the region's accepted aggregate of the round is kept under
	// round+region, each refused one under round+region+0+digest
	key := append(boltkv.U64(a.Header.Round), a.Header.Region...)
	refusedKey := binary.BigEndian.AppendUint64(append(slices.Clip(key), 0), digest)
	for _, k := range [][]byte{key, refusedKey} {
		raw := rb.Get(k)
		if raw == nil {
			continue
		}
		var old store.Verdict
		if err := store.DecodeRecord(raw, &old, store.RecordName(Bucket, k)); err != nil {
			return nil, false, err
		}
		if old.Stream == digest {
			v.Status, v.Reason, v.Again = old.Status, old.Reason, true
			return nil, false, nil
		}
		v.Reason, v.Detail = ReasonRegionAgain, fmt.Sprintf("region %s's aggregate of round %d was accepted before", a.Header.Region, a.Header.Round)
		return nil, false, l.Refuse(tx, now, v)
	}
	r, err := l.Round(tx)
	if err != nil {
		return nil, false, err
	}
	complete, err := l.merge(tx, r, a, v, now)
	if err != nil {
		return r, false, err
	}
	if v.Status == federated.Rejected {
		key = refusedKey
		if r == nil || a.Header.Round > r.Round {
			// a round not yet open: no verdict is kept, as Prune could not
			// reach it (any round number verifies); delivered again, it is
			// judged again (refused, or counted once its round is open:
			// this refusal counted nothing)
			return r, complete, l.Refuse(tx, now, v)
		}
	}
	if err := store.PutRecord(rb, key, &store.Verdict{Status: v.Status, Reason: v.Reason, Stream: digest}); err != nil {
		return r, complete, err
	}
	if v.Status == federated.Rejected {
		return r, complete, l.Refuse(tx, now, v)
	}
	return r, complete, nil
}

// merge checks aggregate a against round r and, when it passes, counts
// every site it lists (v.Status accepted); otherwise v names the refusal
// and nothing is written. It reports whether the round now has every
// update it waits for.
func (l *Ledger) merge(tx *bolt.Tx, r *store.Round, a *federated.RegionalAggregate, v *Verdict, now time.Time) (bool, error) {
	h := &a.Header
	refuse := func(reason, format string, args ...any) (bool, error) {
		v.Reason, v.Detail = reason, fmt.Sprintf(format, args...)
		return false, nil
	}
	switch {
	case r == nil || r.Round != h.Round || r.State != store.StateCollecting:
		state := "none"
		if r != nil {
			state = fmt.Sprintf("round %d is %s", r.Round, r.State)
		}
		return refuse(ReasonRoundNotOpen, "round %d: current: %s", h.Round, state)
	case r.Sum == nil:
		return refuse(ReasonNotSumming, "round %d stores its updates (rule %s)", r.Round, l.Rule)
	case h.Shift != r.Sum.Shift:
		return refuse(ReasonFixedPoint, "shift %d, the round's is %d", h.Shift, r.Sum.Shift)
	}
	dims, err := l.Dims(tx, r.BaseVersion)
	if err != nil {
		return false, err
	}
	if len(a.Hi) != dims {
		return refuse(federated.ReasonShape, "%d coordinates, the model has %d", len(a.Hi), dims)
	}
	ub := tx.Bucket(store.BucketUpdates).Bucket(boltkv.U64(r.Round))
	if ub == nil {
		return false, fmt.Errorf("%w: round %d has no update bucket", store.ErrStore, r.Round)
	}
	seen := make(map[string]bool, len(h.Sites))
	sites := make([]*store.Site, len(h.Sites))
	for i, s := range h.Sites {
		switch g, _ := l.Regions.RegionOf(s.Site); {
		case g != h.Region:
			return refuse(ReasonForeignSite, "site %s belongs to region %q, not %s", s.Site, g, h.Region)
		case seen[s.Site]:
			return refuse(ReasonSiteTwice, "site %s listed twice", s.Site)
		case ub.Get([]byte(s.Site)) != nil:
			return refuse(ReasonSiteCounted, "site %s already contributed to round %d", s.Site, r.Round)
		case r.MaxSamples > 0 && s.Samples > r.MaxSamples:
			return refuse(federated.ReasonTooHeavy, "site %s claims %d samples, the round's cap is %d", s.Site, s.Samples, r.MaxSamples)
		case r.MaxNorm > 0 && !(s.Norm <= r.MaxNorm):
			return refuse(federated.ReasonTooLarge, "site %s: L2 norm %.4g exceeds the round's bound %.4g", s.Site, s.Norm, r.MaxNorm)
		}
		seen[s.Site] = true
		if sites[i], err = store.GetSite(tx, s.Site); err != nil {
			return false, err
		}
		if s.Seq <= sites[i].HWM {
			return refuse(federated.ReasonReplay, "site %s seq %d, seen up to %d", s.Site, s.Seq, sites[i].HWM)
		}
	}
	acc, err := l.Sums.Get(tx, r, dims)
	if err != nil {
		return false, err
	}
	if acc.Sum.Count+uint64(len(h.Sites)) > uint64(r.Sum.N) {
		return refuse(federated.ReasonRoundClosed, "round %d has %d of its %d updates; the aggregate brings %d", r.Round, acc.Sum.Count, r.Sum.N, len(h.Sites))
	}
	headers := make([]federated.UpdateHeader, len(h.Sites))
	var most float64 // the L2 norm the sites' terms can add up to
	for i, s := range h.Sites {
		headers[i] = federated.UpdateHeader{V: federated.ProtocolVersion, Site: s.Site, Seq: s.Seq, Round: r.Round, BaseModel: r.BaseModel,
			BaseVersion: s.BaseVersion, Samples: s.Samples, Created: now}
		most += bounds.TermNorm(r, &headers[i], s.Norm)
	}
	if err := acc.Sum.MergeWithin(a.Hi, a.Lo, len(h.Sites), most); err != nil {
		return refuse(federated.ReasonTooLarge, "%v", err)
	}
	for i, s := range h.Sites {
		uh := &headers[i]
		acc.Sum.AddWeight(bounds.Weights(r, uh))
		rec, err := store.EncodeSummedUpdate(uh, s.Norm)
		if err != nil {
			return false, err
		}
		if err := ub.Put([]byte(s.Site), rec); err != nil {
			return false, err
		}
		site := sites[i]
		site.Site, site.LastSeen = s.Site, now
		if site.JudgedFrom == 0 {
			site.JudgedFrom = site.HWM + 1
		}
		site.HWM, site.Accepted, site.LastRound, site.ModelVersion = s.Seq, site.Accepted+1, r.Round, s.BaseVersion
		site.LastStatus, site.LastReason = federated.Accepted, ""
		if err := store.PutVerdict(tx, s.Site, s.Seq, site.HWM, store.Verdict{Status: federated.Accepted}); err != nil {
			return false, err
		}
		if err := store.PutRecord(tx.Bucket(store.BucketSites), []byte(s.Site), site); err != nil {
			return false, err
		}
	}
	if err := acc.Put(tx); err != nil {
		return false, err
	}
	r.Accepted += len(h.Sites)
	if err := store.PutRound(tx, r); err != nil {
		return false, err
	}
	v.Status = federated.Accepted
	if err := store.Audit(tx, now, l.AuditKeep, "regional.accepted", r.Round, "", fmt.Sprintf("region %s: %d sites", h.Region, len(h.Sites))); err != nil {
		return false, err
	}
	return r.Accepted >= len(r.Expected), nil
}

// Prune drops the verdicts of every round before round, accepted and
// refused: a region holding its key could otherwise grow Bucket without
// end with aggregates refused for their content, each its own digest. An
// aggregate of a pruned round delivered again is judged again and refused
// (its round is not open; ReasonRoundNotOpen, counted once more).
func Prune(tx *bolt.Tx, round uint64) error {
	b := tx.Bucket(Bucket)
	if b == nil {
		return nil
	}
	cutoff := boltkv.U64(round)
	c := b.Cursor()
	for k, _ := c.First(); k != nil && bytes.Compare(k, cutoff) < 0; k, _ = c.First() {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// Refuse records a refused aggregate in tx: the reason's count and the
// audit log.
func (l *Ledger) Refuse(tx *bolt.Tx, now time.Time, v *Verdict) error {
	if err := store.CountReject(tx, "regional."+v.Reason); err != nil {
		return err
	}
	return store.Audit(tx, now, l.AuditKeep, "regional.rejected", v.Round, "", fmt.Sprintf("region %q: %s: %s", v.Region, v.Reason, v.Detail))
}

// Statuses are the regions' records in the ledger (Bucket) of tx: per
// configured region, its sites, how many of its aggregates were accepted
// and refused in the rounds whose verdicts are kept (Prune), and the
// newest one's verdict (regions: none; a region the ledger holds but no
// longer configured is left out).
func Statuses(tx *bolt.Tx, regions *federated.Regions) ([]admin.RegionStatus, error) {
	out := []admin.RegionStatus{}
	at := map[string]int{}
	for _, g := range regions.Names() {
		at[g] = len(out)
		out = append(out, admin.RegionStatus{Region: g, Sites: len(regions.Sites(g))})
	}
	rb := tx.Bucket(Bucket)
	if rb == nil {
		return out, nil
	}
	err := rb.ForEach(func(k, v []byte) error { // (by round, then region)
		if len(k) <= 8 {
			return nil
		}
		g, _, _ := strings.Cut(string(k[8:]), "\x00")
		i, ok := at[g]
		if !ok {
			return nil
		}
		var vd store.Verdict
		if err := store.DecodeRecord(v, &vd, store.RecordName(Bucket, k)); err != nil {
			return err
		}
		s := &out[i]
		if vd.Status == federated.Accepted {
			s.Accepted++
		} else {
			s.Refused++
		}
		s.LastRound, s.Status, s.Reason = binary.BigEndian.Uint64(k[:8]), vd.Status, vd.Reason
		return nil
	})
	return out, err
}
