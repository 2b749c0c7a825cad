package aggregation

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/boltkv"
)

// Summing rounds (docs/federated.md "Summing rounds"). A FedAvg or FedBuff
// round with finite bounds does not store its updates' payloads: each
// accepted update is added, when its group is judged, to the round's
// running sums (federated.FixedSum: exact fixed point, so the sums do not
// depend on arrival order or grouping and a recomputation after a crash
// is bit-identical), which are written in the same transaction as the
// verdicts. The update bucket keeps a small record of each (stored update
// format 2: header and norm), which refuses a second update of a site and
// gives the round's statistics. The robust rules need every update and
// store payloads as before.

// SumConfig is what of the coordinator's configuration decides whether
// and how a round sums its updates.
type SumConfig struct {
	Aggregator    federated.AggregatorConfig
	StorePayloads bool
	MaxSamples    int64
	// UnitWeight: every update weighs 1 (differential privacy).
	UnitWeight bool
	// ClipNorm is the clip norm new rounds record (DP's when DP is on).
	ClipNorm      float64
	MaxUpdateNorm float64
}

// SumSpec is how a new round of at most n updates sums them under cfg,
// or nil when it stores payloads: a rule other than FedAvg or FedBuff,
// StorePayloads, no bound on weights (no sample cap and no DP) or on
// values (no clip norm and no norm bound), or bounds too loose for the
// fixed point.
func SumSpec(cfg SumConfig, n int) *store.SumSpec {
	rule := cfg.Aggregator.Rule
	if rule == "" {
		rule = federated.RuleFedAvg
	}
	if cfg.StorePayloads || (rule != federated.RuleFedAvg && rule != federated.RuleFedBuff) {
		return nil
	}
	spec := &store.SumSpec{Rule: rule, N: n, MaxWeight: float64(cfg.MaxSamples)}
	if rule == federated.RuleFedBuff {
		spec.Exponent = cfg.Aggregator.StalenessExponent
	}
	if cfg.UnitWeight {
		spec.UnitWeight, spec.MaxWeight = true, 1
	}
	for _, b := range []float64{cfg.ClipNorm, cfg.MaxUpdateNorm} {
		if b > 0 && (spec.MaxAbs == 0 || b < spec.MaxAbs) {
			spec.MaxAbs = b
		}
	}
	var ok bool
	if spec.Shift, spec.WShift, ok = federated.FixedShifts(spec.N, spec.MaxWeight, spec.MaxAbs); !ok {
		return nil
	}
	return spec
}

// Sums is a summing round's sums as committed, kept between groups so
// that judging a group does not decode them again.
type Sums struct {
	Round uint64
	Sum   *federated.FixedSum
	buf   []byte // the stored form, reused
}

// Add adds terms to the sums (their coordinates on workers goroutines;
// 0: GOMAXPROCS) and stores them in tx.
func (s *Sums) Add(tx *bolt.Tx, terms []federated.FixedTerm, workers int) error {
	s.Sum.Add(terms, workers)
	return s.Put(tx)
}

// Put stores the sums in tx.
func (s *Sums) Put(tx *bolt.Tx) error {
	s.buf = store.EncodeSum(s.buf, s.Round, s.Sum)
	return tx.Bucket(store.BucketSums).Put(boltkv.U64(s.Round), s.buf)
}

// Cache keeps the current summing round's sums as committed.
type Cache struct{ cur *Sums }

// Get returns summing round r's sums as committed (dims coordinates),
// from memory or the store.
func (c *Cache) Get(tx *bolt.Tx, r *store.Round, dims int) (*Sums, error) {
	if s := c.cur; s != nil && s.Round == r.Round {
		return s, nil
	}
	c.cur = nil
	s := &Sums{Round: r.Round, Sum: federated.NewFixedSum(dims, r.Sum.Shift, r.Sum.WShift, r.Sum.Limit())}
	key := boltkv.U64(r.Round)
	if raw := tx.Bucket(store.BucketSums).Get(key); raw != nil {
		if err := store.DecodeSum(raw, r.Round, s.Sum, store.RecordName(store.BucketSums, key)); err != nil {
			return nil, err
		}
		if len(s.Sum.Hi) != dims || s.Sum.Shift != r.Sum.Shift || s.Sum.WShift != r.Sum.WShift {
			return nil, fmt.Errorf("%w: sums of round %d: %d coordinates, shifts %d/%d; the round has %d, %d/%d",
				store.ErrStore, r.Round, len(s.Sum.Hi), s.Sum.Shift, s.Sum.WShift, dims, r.Sum.Shift, r.Sum.WShift)
		}
	}
	c.cur = s
	return s, nil
}

// Forget drops the sums in memory, which may hold what a failed
// transaction did not commit: the next Get reads them from the store.
func (c *Cache) Forget() { c.cur = nil }
