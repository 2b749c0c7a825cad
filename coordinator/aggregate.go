package coordinator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/aggregation"
	"github.com/edgesched/edgesched/coordinator/regional"
	"github.com/edgesched/edgesched/coordinator/release"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/policy/nn"
)

// floatModel decodes a stored float32 artifact (release.Models: a few
// cached by version). Callers hold c.mu.
func (c *Coordinator) floatModel(tx *bolt.Tx, version uint64) (*nn.Model, error) {
	return c.models.Float(tx, version)
}

// aggregate combines a closed round's stored updates (in key order, so a
// recomputation after a crash gives the same bytes), or takes a summing
// round's mean from its exact sums (collect), applies the result to the
// base model, checks that the new model can be quantized and scores
// sanely (release), stores it and publishes it. A failure that the same updates
// would meet again fails the round (state failed, Reason, the
// round_failures_total metric) and the next round opens; only store and
// bus failures are returned to be retried. Callers hold c.mu.
func (c *Coordinator) aggregate(ctx context.Context, r *Round) error {
	started := time.Now()
	if done, err := c.superseded(r); done || err != nil {
		return err
	}
	base, col, err := c.collect(r)
	if err != nil {
		return err
	}
	if col.Err != nil {
		return c.failRound(r, FailReasonAggregate, fmt.Sprintf("aggregation: %v", col.Err))
	}
	res, name, count := col.Result, col.Rule, col.Count
	stats := col.Stats()
	if len(col.Skipped) > 0 {
		c.log.Warn("updates left out of the aggregate", "round", r.Round, "skipped", col.Skipped)
	}
	if c.cfg.DP != nil {
		rng, err := c.dpRNG(r.Round)
		if err != nil {
			return err
		}
		if err := federated.AddNoise(res.Delta, count, *c.cfg.DP, rng); err != nil {
			return c.failRound(r, FailReasonDP, fmt.Sprintf("differential privacy: %v", err))
		}
		c.dp.Step()
		eps, _ := c.dp.Epsilon()
		stats["dp_epsilon"], stats["dp_delta"], stats["dp_rounds"] = eps, c.cfg.DP.Delta, float64(c.dp.Rounds())
	}
	next := base.Clone()
	next.Meta, next.Created = map[string]any{"round": float64(r.Round)}, time.Time{}
	if err := next.AddFlat(res.Delta, float32(c.cfg.ServerLR)); err != nil {
		return c.failRound(r, FailReasonAggregate, fmt.Sprintf("apply aggregate: %v", err))
	}
	// The inputs the base's training found constant stay unread, whatever
	// the sites sent for them (an older agent, data that varies them) and
	// the DP noise added to every coordinate.
	next.Net.MaskInputs(base.UnreadConstants())
	for i, v := range next.Flat() {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return c.failRound(r, FailReasonNonFinite, fmt.Sprintf("the aggregate made weight %d of the model %v", i, v))
		}
	}
	p, err := c.prepareModel(ctx, next, r.Round, r.BaseModel, r.Closed, fmt.Sprintf("round %d (%s, %d updates)", r.Round, name, count))
	if me := (*release.Error)(nil); errors.As(err, &me) {
		return c.failRound(r, me.Reason, me.Error())
	}
	if err != nil {
		return err
	}
	rec := p.Rec
	r.State, r.Result, r.Stats = StatePublished, rec.Version, stats
	// The model and the round's verdict are one transaction: a crash
	// before it recomputes the same model, after it publishes it.
	if err := c.update(func(tx *bolt.Tx) error {
		if err := c.putModel(tx, p); err != nil {
			return err
		}
		if err := store.PutRound(tx, r); err != nil {
			return err
		}
		c.pruneUpdates(tx, r.Round)
		return store.Audit(tx, c.clock.Now(), c.cfg.AuditKeep, "round.aggregated", r.Round, "", fmt.Sprintf("%s of %d updates -> version %d", name, count, rec.Version))
	}); err != nil {
		return err
	}
	c.cfg.fail(FailModelStored)
	c.metrics.Rounds.WithLabelValues(StatePublished).Inc()
	c.metrics.Aggregation.Observe(time.Since(started).Seconds())
	c.log.Info("round aggregated", "round", r.Round, "rule", name, "updates", count, "summed", r.Sum != nil, "version", rec.Version, "update_norm_max", stats["update_norm_max"])
	if rec.Status == ModelPending && c.bus != nil {
		if err := c.publishModel(ctx, rec); err != nil {
			return err
		}
	}
	return c.nextRound(ctx)
}

// collect gathers closed round r with its base model (package
// aggregation): a summing round's mean from its exact sums, otherwise its
// stored updates combined with the configured rule.
func (c *Coordinator) collect(r *Round) (*nn.Model, aggregation.Collected, error) {
	var base *nn.Model
	var col aggregation.Collected
	var agg federated.Aggregator
	if r.Sum == nil {
		var err error
		if agg, err = federated.NewAggregator(c.cfg.Aggregator, 0); err != nil {
			return nil, col, err
		}
	}
	err := c.view(func(tx *bolt.Tx) error {
		var err error
		if base, err = c.floatModel(tx, r.BaseVersion); err != nil {
			return err
		}
		if r.Sum != nil {
			col, err = aggregation.Summed(tx, r, base.NumParams(), &c.sums)
		} else {
			col, err = aggregation.Stored(tx, r, base.NumParams(), agg, c.cfg.DP != nil)
		}
		return err
	})
	return base, col, err
}

// nextRound opens the next round when rounds run on their own.
func (c *Coordinator) nextRound(ctx context.Context) error {
	if c.cfg.AutoRounds && c.roundsLeft() && c.bus != nil {
		_, err := c.openRound(ctx)
		return err
	}
	return nil
}

// superseded fails round r, collecting or aggregating, when a model
// version newer than its base has been published (or is pending) since it
// opened: an operator's rollback or promotion, which its model, made from
// the older base and numbered above it, would otherwise undo. It reports
// whether it failed the round. Callers hold c.mu.
func (c *Coordinator) superseded(r *Round) (bool, error) {
	latest, err := c.latestPublished()
	if err != nil || latest == nil || latest.Version <= r.BaseVersion {
		return false, err
	}
	return true, c.failRound(r, FailReasonSuperseded, fmt.Sprintf("model version %d was published while the round trained from version %d (a rollback or promotion): its model would have undone it", latest.Version, r.BaseVersion))
}

// failRound records that round r failed, and why (reason: a FailReason*
// value; note: the detail); the next round can then open (Tick opens it
// when rounds run on their own). Callers hold c.mu.
func (c *Coordinator) failRound(r *Round, reason, note string) error {
	r.State, r.Reason, r.Note = StateFailed, reason, note
	if r.Closed.IsZero() {
		r.Closed = c.clock.Now().UTC()
	}
	if err := c.update(func(tx *bolt.Tx) error {
		if err := store.PutRound(tx, r); err != nil {
			return err
		}
		c.pruneUpdates(tx, r.Round)
		return store.Audit(tx, c.clock.Now(), c.cfg.AuditKeep, "round.failed", r.Round, "", reason+": "+note)
	}); err != nil {
		return err
	}
	c.metrics.Rounds.WithLabelValues(StateFailed).Inc()
	c.metrics.RoundFailures.WithLabelValues(reason).Inc()
	c.log.Warn("round failed", "round", r.Round, "reason", reason, "note", note)
	return nil
}

// pruneUpdates drops the stored updates (and running sums) and the
// regional verdicts of every round more than KeepUpdates rounds before
// round, however those rounds ended, and the records of those more than
// RoundKeep before it (a failed delete leaves them for the next round).
func (c *Coordinator) pruneUpdates(tx *bolt.Tx, round uint64) {
	if round > uint64(c.cfg.KeepUpdates) {
		store.PruneUpdates(tx, round-uint64(c.cfg.KeepUpdates)+1)
		_ = regional.Prune(tx, round-uint64(c.cfg.KeepUpdates)+1)
	}
	if keep := uint64(c.cfg.RoundKeep); keep > 0 && round > keep {
		_ = store.PruneRounds(tx, round-keep+1)
	}
}
