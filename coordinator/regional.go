package coordinator

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/bounds"
	"github.com/edgesched/edgesched/coordinator/regional"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
)

// The root's side of hierarchical rounds (docs/federated.md "Hierarchical
// rounds"). A regional aggregate (federated.RegionalAggregate) arrives on
// the regional stream, is verified against its region's key
// (Config.Regions) and judged as a whole in one transaction: either every
// site it lists is counted in the round — its exact partial sums merged
// into the round's sums (federated.FixedSum.Merge), each site's weight
// recomputed here from its listed samples and base version, a summed
// stored-update record and a verdict written for each site — or none is,
// and the refusal is named (Reason*: coordinator/regional), counted in
// regional_aggregates_total and in the audit log. Its verdict is kept
// in the bucket "regional" with the aggregate's digest: the stream
// delivering it again, or the region sending it again after a restart,
// gets the same verdict and counts nothing; once a region's aggregate of
// a round is accepted, any other aggregate of the region for that round is
// refused (region_again).

// Reasons a regional aggregate is refused and its verdict (package
// coordinator/regional), under the coordinator's names.
const (
	ReasonRoundNotOpen = regional.ReasonRoundNotOpen
	ReasonNotSumming   = regional.ReasonNotSumming
	ReasonFixedPoint   = regional.ReasonFixedPoint
	ReasonForeignSite  = regional.ReasonForeignSite
	ReasonSiteTwice    = regional.ReasonSiteTwice
	ReasonSiteCounted  = regional.ReasonSiteCounted
	ReasonRegionAgain  = regional.ReasonRegionAgain
)

type RegionalVerdict = regional.Verdict

var _ regional.Judge = (*Coordinator)(nil)

// bucketRegional keeps regional aggregates' verdicts: round (uint64 BE)
// followed by the region -> store.Verdict. Created on first use; a build
// without hierarchical rounds ignores it.
var bucketRegional = []byte("regional")

// ProcessRegional judges one regional aggregate message that arrived on
// subject ("" skips the subject binding). The error is the store's only:
// a refused aggregate is a verdict.
func (c *Coordinator) ProcessRegional(ctx context.Context, subject string, data []byte) (*RegionalVerdict, error) {
	a, reason, err := regional.Decode(subject, data, c.cfg.Regions)
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now().UTC()
	v := &RegionalVerdict{Status: federated.Rejected}
	if err != nil {
		v.Reason, v.Detail = reason, err.Error()
		if uerr := c.update(func(tx *bolt.Tx) error { return c.refuseRegional(tx, now, v) }); uerr != nil {
			return nil, uerr
		}
		c.countRegional(v)
		return v, nil
	}
	v.Region, v.Round, v.Sites = a.Header.Region, a.Header.Round, len(a.Header.Sites)
	// the verdict's Stream field keeps the aggregate's digest: the same
	// bytes again (the stream's redelivery, or the region's outbox sending
	// it again after a restart) get the same verdict
	sum := sha256.Sum256(data)
	digest := binary.BigEndian.Uint64(sum[:]) | 1
	var r *Round
	complete := false
	err = c.update(func(tx *bolt.Tx) error {
		v.Status, v.Reason, v.Detail, v.Again, complete = federated.Rejected, "", "", false, false
		rb, err := tx.CreateBucketIfNotExists(bucketRegional)
		if err != nil {
			return err
		}
		// the region's accepted aggregate of the round is kept under
		// round+region, each refused one under round+region+0+digest
		key := append(u64(a.Header.Round), a.Header.Region...)
		refusedKey := binary.BigEndian.AppendUint64(append(slices.Clip(key), 0), digest)
		for _, k := range [][]byte{key, refusedKey} {
			raw := rb.Get(k)
			if raw == nil {
				continue
			}
			var old store.Verdict
			if err := store.DecodeRecord(raw, &old, store.RecordName(bucketRegional, k)); err != nil {
				return err
			}
			if old.Stream == digest {
				v.Status, v.Reason, v.Again = old.Status, old.Reason, true
				return nil
			}
			v.Reason, v.Detail = ReasonRegionAgain, fmt.Sprintf("region %s's aggregate of round %d was accepted before", a.Header.Region, a.Header.Round)
			return c.refuseRegional(tx, now, v)
		}
		if r, err = c.currentRoundTx(tx); err != nil {
			return err
		}
		if complete, err = c.mergeRegional(tx, r, a, v, now); err != nil {
			return err
		}
		if v.Status == federated.Rejected {
			key = refusedKey
		}
		if err := store.PutRecord(rb, key, &store.Verdict{Status: v.Status, Reason: v.Reason, Stream: digest}); err != nil {
			return err
		}
		if v.Status == federated.Rejected {
			return c.refuseRegional(tx, now, v)
		}
		return nil
	})
	if err != nil {
		c.acc = nil // the sums in memory may hold what was not committed
		return nil, err
	}
	if !v.Again {
		c.countRegional(v)
	}
	if complete {
		if err := c.closeRound(ctx, r); err != nil {
			if errors.Is(err, ErrStore) {
				return v, err
			}
			c.limited.Warn("close", "closing a complete round", "round", r.Round, "err", err)
		}
	}
	return v, nil
}

// RegionalRound returns round n's RegionalRound (0: the current round).
func (c *Coordinator) RegionalRound(n uint64) (*RegionalRound, error) {
	c.mu.Lock() // (the decoded model cache)
	defer c.mu.Unlock()
	var out *RegionalRound
	err := c.view(func(tx *bolt.Tx) error {
		if n == 0 {
			n = getU64(tx.Bucket(store.BucketMeta), store.KeyRound)
		}
		r, err := store.GetRound(tx, n)
		if err != nil || r == nil {
			return err
		}
		dims, err := c.dims(tx, r.BaseVersion)
		if err != nil {
			return err
		}
		out = &RegionalRound{Round: r, Dims: dims}
		return nil
	})
	if err == nil && out == nil {
		err = fmt.Errorf("%w: round %d", ErrNotFound, n)
	}
	return out, err
}

// RegionStatuses lists the configured regions (none without Regions).
func (c *Coordinator) RegionStatuses() ([]RegionStatus, error) {
	out := []RegionStatus{}
	at := map[string]int{}
	for _, g := range c.cfg.Regions.Names() {
		at[g] = len(out)
		out = append(out, RegionStatus{Region: g, Sites: len(c.cfg.Regions.Sites(g))})
	}
	err := c.view(func(tx *bolt.Tx) error {
		rb := tx.Bucket(bucketRegional)
		if rb == nil {
			return nil
		}
		return rb.ForEach(func(k, v []byte) error { // (by round, then region)
			if len(k) <= 8 {
				return nil
			}
			g, _, _ := strings.Cut(string(k[8:]), "\x00")
			i, ok := at[g]
			if !ok {
				return nil
			}
			var vd store.Verdict
			if err := store.DecodeRecord(v, &vd, store.RecordName(bucketRegional, k)); err != nil {
				return err
			}
			s := &out[i]
			if vd.Status == federated.Accepted {
				s.Accepted++
			} else {
				s.Refused++
			}
			s.LastRound, s.Status, s.Reason = getU64Key(k), vd.Status, vd.Reason
			return nil
		})
	})
	return out, err
}

func getU64Key(k []byte) uint64 { return binary.BigEndian.Uint64(k[:8]) }

// currentRoundTx is the current round (nil: none) in tx.
func (c *Coordinator) currentRoundTx(tx *bolt.Tx) (*Round, error) {
	cur := getU64(tx.Bucket(store.BucketMeta), store.KeyRound)
	if cur == 0 {
		return nil, nil
	}
	return c.rounds.Get(tx, cur)
}

// mergeRegional checks aggregate a against round r and, when it passes,
// counts every site it lists (v.Status accepted); otherwise v names the
// refusal and nothing is written. It reports whether the round now has
// every update it waits for.
func (c *Coordinator) mergeRegional(tx *bolt.Tx, r *Round, a *federated.RegionalAggregate, v *RegionalVerdict, now time.Time) (bool, error) {
	h := &a.Header
	refuse := func(reason, format string, args ...any) (bool, error) {
		v.Reason, v.Detail = reason, fmt.Sprintf(format, args...)
		return false, nil
	}
	switch {
	case r == nil || r.Round != h.Round || r.State != StateCollecting:
		state := "none"
		if r != nil {
			state = fmt.Sprintf("round %d is %s", r.Round, r.State)
		}
		return refuse(ReasonRoundNotOpen, "round %d: current: %s", h.Round, state)
	case r.Sum == nil:
		return refuse(ReasonNotSumming, "round %d stores its updates (rule %s)", r.Round, c.cfg.Aggregator.Rule)
	case h.Shift != r.Sum.Shift:
		return refuse(ReasonFixedPoint, "shift %d, the round's is %d", h.Shift, r.Sum.Shift)
	}
	dims, err := c.dims(tx, r.BaseVersion)
	if err != nil {
		return false, err
	}
	if len(a.Hi) != dims {
		return refuse(federated.ReasonShape, "%d coordinates, the model has %d", len(a.Hi), dims)
	}
	ub := tx.Bucket(store.BucketUpdates).Bucket(u64(r.Round))
	if ub == nil {
		return false, fmt.Errorf("%w: round %d has no update bucket", ErrStore, r.Round)
	}
	seen := make(map[string]bool, len(h.Sites))
	sites := make([]*store.Site, len(h.Sites))
	for i, s := range h.Sites {
		switch g, _ := c.cfg.Regions.RegionOf(s.Site); {
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
	acc, err := c.sums(tx, r, dims)
	if err != nil {
		return false, err
	}
	if acc.sum.Count+uint64(len(h.Sites)) > uint64(r.Sum.N) {
		return refuse(federated.ReasonRoundClosed, "round %d has %d of its %d updates; the aggregate brings %d", r.Round, acc.sum.Count, r.Sum.N, len(h.Sites))
	}
	if err := acc.sum.Merge(a.Hi, a.Lo, len(h.Sites)); err != nil {
		return refuse(federated.ReasonTooLarge, "%v", err)
	}
	for i, s := range h.Sites {
		uh := federated.UpdateHeader{V: federated.ProtocolVersion, Site: s.Site, Seq: s.Seq, Round: r.Round, BaseModel: r.BaseModel,
			BaseVersion: s.BaseVersion, Samples: s.Samples, Created: now}
		acc.sum.AddWeight(bounds.Weights(r, &uh))
		rec, err := store.EncodeSummedUpdate(&uh, s.Norm)
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
	acc.buf = store.EncodeSum(acc.buf, r.Round, acc.sum)
	if err := tx.Bucket(store.BucketSums).Put(u64(r.Round), acc.buf); err != nil {
		return false, err
	}
	r.Accepted += len(h.Sites)
	if err := store.PutRound(tx, r); err != nil {
		return false, err
	}
	v.Status = federated.Accepted
	if err := store.Audit(tx, now, c.cfg.AuditKeep, "regional.accepted", r.Round, "", fmt.Sprintf("region %s: %d sites", h.Region, len(h.Sites))); err != nil {
		return false, err
	}
	return r.Accepted >= len(r.Expected), nil
}

// refuseRegional records a refused aggregate: the reason's count and the
// audit log.
func (c *Coordinator) refuseRegional(tx *bolt.Tx, now time.Time, v *RegionalVerdict) error {
	if err := store.CountReject(tx, "regional."+v.Reason); err != nil {
		return err
	}
	return store.Audit(tx, now, c.cfg.AuditKeep, "regional.rejected", v.Round, "", fmt.Sprintf("region %q: %s: %s", v.Region, v.Reason, v.Detail))
}

func (c *Coordinator) countRegional(v *RegionalVerdict) {
	c.metrics.Regional.WithLabelValues(v.Region, string(v.Status), v.Reason).Inc()
	if v.Status == federated.Rejected {
		c.limited.Warn("regional:"+v.Reason, "regional aggregate refused", "region", v.Region, "round", v.Round, "reason", v.Reason, "detail", v.Detail)
	} else {
		c.log.Info("regional aggregate accepted", "region", v.Region, "round", v.Round, "sites", v.Sites)
	}
}

// consumeRegional judges regional aggregates from the regional stream
// until ctx ends (regional.Consume; it only waits when no regions are
// configured).
func (c *Coordinator) consumeRegional(ctx context.Context, b *bus) error {
	if c.cfg.Regions == nil {
		<-ctx.Done()
		return ctx.Err()
	}
	s := regional.Stream{Duplicates: c.cfg.DuplicateWindow, MaxAge: c.cfg.UpdateMaxAge, Replicas: c.replicas(), Seed: c.cfg.Seed}
	if c.ha != nil {
		// its own consumer, after what the restored checkpoint judged
		s.Epoch, s.From = c.ha.Epoch(), c.ha.RegionalFloor()
	}
	defer func() {
		c.mu.Lock()
		c.regCons = nil
		c.mu.Unlock()
	}()
	return regional.Consume(ctx, b.js, s, c, regional.Hooks{
		Fatal: func(err error) bool { return errors.Is(err, ErrStore) }, StoreError: c.metrics.StoreErrors.Inc, Warn: c.limited.Warn,
		Log: c.log,
		Opened: func(cons jetstream.Consumer) {
			c.mu.Lock()
			c.regCons = cons
			c.mu.Unlock()
		},
		Acked: func(seq uint64, v *RegionalVerdict) {
			if c.ha != nil {
				c.ha.RegionalJudged(seq)
			}
			if v.Status == federated.Accepted && !v.Again {
				c.cfg.fail(FailRegionalAcked)
			}
		},
	})
}
