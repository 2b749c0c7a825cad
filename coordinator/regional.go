package coordinator

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/bus"
	"github.com/edgesched/edgesched/coordinator/regional"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
)

// The root's side of hierarchical rounds (docs/federated.md "Hierarchical
// rounds"). A regional aggregate (federated.RegionalAggregate) arrives on
// the regional stream (regional.Consume), is verified against its
// region's key (Config.Regions; regional.Decode) and judged as a whole in
// one transaction (regional.Ledger): either every site it lists is
// counted in the round, its partial sums merged into the round's sums, or
// none is, and the refusal is named (Reason*), counted in
// regional_aggregates_total and in the audit log. The same aggregate
// again gets the same verdict and counts nothing.

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

// ProcessRegional judges one regional aggregate message that arrived on
// subject ("" skips the subject binding). The error is the store's only:
// a refused aggregate is a verdict.
func (c *Coordinator) ProcessRegional(ctx context.Context, subject string, data []byte) (*RegionalVerdict, error) {
	a, reason, err := regional.Decode(subject, data, c.cfg.Regions)
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now().UTC()
	l := c.regionalLedger()
	v := &RegionalVerdict{Status: federated.Rejected}
	if err != nil {
		v.Reason, v.Detail = reason, err.Error()
		if uerr := c.update(func(tx *bolt.Tx) error { return l.Refuse(tx, now, v) }); uerr != nil {
			return nil, uerr
		}
		c.countRegional(v)
		return v, nil
	}
	v.Region, v.Round, v.Sites = a.Header.Region, a.Header.Round, len(a.Header.Sites)
	// the verdict's Stream field keeps the aggregate's digest: the same
	// bytes again (the stream's redelivery, or the region's outbox sending
	// it again after a restart) get the same verdict
	digest := regional.Digest(data)
	var r *Round
	complete := false
	err = c.update(func(tx *bolt.Tx) error {
		var err error
		r, complete, err = l.Record(tx, a, digest, v, now)
		return err
	})
	if err != nil {
		c.sums.Forget() // the sums in memory may hold what was not committed
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

// regionalLedger is the store as judging a regional aggregate needs it.
// Callers hold c.mu.
func (c *Coordinator) regionalLedger() *regional.Ledger {
	return &regional.Ledger{AuditKeep: c.cfg.AuditKeep, Regions: c.cfg.Regions, Rule: c.cfg.Aggregator.Rule,
		Round: c.currentRoundTx, Dims: c.dims, Sums: &c.sums}
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
	var out []RegionStatus
	err := c.view(func(tx *bolt.Tx) error {
		var err error
		out, err = regional.Statuses(tx, c.cfg.Regions)
		return err
	})
	return out, err
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
func (c *Coordinator) consumeRegional(ctx context.Context, b *bus.Bus) error {
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
	return regional.Consume(ctx, b.JS, s, c, regional.Hooks{
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
