package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant"
)

// stored is an accepted update as kept in the store (the message was
// verified when it arrived).
type stored struct {
	Header  federated.UpdateHeader `json:"header"`
	Payload []byte                 `json:"payload"`
}

func encodeStored(m *federated.UpdateMsg) []byte {
	b, _ := json.Marshal(stored{Header: m.Header, Payload: m.Payload})
	return b
}

// floatModel decodes a stored float32 artifact (signed by this
// coordinator) into a model, cached by version.
func (c *Coordinator) floatModel(tx *bolt.Tx, version uint64) (*policy.Model, error) {
	if m, ok := c.cache[version]; ok {
		return m, nil
	}
	raw := tx.Bucket(bucketBlobs).Get(blobKey(version, quant.Float32))
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
	m, err := a.Model()
	if err != nil {
		return nil, err
	}
	if c.cache == nil {
		c.cache = map[uint64]*policy.Model{}
	}
	c.cache[version] = m
	return m, nil
}

// aggregate combines a closed round's stored updates (in site order, so a
// recomputation after a crash gives the same bytes), applies the result to
// the base model, stores the new version and publishes it. Callers hold
// c.mu.
func (c *Coordinator) aggregate(ctx context.Context, r *Round) error {
	started := time.Now()
	var base *policy.Model
	agg, err := federated.NewAggregator(c.cfg.Aggregator, 0)
	if err != nil {
		return err
	}
	var staleSum float64
	var skipped []string
	err = c.db.View(func(tx *bolt.Tx) error {
		var err error
		if base, err = c.floatModel(tx, r.BaseVersion); err != nil {
			return err
		}
		ub := tx.Bucket(bucketUpdates).Bucket(u64(r.Round))
		if ub == nil {
			return fmt.Errorf("%w: round %d has no updates", ErrStore, r.Round)
		}
		return ub.ForEach(func(_, v []byte) error {
			var s stored
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("%w: round %d update: %v", ErrStore, r.Round, err)
			}
			u, err := quant.DecodeUpdate(s.Payload, base.Net.NumParams())
			if err != nil {
				return fmt.Errorf("%w: round %d update of %s: %v", ErrStore, r.Round, s.Header.Site, err)
			}
			clip := c.cfg.ClipNorm
			if c.cfg.DP != nil {
				clip = c.cfg.DP.ClipNorm
			}
			federated.ClipL2(u.Values, clip)
			staleness := max(0, int(r.BaseVersion)-int(s.Header.BaseVersion))
			weight := float64(s.Header.Samples)
			if c.cfg.DP != nil {
				weight = 1 // the DP noise is calibrated for an unweighted mean of clipped deltas
			}
			if err := agg.Add(federated.Contribution{Site: s.Header.Site, Delta: u.Values, Weight: weight, Staleness: staleness}); err != nil {
				// accepted updates were checked on arrival; should one
				// still not fit, the round goes on without it
				skipped = append(skipped, s.Header.Site+": "+err.Error())
				return nil
			}
			staleSum += float64(staleness)
			return nil
		})
	})
	if err != nil {
		return err
	}
	res, err := agg.Result()
	if err != nil {
		return c.failRound(r, fmt.Sprintf("aggregation: %v", err))
	}
	stats := map[string]float64{"updates": float64(agg.Count()), "norm": federated.L2Norm(res.Delta)}
	for k, v := range res.Stats {
		stats[k] = v
	}
	if agg.Count() > 0 {
		stats["staleness_mean"] = staleSum / float64(agg.Count())
	}
	if len(skipped) > 0 {
		stats["skipped"] = float64(len(skipped))
		c.log.Warn("updates left out of the aggregate", "round", r.Round, "skipped", skipped)
	}
	if c.cfg.DP != nil {
		if err := federated.AddNoise(res.Delta, agg.Count(), *c.cfg.DP, c.dpRNG(r.Round)); err != nil {
			return c.failRound(r, fmt.Sprintf("differential privacy: %v", err))
		}
		c.dp.Step()
		eps, _ := c.dp.Epsilon()
		stats["dp_epsilon"], stats["dp_delta"], stats["dp_rounds"] = eps, c.cfg.DP.Delta, float64(c.dp.Rounds())
	}
	next := &policy.Model{Schema: base.Schema, Net: base.Net.Clone(), Meta: map[string]any{"round": float64(r.Round)}, Decision: base.Decision}
	if err := next.Net.AddFlat(res.Delta, float32(c.cfg.ServerLR)); err != nil {
		return c.failRound(r, fmt.Sprintf("apply aggregate: %v", err))
	}
	for _, v := range next.Net.Flat() {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return c.failRound(r, "aggregate made the model non-finite")
		}
	}
	p, err := c.prepareModel(ctx, next, r.Round, r.BaseModel, r.Closed, fmt.Sprintf("round %d (%s, %d updates)", r.Round, agg.Name(), agg.Count()))
	if err != nil {
		return err
	}
	rec := p.rec
	r.State, r.Result, r.Stats = StatePublished, rec.Version, stats
	// The model and the round's verdict are one transaction: a crash
	// before it recomputes the same model, after it publishes it.
	if err := c.db.Update(func(tx *bolt.Tx) error {
		if err := c.putModel(tx, p); err != nil {
			return err
		}
		if err := putJSON(tx.Bucket(bucketRounds), u64(r.Round), r); err != nil {
			return err
		}
		c.pruneUpdates(tx, r.Round)
		return audit(tx, c.clock.Now(), "round.aggregated", r.Round, "", fmt.Sprintf("%s of %d updates -> version %d", agg.Name(), agg.Count(), rec.Version))
	}); err != nil {
		return err
	}
	c.cfg.fail(FailModelStored)
	c.metrics.rounds.WithLabelValues(StatePublished).Inc()
	c.metrics.aggregation.Observe(time.Since(started).Seconds())
	c.log.Info("round aggregated", "round", r.Round, "rule", agg.Name(), "updates", agg.Count(), "version", rec.Version)
	if rec.Status == ModelPending && c.bus != nil {
		if err := c.publishModel(ctx, rec); err != nil {
			return err
		}
	}
	if c.cfg.AutoRounds && c.roundsLeft() && c.bus != nil {
		_, err := c.openRound(ctx)
		return err
	}
	return nil
}

func (c *Coordinator) failRound(r *Round, note string) error {
	r.State, r.Note = StateFailed, note
	c.metrics.rounds.WithLabelValues(StateFailed).Inc()
	c.log.Warn("round failed", "round", r.Round, "note", note)
	return c.db.Update(func(tx *bolt.Tx) error {
		if err := putJSON(tx.Bucket(bucketRounds), u64(r.Round), r); err != nil {
			return err
		}
		return audit(tx, c.clock.Now(), "round.failed", r.Round, "", note)
	})
}

// pruneUpdates drops stored updates of rounds older than KeepUpdates.
func (c *Coordinator) pruneUpdates(tx *bolt.Tx, round uint64) {
	if round <= uint64(c.cfg.KeepUpdates) {
		return
	}
	_ = tx.Bucket(bucketUpdates).DeleteBucket(u64(round - uint64(c.cfg.KeepUpdates)))
}
