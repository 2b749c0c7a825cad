package coordinator

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/bounds"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
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

// accState is a summing round's sums as committed, kept between groups so
// that judging a group does not decode them again.
type accState struct {
	round uint64
	sum   *federated.FixedSum
	buf   []byte // the stored form, reused
}

// sumSpec is how a new round of at most n updates sums them under the
// configuration, or nil when it stores payloads: a rule other than FedAvg
// or FedBuff, StorePayloads, no bound on weights (no sample cap and no DP)
// or on values (no clip norm and no norm bound), or bounds too loose for
// the fixed point.
func (c *Coordinator) sumSpec(n int) *store.SumSpec {
	rule := c.cfg.Aggregator.Rule
	if rule == "" {
		rule = federated.RuleFedAvg
	}
	if c.cfg.StorePayloads || (rule != federated.RuleFedAvg && rule != federated.RuleFedBuff) {
		return nil
	}
	spec := &store.SumSpec{Rule: rule, N: n, MaxWeight: float64(c.cfg.MaxSamples)}
	if rule == federated.RuleFedBuff {
		spec.Exponent = c.cfg.Aggregator.StalenessExponent
	}
	if c.cfg.DP != nil {
		spec.UnitWeight, spec.MaxWeight = true, 1
	}
	for _, b := range []float64{c.cfg.clipNorm(), c.cfg.MaxUpdateNorm} {
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

// sums returns summing round r's sums as committed (dims coordinates),
// from memory or the store. Callers hold c.mu.
func (c *Coordinator) sums(tx *bolt.Tx, r *Round, dims int) (*accState, error) {
	if a := c.acc; a != nil && a.round == r.Round {
		return a, nil
	}
	c.acc = nil
	a := &accState{round: r.Round, sum: federated.NewFixedSum(dims, r.Sum.Shift, r.Sum.WShift, r.Sum.Limit())}
	if raw := tx.Bucket(store.BucketSums).Get(u64(r.Round)); raw != nil {
		if err := store.DecodeSum(raw, r.Round, a.sum, store.RecordName(store.BucketSums, u64(r.Round))); err != nil {
			return nil, err
		}
		if len(a.sum.Hi) != dims || a.sum.Shift != r.Sum.Shift || a.sum.WShift != r.Sum.WShift {
			return nil, fmt.Errorf("%w: sums of round %d: %d coordinates, shifts %d/%d; the round has %d, %d/%d",
				ErrStore, r.Round, len(a.sum.Hi), a.sum.Shift, a.sum.WShift, dims, r.Sum.Shift, r.Sum.WShift)
		}
	}
	c.acc = a
	return a, nil
}

// addToSums takes an accepted update of summing round r into the group's
// sums (its coordinates are added, in parallel, when the group's
// transaction ends) and returns its stored record; a refusal reason and
// detail when it does not fit the sums' bounds.
func (c *Coordinator) addToSums(tx *bolt.Tx, in *incoming, st *batchState) (rec []byte, reason, detail string, err error) {
	r, h := st.round, &in.Msg.Header
	a, err := c.sums(tx, r, st.dims)
	if err != nil {
		return nil, "", "", err
	}
	st.acc = a
	if a.sum.Count >= uint64(r.Sum.N) { // (the round completes at N: not reached)
		return nil, federated.ReasonRoundClosed, fmt.Sprintf("round %d has its %d updates", r.Round, r.Sum.N), nil
	}
	term, eff, samples, staleness, reason, detail := bounds.PrepareTerm(a.sum, r, st.dims, &in.CheckedUpdate)
	if reason != "" {
		return nil, reason, detail, nil
	}
	norm := in.Payload.Norm
	if rec, err = store.EncodeSummedUpdate(h, norm); err != nil {
		return nil, "", "", err
	}
	a.sum.AddWeight(eff, samples, staleness)
	st.terms = append(st.terms, term)
	return rec, "", "", nil
}

// commitSums adds the group's accepted updates to the sums and stores
// them (in the group's transaction).
func (c *Coordinator) commitSums(tx *bolt.Tx, st *batchState) error {
	if st.acc == nil || len(st.terms) == 0 {
		return nil
	}
	st.acc.sum.Add(st.terms, c.cfg.Verifiers)
	st.acc.buf = store.EncodeSum(st.acc.buf, st.acc.round, st.acc.sum)
	return tx.Bucket(store.BucketSums).Put(u64(st.acc.round), st.acc.buf)
}
