package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/aggregation"
	"github.com/edgesched/edgesched/coordinator/bounds"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/boltkv"
	"github.com/edgesched/edgesched/quant"
)

// Rules are what of the coordinator's configuration verdicts follow, and
// the running sums a summing round's accepted updates go into.
type Rules struct {
	AuditKeep    int // audit events kept (0: all)
	MaxStaleness int // versions an async update may lag (0: any)
	Buffer       int // an async round's aggregation size
	// OnePerSite limits an async round to one update per site, as a sync
	// round is: set for the robust rules, whose guarantees count distinct
	// sites, and under DP, whose noise is calibrated for one clipped
	// update per site. false: a site may fill the buffer (FedBuff).
	OnePerSite bool
	// Workers add a group's accepted updates to the sums (0: GOMAXPROCS).
	Workers int
	// Regional reports whether a site belongs to a region (nil: none
	// does). Its updates reach this coordinator relayed by the region,
	// which refuses a sequence jump against its own marks; this
	// coordinator's marks lag the region's (a region's move with the
	// updates it refuses), so it does not check them again.
	Regional func(site string) bool
	Sums     *aggregation.Cache
}

// Batch is what one judging transaction keeps in memory: the current
// round (written back once, by Commit, when an update changed it) and a
// summing round's sums with the group's accepted updates, added to them by
// Commit. Make a new one for each transaction.
type Batch struct {
	Rules
	Round    *store.Round // the current round (nil: none yet)
	Dims     int          // its parameter count
	Complete bool         // the round has all it waits for: close it after the commit

	dirty bool
	sums  *aggregation.Sums
	terms []federated.FixedTerm
}

// RoundComplete reports whether collecting round r has every update it
// waits for: every expected site's (sync), or buffer of them (async).
func RoundComplete(r *store.Round, buffer int) bool {
	return (r.Mode == federated.Sync && r.Accepted >= len(r.Expected)) || (r.Mode == federated.Async && r.Accepted >= buffer)
}

// Judge judges one verified message inside the batch's transaction and
// sets its verdict (Ack, Again, Reason).
func (b *Batch) Judge(tx *bolt.Tx, in *Incoming, now time.Time) error {
	in.Ack, in.Again, in.Reason = nil, false, ""
	if in.Err != nil {
		reason := federated.ReasonMalformed
		switch {
		case errors.Is(in.Err, federated.ErrWrongSubject):
			reason = federated.ReasonSubject
		case errors.Is(in.Err, federated.ErrUnknownSite):
			reason = federated.ReasonUnknownSite
		case errors.Is(in.Err, federated.ErrSiteSignature):
			reason = federated.ReasonSignature
		case len(in.Data) > federated.MaxUpdateBytes:
			reason = federated.ReasonTooLarge
		}
		in.Reason = reason
		if in.StreamSeq > 0 {
			again, err := store.SeenUnattributed(tx, in.StreamSeq)
			if err != nil {
				return err
			}
			if again {
				in.Again = true
				in.Ack = nil
				return nil
			}
		}
		if err := store.CountReject(tx, reason); err != nil {
			return err
		}
		return store.Audit(tx, now, b.AuditKeep, "update.rejected", 0, "", fmt.Sprintf("%s: %v", reason, in.Err))
	}
	h := in.Msg.Header
	ack := &federated.Ack{V: federated.ProtocolVersion, Site: h.Site, Seq: h.Seq, Round: h.Round}
	in.Ack = ack
	if in.StreamSeq > 0 && store.RefusedAs(tx, in.StreamSeq) == federated.ReasonSeqJump {
		// refused as seq_jump before (refuseJump): the same verdict,
		// whatever the mark is now, and nothing changes
		ack.Status, ack.Reason, in.Again = federated.Rejected, federated.ReasonSeqJump, true
		return nil
	}
	site, err := store.GetSite(tx, h.Site)
	if err != nil {
		return err
	}
	site.Site, site.LastSeen = h.Site, now
	if site.JudgedFrom == 0 {
		site.JudgedFrom = site.HWM + 1 // verdicts are kept from here on
	}
	if h.Seq == site.HWM && site.LastStatus != "" && h.Seq < site.JudgedFrom {
		// (a record from before verdicts were kept) the stream redelivers
		// the update recorded last when the coordinator stopped between
		// recording it and acking it: same verdict
		ack.Status, ack.Reason, in.Again = site.LastStatus, site.LastReason, true
		return nil
	}
	judged := h.Seq <= site.HWM // without kept verdicts, HWM says
	if store.VerdictKept(h.Seq, site.JudgedFrom, site.HWM) {
		v, err := store.GetVerdict(tx, h.Site, h.Seq)
		if err != nil {
			return err
		}
		if v != nil && (h.Seq == site.HWM || (in.StreamSeq > 0 && v.Stream == in.StreamSeq)) {
			// the stream delivers again a message judged before (the
			// coordinator stopped between recording its verdict and
			// acking it): the same verdict, and nothing changes (it is no
			// replay)
			ack.Status, ack.Reason, in.Again = v.Status, v.Reason, true
			return nil
		}
		// Not judged though below HWM: the stream redelivered it after
		// newer ones (the coordinator had fetched it and stopped before
		// judging it, and the site's later updates were judged while it
		// waited out AckWait): judge it now.
		judged = v != nil
	}
	if judged {
		// the same message again (a retry whose ack was lost, after the
		// stream's de-duplication window) or an old one replayed: either
		// way it changes nothing, and it is counted
		// with the high-water mark, so a site whose store lost its
		// sequence continues above it (federated.Ack.HWM)
		ack.Status, ack.Reason, ack.HWM = federated.Duplicate, federated.ReasonReplay, site.HWM
		if err := countRejected(tx, site, federated.ReasonReplay); err != nil {
			return err
		}
		return store.PutRecord(tx.Bucket(store.BucketSites), []byte(h.Site), site)
	}
	if federated.SeqJump(site.HWM, h.Seq) && (b.Regional == nil || !b.Regional(h.Site)) {
		return b.refuseJump(tx, in, site, now)
	}
	site.HWM = max(site.HWM, h.Seq)
	reason, detail, err := b.accept(tx, in, now)
	if err != nil {
		return err
	}
	if reason != "" {
		ack.Status, ack.Reason = federated.Rejected, reason
		if err := countRejected(tx, site, reason); err != nil {
			return err
		}
		if err := store.Audit(tx, now, b.AuditKeep, "update.rejected", h.Round, h.Site, fmt.Sprintf("seq %d: %s: %s", h.Seq, reason, detail)); err != nil {
			return err
		}
	} else {
		ack.Status = federated.Accepted
		site.Accepted++
		site.LastRound, site.ModelVersion = h.Round, h.BaseVersion
	}
	if h.Seq == site.HWM {
		site.LastStatus, site.LastReason = ack.Status, ack.Reason
	}
	if err := store.PutVerdict(tx, h.Site, h.Seq, site.HWM, store.Verdict{Status: ack.Status, Reason: ack.Reason, Stream: in.StreamSeq}); err != nil {
		return err
	}
	return store.PutRecord(tx.Bucket(store.BucketSites), []byte(h.Site), site)
}

// refuseJump refuses an update whose sequence is more than
// federated.MaxSeqJump above the site's high-water mark (seq_jump),
// leaving the mark where it was, so the site's own next sequence stays
// above it. It keeps no verdict under the site and sequence (one above
// the mark would never be pruned, and a flood of such sequences would
// grow the store): a redelivery of the same stream message is known by
// its stream sequence (Judge), as an unattributable message's is, and
// answered again without being counted again, even when the mark has
// moved meanwhile.
func (b *Batch) refuseJump(tx *bolt.Tx, in *Incoming, site *store.Site, now time.Time) error {
	h := in.Msg.Header
	in.Ack.Status, in.Ack.Reason = federated.Rejected, federated.ReasonSeqJump
	if in.StreamSeq > 0 {
		if err := store.RecordRefusal(tx, in.StreamSeq, federated.ReasonSeqJump); err != nil {
			return err
		}
	}
	if err := countRejected(tx, site, federated.ReasonSeqJump); err != nil {
		return err
	}
	if err := store.Audit(tx, now, b.AuditKeep, "update.rejected", h.Round, h.Site,
		fmt.Sprintf("seq %d: %s: more than %d above the site's high-water mark %d", h.Seq, federated.ReasonSeqJump, federated.MaxSeqJump, site.HWM)); err != nil {
		return err
	}
	return store.PutRecord(tx.Bucket(store.BucketSites), []byte(h.Site), site)
}

// countRejected counts a refusal for reason in the site's record (written
// by the caller) and in the store's per-reason counts.
func countRejected(tx *bolt.Tx, site *store.Site, reason string) error {
	if site.Rejected == nil {
		site.Rejected = map[string]int{}
	}
	site.Rejected[reason]++
	return store.CountReject(tx, reason)
}

// accept checks an authenticated update against the current round and
// its bounds and stores it; it returns a rejection reason (and detail), or
// "" when accepted (b.Round then counts it).
func (b *Batch) accept(tx *bolt.Tx, in *Incoming, now time.Time) (string, string, error) {
	h := in.Msg.Header
	r := b.Round
	switch {
	case r == nil || h.Round > r.Round:
		var cur uint64
		if r != nil {
			cur = r.Round
		}
		return federated.ReasonFutureRound, fmt.Sprintf("round %d, current %d", h.Round, cur), nil
	case r.Mode == federated.Sync && h.Round < r.Round:
		return federated.ReasonStaleRound, fmt.Sprintf("round %d, current %d", h.Round, r.Round), nil
	case r.State != store.StateCollecting || b.Complete || RoundComplete(r, b.Buffer):
		// (complete but not yet closed: its close failed, and the next
		// tick closes it)
		return federated.ReasonRoundClosed, fmt.Sprintf("round %d is %s", r.Round, r.State), nil
	case r.Mode == federated.Sync && h.BaseModel != r.BaseModel:
		return federated.ReasonBaseModel, fmt.Sprintf("trained from %s, round base %s", quant.ShortID(h.BaseModel), quant.ShortID(r.BaseModel)), nil
	}
	if r.Mode == federated.Async {
		// the base must be a model we published, not too old
		base, err := store.GetModel(tx, h.BaseVersion)
		if err != nil {
			return "", "", err
		}
		if base == nil || base.FloatModel != h.BaseModel {
			return federated.ReasonBaseModel, fmt.Sprintf("version %d is not %s", h.BaseVersion, quant.ShortID(h.BaseModel)), nil
		}
		if st := int(r.BaseVersion) - int(h.BaseVersion); b.MaxStaleness > 0 && st > b.MaxStaleness {
			return federated.ReasonStaleRound, fmt.Sprintf("%d versions old (at most %d)", st, b.MaxStaleness), nil
		}
	}
	if reason, detail := bounds.Check(r, b.Dims, &in.CheckedUpdate); reason != "" {
		return reason, detail, nil
	}
	ub := tx.Bucket(store.BucketUpdates).Bucket(boltkv.U64(r.Round))
	if ub == nil {
		return "", "", fmt.Errorf("%w: round %d has no update bucket", store.ErrStore, r.Round)
	}
	key := []byte(h.Site)
	if r.Mode == federated.Async {
		key = []byte(federated.MsgID(h.Site, h.Seq))
		if b.OnePerSite && hasSiteUpdate(ub, h.Site) {
			return federated.ReasonReplay, fmt.Sprintf("site already contributed to round %d (one update per site per buffer with this rule)", r.Round), nil
		}
	} else if ub.Get(key) != nil {
		return federated.ReasonReplay, fmt.Sprintf("site already contributed to round %d", r.Round), nil
	}
	rec := in.Record
	if r.Sum != nil {
		var reason, detail string
		var err error
		if rec, reason, detail, err = b.addToSums(tx, in); err != nil || reason != "" {
			return reason, detail, err
		}
	} else if rec == nil {
		var err error
		if rec, err = store.EncodeStoredUpdate(&h, in.Msg.Payload); err != nil {
			return "", "", err
		}
	}
	if err := ub.Put(key, rec); err != nil {
		return "", "", err
	}
	r.Accepted++
	b.dirty = true
	if RoundComplete(r, b.Buffer) {
		b.Complete = true
	}
	if err := store.Audit(tx, now, b.AuditKeep, "update.accepted", r.Round, h.Site, fmt.Sprintf("seq %d, %d samples, base version %d, norm %.4g", h.Seq, h.Samples, h.BaseVersion, in.Payload.Norm)); err != nil {
		return "", "", err
	}
	return "", "", nil
}

// addToSums takes an accepted update of the summing round into the
// group's sums (its coordinates are added, in parallel, by Commit) and
// returns its stored record; a refusal reason and detail when it does not
// fit the sums' bounds.
func (b *Batch) addToSums(tx *bolt.Tx, in *Incoming) (rec []byte, reason, detail string, err error) {
	r, h := b.Round, &in.Msg.Header
	s, err := b.Sums.Get(tx, r, b.Dims)
	if err != nil {
		return nil, "", "", err
	}
	b.sums = s
	if s.Sum.Count >= uint64(r.Sum.N) { // (the round completes at N: not reached)
		return nil, federated.ReasonRoundClosed, fmt.Sprintf("round %d has its %d updates", r.Round, r.Sum.N), nil
	}
	term, eff, samples, staleness, reason, detail := bounds.PrepareTerm(s.Sum, r, b.Dims, &in.CheckedUpdate)
	if reason != "" {
		return nil, reason, detail, nil
	}
	norm := in.Payload.Norm
	if rec, err = store.EncodeSummedUpdate(h, norm); err != nil {
		return nil, "", "", err
	}
	s.Sum.AddWeight(eff, samples, staleness)
	b.terms = append(b.terms, term)
	return rec, "", "", nil
}

// Commit ends the batch in its transaction: the group's accepted updates
// are added to the sums, which are stored, and the round record is
// written when it changed.
func (b *Batch) Commit(tx *bolt.Tx) error {
	if b.sums != nil && len(b.terms) > 0 {
		if err := b.sums.Add(tx, b.terms, b.Workers); err != nil {
			return err
		}
	}
	if b.dirty {
		return store.PutRound(tx, b.Round)
	}
	return nil
}

// hasSiteUpdate reports whether an async round's update bucket holds an
// update of site (keys federated.MsgID: the site, a colon, the sequence;
// a site name has no colon, so the prefix names one site).
func hasSiteUpdate(ub *bolt.Bucket, site string) bool {
	prefix := []byte(federated.MsgID(site, 0))
	prefix = prefix[:len(prefix)-1]
	k, _ := ub.Cursor().Seek(prefix)
	return k != nil && bytes.HasPrefix(k, prefix)
}
