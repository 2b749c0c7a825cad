package aggregation

import (
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/boltkv"
	"github.com/edgesched/edgesched/internal/parallel"
	"github.com/edgesched/edgesched/quant/esu"
)

// Collected is what aggregation gathered of a closed round: the rule's
// result (Err: the rule could not combine the updates, which fails the
// round) and the figures of the round's stats.
type Collected struct {
	Result   federated.Result
	Err      error
	Rule     string
	Count    int
	StaleSum float64
	Norms    []float64
	Clipped  int
	// Skipped names the accepted updates the rule would not take (and
	// why): the round went on without them.
	Skipped []string
}

// Stats are the round's figures (Round.Stats) of what was collected: the
// rule's own, the count and norm of the aggregate, the mean staleness, the
// median and largest update norm (Norms is sorted) and how many updates
// were clipped or skipped.
func (c *Collected) Stats() map[string]float64 {
	stats := map[string]float64{"updates": float64(c.Count), "norm": federated.L2Norm(c.Result.Delta)}
	for k, v := range c.Result.Stats {
		stats[k] = v
	}
	if c.Count > 0 {
		stats["staleness_mean"] = c.StaleSum / float64(c.Count)
	}
	if n := c.Norms; len(n) > 0 {
		slices.Sort(n)
		stats["update_norm_median"], stats["update_norm_max"] = n[len(n)/2], n[len(n)-1]
		stats["clipped"] = float64(c.Clipped)
	}
	if len(c.Skipped) > 0 {
		stats["skipped"] = float64(len(c.Skipped))
	}
	return stats
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

// Stored combines closed round r's stored updates (dims coordinates each)
// with agg, in key order, so a recomputation after a crash gives the same
// bytes; unitWeight weighs every update 1 instead of its samples (the DP
// noise is calibrated for an unweighted mean of clipped deltas).
func Stored(tx *bolt.Tx, r *store.Round, dims int, agg federated.Aggregator, unitWeight bool) (Collected, error) {
	var col Collected
	ub := tx.Bucket(store.BucketUpdates).Bucket(boltkv.U64(r.Round))
	if ub == nil {
		return col, fmt.Errorf("%w: round %d has no updates", store.ErrStore, r.Round)
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
			out[i] = decodeStored(r, keys[i], vals[i], dims, bufs[i], unitWeight)
		})
		for _, d := range out {
			if d.err != nil {
				return d.err
			}
			col.Norms = append(col.Norms, d.norm)
			if r.ClipNorm > 0 && d.norm > r.ClipNorm {
				col.Clipped++
			}
			if err := agg.Add(federated.Contribution{Site: d.site, Delta: d.delta, Weight: d.weight, Staleness: d.staleness}); err != nil {
				// accepted updates were checked on arrival; should one
				// still not fit, the round goes on without it
				col.Skipped = append(col.Skipped, d.site+": "+err.Error())
				continue
			}
			col.StaleSum += float64(d.staleness)
		}
		keys, vals = keys[:0], vals[:0]
		return nil
	}
	err := ub.ForEach(func(k, v []byte) error {
		keys, vals = append(keys, k), append(vals, v)
		if len(keys) == decodeWindow {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return col, err
	}
	col.Rule, col.Count = agg.Name(), agg.Count()
	col.Result, col.Err = agg.Result()
	return col, nil
}

// decodeStored decodes one stored update of round r for aggregation:
// payload, clipping to the round's ClipNorm, weight and staleness.
func decodeStored(r *store.Round, k, v []byte, dims int, buf []float32, unitWeight bool) decoded {
	what := fmt.Sprintf("%d/%s", r.Round, k)
	s, err := store.DecodeStoredUpdate(v, what)
	if err != nil {
		return decoded{err: err}
	}
	u, err := esu.DecodeInto(s.Payload, dims, buf)
	if err != nil {
		return decoded{err: fmt.Errorf("%w: stored update %s: %v", store.ErrStore, what, err)}
	}
	norm, _ := federated.ClipL2(u.Values, r.ClipNorm)
	weight := float64(s.Samples)
	if unitWeight {
		weight = 1
	}
	return decoded{site: s.Site, delta: u.Values, weight: weight, staleness: max(0, int(r.BaseVersion)-int(s.BaseVersion)), norm: norm}
}

// Summed is closed summing round r's result (dims coordinates): the mean
// of its running sums (from cache or the store), with the statistics of
// its stored records (norms, staleness).
func Summed(tx *bolt.Tx, r *store.Round, dims int, cache *Cache) (Collected, error) {
	col := Collected{Rule: r.Sum.Rule}
	ub := tx.Bucket(store.BucketUpdates).Bucket(boltkv.U64(r.Round))
	if ub == nil {
		return col, fmt.Errorf("%w: round %d has no updates", store.ErrStore, r.Round)
	}
	s, err := cache.Get(tx, r, dims)
	if err != nil {
		return col, err
	}
	var sites []string
	err = ub.ForEach(func(k, v []byte) error {
		u, err := store.DecodeStoredUpdate(v, fmt.Sprintf("%d/%s", r.Round, k))
		if err != nil {
			return err
		}
		if !u.Summed {
			return fmt.Errorf("%w: stored update %d/%s of a summing round has a payload", store.ErrStore, r.Round, k)
		}
		sites = append(sites, u.Site)
		col.Norms = append(col.Norms, u.Norm)
		if r.ClipNorm > 0 && u.Norm > r.ClipNorm {
			col.Clipped++
		}
		return nil
	})
	if err != nil {
		return col, err
	}
	if s.Sum.Count != uint64(len(sites)) {
		return col, fmt.Errorf("%w: the sums of round %d count %d updates, %d are stored", store.ErrStore, r.Round, s.Sum.Count, len(sites))
	}
	col.Count, col.StaleSum = len(sites), float64(s.Sum.StaleSum)
	col.Result, col.Err = s.Sum.Result(r.Sum.Rule)
	col.Result.Used = sites
	return col, nil
}
