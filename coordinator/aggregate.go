package coordinator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/parallel"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/esu"
)

// modelError is a failure to make a model out of an aggregate that
// retrying cannot mend (the same updates give the same model): the round
// fails with its reason.
type modelError struct {
	reason string
	err    error
}

func (e *modelError) Error() string { return e.err.Error() }
func (e *modelError) Unwrap() error { return e.err }

// floatModel decodes a stored float32 artifact (signed by this
// coordinator) into a model, cached by version.
func (c *Coordinator) floatModel(tx *bolt.Tx, version uint64) (*nn.Model, error) {
	if m, ok := c.cache[version]; ok {
		return m, nil
	}
	raw := tx.Bucket(store.BucketBlobs).Get(store.BlobKey(version, quant.Float32))
	if raw == nil {
		return nil, fmt.Errorf("%w: no float artifact for version %d", ErrStore, version)
	}
	keys := &quant.Keyring{}
	if _, err := keys.Add(c.cfg.Signer.Public()); err != nil {
		return nil, err
	}
	a, err := quant.Decode(raw, quant.DecodeOptions{Keys: keys})
	if errors.Is(err, quant.ErrUnknownKey) && c.cfg.ModelKeys != nil {
		// signed before a key rotation
		a, err = quant.Decode(raw, quant.DecodeOptions{Keys: c.cfg.ModelKeys})
	}
	if err != nil {
		return nil, fmt.Errorf("%w: version %d: %v", ErrStore, version, err)
	}
	m, err := nn.FromArtifact(a)
	if err != nil {
		return nil, err
	}
	if c.cache == nil {
		c.cache = map[uint64]*nn.Model{}
	}
	c.cache[version] = m
	return m, nil
}

// decoded is one stored update decoded for aggregation.
type decoded struct {
	site      string
	delta     []float32
	weight    float64
	staleness int
	norm      float64
	err       error
}

// decodeWindow is how many stored updates aggregation decodes in
// parallel at a time; they are added in key order, so the result does not
// depend on it.
const decodeWindow = 64

// aggregate combines a closed round's stored updates (in key order, so a
// recomputation after a crash gives the same bytes), or takes a summing
// round's mean from its exact sums (sums.go), applies the result to
// the base model, checks that the new model can be quantized and scores
// sanely, stores it and publishes it. A failure that the same updates
// would meet again fails the round (state failed, Reason, the
// round_failures_total metric) and the next round opens; only store and
// bus failures are returned to be retried. Callers hold c.mu.
func (c *Coordinator) aggregate(ctx context.Context, r *Round) error {
	started := time.Now()
	var col collected
	var err error
	if r.Sum != nil {
		col, err = c.collectSums(r)
	} else {
		col, err = c.collectStored(r)
	}
	if err != nil {
		return err
	}
	if col.err != nil {
		return c.failRound(r, FailReasonAggregate, fmt.Sprintf("aggregation: %v", col.err))
	}
	res, base, name, count, staleSum, norms, clipped, skipped := col.res, col.base, col.name, col.count, col.staleSum, col.norms, col.clipped, col.skipped
	stats := map[string]float64{"updates": float64(count), "norm": federated.L2Norm(res.Delta)}
	for k, v := range res.Stats {
		stats[k] = v
	}
	if count > 0 {
		stats["staleness_mean"] = staleSum / float64(count)
	}
	if len(norms) > 0 {
		slices.Sort(norms)
		stats["update_norm_median"], stats["update_norm_max"] = norms[len(norms)/2], norms[len(norms)-1]
		stats["clipped"] = float64(clipped)
	}
	if len(skipped) > 0 {
		stats["skipped"] = float64(len(skipped))
		c.log.Warn("updates left out of the aggregate", "round", r.Round, "skipped", skipped)
	}
	if c.cfg.DP != nil {
		if err := federated.AddNoise(res.Delta, count, *c.cfg.DP, c.dpRNG(r.Round)); err != nil {
			return c.failRound(r, FailReasonDP, fmt.Sprintf("differential privacy: %v", err))
		}
		c.dp.Step()
		eps, _ := c.dp.Epsilon()
		stats["dp_epsilon"], stats["dp_delta"], stats["dp_rounds"] = eps, c.cfg.DP.Delta, float64(c.dp.Rounds())
	}
	next := &nn.Model{Schema: base.Schema, Net: base.Net.Clone(), Meta: map[string]any{"round": float64(r.Round)}, Decision: base.Decision}
	if err := next.Net.AddFlat(res.Delta, float32(c.cfg.ServerLR)); err != nil {
		return c.failRound(r, FailReasonAggregate, fmt.Sprintf("apply aggregate: %v", err))
	}
	for i, v := range next.Net.Flat() {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return c.failRound(r, FailReasonNonFinite, fmt.Sprintf("the aggregate made weight %d of the model %v", i, v))
		}
	}
	p, err := c.prepareModel(ctx, next, r.Round, r.BaseModel, r.Closed, fmt.Sprintf("round %d (%s, %d updates)", r.Round, name, count))
	if me := (*modelError)(nil); errors.As(err, &me) {
		return c.failRound(r, me.reason, me.Error())
	}
	if err != nil {
		return err
	}
	rec := p.rec
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

// collected is what aggregation gathered of a closed round: the rule's
// result (err: the rule could not combine the updates, which fails the
// round), the base model and the figures of the round's stats.
type collected struct {
	res      federated.Result
	err      error
	base     *nn.Model
	name     string
	count    int
	staleSum float64
	norms    []float64
	clipped  int
	skipped  []string
}

// collectStored combines a closed round's stored updates with the
// configured rule (in key order, so a recomputation after a crash gives
// the same bytes).
func (c *Coordinator) collectStored(r *Round) (collected, error) {
	var col collected
	agg, err := federated.NewAggregator(c.cfg.Aggregator, 0)
	if err != nil {
		return col, err
	}
	err = c.view(func(tx *bolt.Tx) error {
		var err error
		if col.base, err = c.floatModel(tx, r.BaseVersion); err != nil {
			return err
		}
		dims := col.base.Net.NumParams()
		ub := tx.Bucket(store.BucketUpdates).Bucket(u64(r.Round))
		if ub == nil {
			return fmt.Errorf("%w: round %d has no updates", ErrStore, r.Round)
		}
		// decode a window of updates in parallel (into buffers reused from
		// window to window: aggregators never keep a delta), add them in key
		// order
		var keys, vals [][]byte
		bufs := make([][]float32, decodeWindow)
		flush := func() error {
			out := make([]decoded, len(keys))
			parallel.For(len(keys), 0, func(i int) {
				if bufs[i] == nil {
					bufs[i] = make([]float32, dims)
				}
				out[i] = c.decodeStored(r, keys[i], vals[i], dims, bufs[i])
			})
			for _, d := range out {
				if d.err != nil {
					return d.err
				}
				col.norms = append(col.norms, d.norm)
				if r.ClipNorm > 0 && d.norm > r.ClipNorm {
					col.clipped++
				}
				if err := agg.Add(federated.Contribution{Site: d.site, Delta: d.delta, Weight: d.weight, Staleness: d.staleness}); err != nil {
					// accepted updates were checked on arrival; should one
					// still not fit, the round goes on without it
					col.skipped = append(col.skipped, d.site+": "+err.Error())
					continue
				}
				col.staleSum += float64(d.staleness)
			}
			keys, vals = keys[:0], vals[:0]
			return nil
		}
		err = ub.ForEach(func(k, v []byte) error {
			keys, vals = append(keys, k), append(vals, v)
			if len(keys) == decodeWindow {
				return flush()
			}
			return nil
		})
		if err == nil {
			err = flush()
		}
		return err
	})
	if err != nil {
		return col, err
	}
	col.name, col.count = agg.Name(), agg.Count()
	col.res, col.err = agg.Result()
	return col, nil
}

// collectSums is a summing round's result: the mean of its running sums,
// with the statistics of its stored records (norms, staleness).
func (c *Coordinator) collectSums(r *Round) (collected, error) {
	col := collected{name: r.Sum.Rule}
	err := c.view(func(tx *bolt.Tx) error {
		var err error
		if col.base, err = c.floatModel(tx, r.BaseVersion); err != nil {
			return err
		}
		ub := tx.Bucket(store.BucketUpdates).Bucket(u64(r.Round))
		if ub == nil {
			return fmt.Errorf("%w: round %d has no updates", ErrStore, r.Round)
		}
		a, err := c.sums(tx, r, col.base.Net.NumParams())
		if err != nil {
			return err
		}
		var sites []string
		err = ub.ForEach(func(k, v []byte) error {
			s, err := store.DecodeStoredUpdate(v, fmt.Sprintf("%d/%s", r.Round, k))
			if err != nil {
				return err
			}
			if !s.Summed {
				return fmt.Errorf("%w: stored update %d/%s of a summing round has a payload", ErrStore, r.Round, k)
			}
			sites = append(sites, s.Site)
			col.norms = append(col.norms, s.Norm)
			if r.ClipNorm > 0 && s.Norm > r.ClipNorm {
				col.clipped++
			}
			return nil
		})
		if err != nil {
			return err
		}
		if a.sum.Count != uint64(len(sites)) {
			return fmt.Errorf("%w: the sums of round %d count %d updates, %d are stored", ErrStore, r.Round, a.sum.Count, len(sites))
		}
		col.count, col.staleSum = len(sites), float64(a.sum.StaleSum)
		col.res, col.err = a.sum.Result(r.Sum.Rule)
		col.res.Used = sites
		return nil
	})
	return col, err
}

// nextRound opens the next round when rounds run on their own.
func (c *Coordinator) nextRound(ctx context.Context) error {
	if c.cfg.AutoRounds && c.roundsLeft() && c.bus != nil {
		_, err := c.openRound(ctx)
		return err
	}
	return nil
}

// decodeStored decodes one stored update of round r for aggregation:
// payload, clipping to the round's ClipNorm, weight and staleness.
func (c *Coordinator) decodeStored(r *Round, k, v []byte, dims int, buf []float32) decoded {
	what := fmt.Sprintf("%d/%s", r.Round, k)
	s, err := store.DecodeStoredUpdate(v, what)
	if err != nil {
		return decoded{err: err}
	}
	u, err := esu.DecodeInto(s.Payload, dims, buf)
	if err != nil {
		return decoded{err: fmt.Errorf("%w: stored update %s: %v", ErrStore, what, err)}
	}
	norm, _ := federated.ClipL2(u.Values, r.ClipNorm)
	weight := float64(s.Samples)
	if c.cfg.DP != nil {
		weight = 1 // the DP noise is calibrated for an unweighted mean of clipped deltas
	}
	return decoded{site: s.Site, delta: u.Values, weight: weight, staleness: max(0, int(r.BaseVersion)-int(s.BaseVersion)), norm: norm}
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
		return store.Audit(tx, c.clock.Now(), c.cfg.AuditKeep, "round.failed", r.Round, "", reason+": "+note)
	}); err != nil {
		return err
	}
	c.metrics.Rounds.WithLabelValues(StateFailed).Inc()
	c.metrics.RoundFailures.WithLabelValues(reason).Inc()
	c.log.Warn("round failed", "round", r.Round, "reason", reason, "note", note)
	return nil
}

// pruneUpdates drops stored updates of rounds older than KeepUpdates.
func (c *Coordinator) pruneUpdates(tx *bolt.Tx, round uint64) {
	if round <= uint64(c.cfg.KeepUpdates) {
		return
	}
	_ = tx.Bucket(store.BucketUpdates).DeleteBucket(u64(round - uint64(c.cfg.KeepUpdates)))
	_ = tx.Bucket(store.BucketSums).Delete(u64(round - uint64(c.cfg.KeepUpdates)))
}
