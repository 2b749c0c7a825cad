package region

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/coordinator/bounds"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/boltkv"
	"github.com/edgesched/edgesched/internal/parallel"
)

// File is the aggregator's store in Config.DataDir.
const File = "region.db"

// ErrStore wraps a damaged store.
var ErrStore = errors.New("region: bad store")

// Buckets of region.db.
var (
	bucketMeta    = []byte("meta")    // "round" -> roundState (JSON)
	bucketHWM     = []byte("hwm")     // site -> highest sequence seen (uint64 BE)
	bucketCovered = []byte("covered") // round (uint64 BE) + site -> federated.RegionalSite (JSON)
	bucketSums    = []byte("sums")    // round (uint64 BE) -> partial sums (store.EncodeSum)
	bucketOutbox  = []byte("outbox")  // round (uint64 BE) -> sealed, signed aggregate
	// site 0x00 seq (uint64 BE) -> store.Verdict: the verdicts on a site's
	// updates down to store.JudgedWindow below its mark (the root's
	// layout and code, coordinator/store)
	bucketJudged = store.BucketJudged
	// site -> the first sequence whose verdict is kept (uint64 BE; a
	// site first seen by a region that kept none starts above its mark)
	bucketJudgedFrom = []byte("judgedfrom")
	keyRound         = []byte("round")
	keySchema        = []byte("schema")
	allBuckets       = [][]byte{bucketMeta, bucketHWM, bucketCovered, bucketSums, bucketOutbox, bucketJudged, bucketJudgedFrom}
)

var u64, getU64 = boltkv.U64, boltkv.GetU64

// schema is region.db's layout version (meta/schema).
const schema = "1"

// roundState is the round the region collects for: the root's record of
// it and the model's parameter count, and whether the region has sealed
// its aggregate (later updates are refused as round_closed).
type roundState struct {
	coordinator.RegionalRound
	Sealed bool `json:"sealed,omitempty"`
}

// Aggregator is a regional aggregator. Create it with New, Run it, Close
// it after Run returned.
type Aggregator struct {
	cfg   Config
	db    *bolt.DB
	log   *slog.Logger
	clock coordinator.Clock

	mu  sync.Mutex
	cur *roundState         // nil: no round yet (guarded by mu)
	sum *federated.FixedSum // cur's partial sums as committed (nil: read them)
	buf []byte              // the stored sums, reused
}

// New opens (or creates) the aggregator's store.
func New(cfg Config) (*Aggregator, error) {
	if cfg.Clock == nil {
		cfg.Clock = wallClock{}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	path := filepath.Join(cfg.DataDir, File)
	db, err := boltkv.Open(path, "region store", keySchema, schema, allBuckets...)
	if err != nil {
		return nil, err
	}
	g := &Aggregator{cfg: cfg, db: db, log: log.With("region", cfg.Region), clock: cfg.Clock}
	err = db.View(func(tx *bolt.Tx) error {
		if raw := tx.Bucket(bucketMeta).Get(keyRound); raw != nil {
			g.cur = &roundState{}
			if err := json.Unmarshal(raw, g.cur); err != nil || g.cur.Round == nil {
				return fmt.Errorf("%w: %s: meta/round: %v", ErrStore, path, err)
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return g, nil
}

// Close closes the store.
func (g *Aggregator) Close() error { return g.db.Close() }

// Current is the round the region collects for (0: none), whether it is
// sealed and how many of its sites it counted.
func (g *Aggregator) Current() (round uint64, sealed bool, counted int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cur == nil {
		return 0, false, 0
	}
	_ = g.db.View(func(tx *bolt.Tx) error {
		counted = countPrefix(tx.Bucket(bucketCovered), u64(g.cur.Round.Round))
		return nil
	})
	return g.cur.Round.Round, g.cur.Sealed, counted
}

// Open makes rr the round the region collects for, unless it collects
// for it (or a later one) already. An unsealed earlier round is
// abandoned: the root has moved on and would refuse its aggregate.
func (g *Aggregator) Open(rr *coordinator.RegionalRound) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if rr == nil || rr.Round == nil {
		return fmt.Errorf("region: no round")
	}
	if g.cur != nil && g.cur.Round.Round >= rr.Round.Round {
		return nil
	}
	if g.cur != nil && !g.cur.Sealed {
		g.log.Warn("round abandoned unsealed: the root opened a newer one", "round", g.cur.Round.Round, "next", rr.Round.Round)
	}
	st := &roundState{RegionalRound: *rr}
	err := g.db.Update(func(tx *bolt.Tx) error {
		// earlier rounds' sums and site lists are done with (a sealed
		// aggregate waits in the outbox; an update of an earlier round
		// delivered again is then refused as a replay, counting nothing)
		for _, b := range [][]byte{bucketSums, bucketCovered} {
			if err := deleteBelow(tx.Bucket(b), u64(rr.Round.Round)); err != nil {
				return err
			}
		}
		return putState(tx, st)
	})
	if err != nil {
		return err
	}
	g.cur, g.sum = st, nil
	g.log.Info("collecting for round", "round", rr.Round.Round, "summing", rr.Round.Sum != nil, "dims", rr.Dims)
	return nil
}

func putState(tx *bolt.Tx, st *roundState) error {
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketMeta).Put(keyRound, raw)
}

// sums are the current round's partial sums as committed. Callers hold
// g.mu, with g.cur summing.
func (g *Aggregator) sums(tx *bolt.Tx) (*federated.FixedSum, error) {
	if g.sum != nil {
		return g.sum, nil
	}
	r := g.cur.Round
	s := federated.NewFixedSum(g.cur.Dims, r.Sum.Shift, r.Sum.WShift, r.Sum.Limit())
	if raw := tx.Bucket(bucketSums).Get(u64(r.Round)); raw != nil {
		if err := store.DecodeSum(raw, r.Round, s, fmt.Sprintf("sums/%d", r.Round)); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStore, err)
		}
		s.SetLimit(r.Sum.Limit())
	}
	g.sum = s
	return s, nil
}

// incoming is one update message on its way through the region.
type incoming struct {
	subject string
	data    []byte
	federated.CheckedUpdate
	ack   *federated.Ack // nil: not attributable to a site
	again bool           // judged before: the same verdict, nothing counted
	// relay: a verified update of a round that does not sum (a robust
	// rule), to be forwarded to the root as it is (Run's consume)
	relay bool
}

// Process verifies and judges one update message that arrived on subject
// ("" skips the subject binding) and returns the Ack for its site (nil
// when the message cannot be attributed to one). The error is the
// store's only. In a round that does not sum, an update that passes is
// only recorded: relaying it to the root is Run's.
func (g *Aggregator) Process(subject string, data []byte) (*federated.Ack, error) {
	in := &incoming{subject: subject, data: data}
	if err := g.judge([]*incoming{in}); err != nil {
		return nil, err
	}
	return in.ack, nil
}

// judge verifies a group (in parallel, without the lock) and records
// the verdicts in one transaction; it seals the round when the region's
// last site has contributed.
func (g *Aggregator) judge(group []*incoming) error {
	g.mu.Lock()
	dims := 0
	if g.cur != nil {
		dims = g.cur.Dims
	}
	g.mu.Unlock()
	parallel.For(len(group), g.cfg.Verifiers, func(i int) {
		in := group[i]
		in.CheckedUpdate = federated.CheckUpdateMsg(in.data, in.subject, g.cfg.Sites, dims)
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	var terms []federated.FixedTerm
	complete := false
	err := g.db.Update(func(tx *bolt.Tx) error {
		terms = terms[:0]
		var sum *federated.FixedSum
		if g.cur != nil && g.cur.Round.Sum != nil && !g.cur.Sealed {
			var err error
			if sum, err = g.sums(tx); err != nil {
				return err
			}
		}
		for _, in := range group {
			t, ok, err := g.judgeOne(tx, in, sum)
			if err != nil {
				return err
			}
			if err := keepVerdict(tx, in); err != nil {
				return err
			}
			if ok {
				terms = append(terms, t)
			}
		}
		if sum == nil {
			return nil // (no summing round collects: nothing to seal)
		}
		if len(terms) > 0 {
			sum.Add(terms, g.cfg.Verifiers)
			g.buf = store.EncodeSum(g.buf, g.cur.Round.Round, sum)
			if err := tx.Bucket(bucketSums).Put(u64(g.cur.Round.Round), g.buf); err != nil {
				return err
			}
		}
		// (also with nothing new: the update that completed the round
		// delivered again after the seal that followed its commit failed,
		// or never ran, seals it now)
		complete = countPrefix(tx.Bucket(bucketCovered), u64(g.cur.Round.Round)) >= len(g.cfg.Sites.Sites())
		return nil
	})
	if err != nil {
		g.sum = nil // may hold what was not committed
		return err
	}
	for _, in := range group {
		g.logVerdict(in)
	}
	if complete {
		return g.seal(g.cur.Round.Round)
	}
	return nil
}

// judgeOne judges one verified message in the group's transaction; ok
// when the update is accepted (its term is to be added to sum).
func (g *Aggregator) judgeOne(tx *bolt.Tx, in *incoming, sum *federated.FixedSum) (federated.FixedTerm, bool, error) {
	var none federated.FixedTerm
	in.ack, in.again, in.relay = nil, false, false
	if in.Err != nil {
		return none, false, nil
	}
	h := &in.Msg.Header
	ack := &federated.Ack{V: federated.ProtocolVersion, Site: h.Site, Seq: h.Seq, Round: h.Round, Status: federated.Rejected}
	in.ack = ack
	hb := tx.Bucket(bucketHWM)
	hwm := getU64(hb, []byte(h.Site))
	fb := tx.Bucket(bucketJudgedFrom)
	from := getU64(fb, []byte(h.Site))
	if from == 0 {
		from = hwm + 1 // verdicts are kept from here on
		if err := fb.Put([]byte(h.Site), u64(from)); err != nil {
			return none, false, err
		}
	}
	cb := tx.Bucket(bucketCovered)
	ckey := append(u64(h.Round), h.Site...)
	var prior federated.RegionalSite
	if raw := cb.Get(ckey); raw != nil {
		if err := json.Unmarshal(raw, &prior); err != nil {
			return none, false, fmt.Errorf("%w: covered/%d/%s: %v", ErrStore, h.Round, h.Site, err)
		}
		if prior.Seq == h.Seq {
			ack.Status, in.again = federated.Accepted, true // delivered again
			// (relayed again: the root's stream and verdicts drop a copy)
			in.relay = g.cur != nil && g.cur.Round.Round == h.Round && g.cur.Round.Sum == nil
			return none, false, nil
		}
	}
	switch {
	case h.Seq <= hwm:
		judged := true // below the kept verdicts: the mark says
		if store.VerdictKept(h.Seq, from, hwm) {
			v, err := store.GetVerdict(tx, h.Site, h.Seq)
			if err != nil {
				return none, false, fmt.Errorf("%w: %w", ErrStore, err)
			}
			// not judged though below the mark: a late update (one an
			// agent adopted from an old leader after its own newer ones
			// went out, docs/site-leader.md) is judged now, as the root
			// does; the mark stays
			judged = v != nil
		}
		if judged {
			// with the high-water mark: a site whose store lost its
			// sequence continues above it (federated.Ack.HWM)
			ack.Status, ack.Reason, ack.HWM = federated.Duplicate, federated.ReasonReplay, hwm
			return none, false, nil
		}
	case federated.SeqJump(hwm, h.Seq):
		ack.Reason = federated.ReasonSeqJump // the mark unmoved, no verdict kept (one above the mark would never go)
		return none, false, nil
	default:
		if err := hb.Put([]byte(h.Site), u64(h.Seq)); err != nil {
			return none, false, err
		}
	}
	r := (*coordinator.Round)(nil)
	if g.cur != nil {
		r = g.cur.Round
	}
	switch {
	case r == nil || h.Round > r.Round:
		ack.Reason = federated.ReasonFutureRound
		return none, false, nil
	case h.Round < r.Round:
		ack.Reason = federated.ReasonStaleRound
		return none, false, nil
	case g.cur.Sealed || r.State != coordinator.StateCollecting:
		ack.Reason = federated.ReasonRoundClosed
		return none, false, nil
	case h.BaseModel != r.BaseModel:
		ack.Reason = federated.ReasonBaseModel
		return none, false, nil
	case prior.Site != "":
		ack.Reason = federated.ReasonReplay // the site already contributed to the round
		return none, false, nil
	}
	if reason, _ := bounds.Check(r, g.cur.Dims, &in.CheckedUpdate); reason != "" {
		ack.Reason = reason
		return none, false, nil
	}
	entry, err := json.Marshal(federated.RegionalSite{Site: h.Site, Seq: h.Seq, Samples: h.Samples, BaseVersion: h.BaseVersion, Norm: in.Payload.Norm})
	if err != nil {
		return none, false, err
	}
	if r.Sum == nil {
		// a robust rule needs every update: the region relays what it
		// verified, the root judges and combines it (docs/federated.md)
		in.relay, ack.Status = true, federated.Accepted
		return none, false, cb.Put(ckey, entry)
	}
	if sum.Count >= uint64(r.Sum.N) {
		ack.Reason = federated.ReasonRoundClosed
		return none, false, nil
	}
	term, eff, samples, staleness, reason, _ := bounds.PrepareTerm(sum, r, g.cur.Dims, &in.CheckedUpdate)
	if reason != "" {
		ack.Reason = reason
		return none, false, nil
	}
	if err := cb.Put(ckey, entry); err != nil {
		return none, false, err
	}
	sum.AddWeight(eff, samples, staleness)
	ack.Status = federated.Accepted
	return term, true, nil
}

// keepVerdict records the verdict judgeOne gave in under its site and
// sequence (store.PutVerdict, which forgets the site's verdicts more than
// store.JudgedWindow below its mark): an update whose sequence has one is
// a replay, one below the mark without one is late and judged. Repeated
// verdicts, replays and seq_jump refusals keep none.
func keepVerdict(tx *bolt.Tx, in *incoming) error {
	a := in.ack
	if a == nil || in.again || a.Status == federated.Duplicate || a.Reason == federated.ReasonSeqJump {
		return nil
	}
	hwm := getU64(tx.Bucket(bucketHWM), []byte(a.Site))
	return store.PutVerdict(tx, a.Site, a.Seq, hwm, store.Verdict{Status: a.Status, Reason: a.Reason})
}

func (g *Aggregator) logVerdict(in *incoming) {
	switch a := in.ack; {
	case a == nil:
		g.log.Warn("update refused: not attributable", "err", in.Err)
	case in.again:
		g.log.Debug("update delivered again: verdict repeated", "site", a.Site, "seq", a.Seq)
	case a.Status != federated.Accepted:
		g.log.Warn("update refused", "site", a.Site, "seq", a.Seq, "round", a.Round, "status", a.Status, "reason", a.Reason)
	default:
		g.log.Debug("update", "site", a.Site, "seq", a.Seq, "round", a.Round)
	}
}

// deleteBelow deletes b's keys below limit.
func deleteBelow(b *bolt.Bucket, limit []byte) error {
	c := b.Cursor()
	for k, _ := c.First(); k != nil && bytes.Compare(k, limit) < 0; k, _ = c.First() {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

func countPrefix(b *bolt.Bucket, prefix []byte) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		n++
	}
	return n
}

// Seal ends the region's collection for round (the current one; another
// round, or one already sealed, is left as it is): its aggregate — the
// sites counted, sorted, and the partial sums — is signed and put in the
// outbox, in the transaction that marks the round sealed. A round
// without contributions is sealed with nothing to forward.
func (g *Aggregator) Seal(round uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.seal(round)
}

func (g *Aggregator) seal(round uint64) error {
	if g.cur == nil || g.cur.Round.Round != round || g.cur.Sealed || g.cur.Round.Sum == nil {
		return nil // (a round that does not sum relays its updates)
	}
	r := g.cur.Round
	st := *g.cur
	st.Sealed = true
	n := 0
	err := g.db.Update(func(tx *bolt.Tx) error {
		a := &federated.RegionalAggregate{Header: federated.RegionalHeader{Region: g.cfg.Region, Round: round}}
		prefix := u64(round)
		c := tx.Bucket(bucketCovered).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var s federated.RegionalSite
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("%w: covered/%d/%s: %v", ErrStore, round, k[8:], err)
			}
			a.Header.Sites = append(a.Header.Sites, s)
		}
		n = len(a.Header.Sites)
		if n > 0 {
			sum, err := g.sums(tx)
			if err != nil {
				return err
			}
			if sum.Count != uint64(n) {
				return fmt.Errorf("%w: round %d: the sums count %d updates, %d sites are recorded", ErrStore, round, sum.Count, n)
			}
			a.Header.Shift, a.Hi, a.Lo = r.Sum.Shift, sum.Hi, sum.Lo
			slices.SortFunc(a.Header.Sites, func(x, y federated.RegionalSite) int { return cmpString(x.Site, y.Site) })
			raw, err := federated.EncodeRegional(a, g.cfg.Signer)
			if err != nil {
				return err
			}
			if err := tx.Bucket(bucketOutbox).Put(prefix, raw); err != nil {
				return err
			}
		}
		return putState(tx, &st)
	})
	if err != nil {
		g.sum = nil
		return err
	}
	g.cur = &st
	g.log.Info("round sealed", "round", round, "sites", n)
	return nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Outbox lists the sealed aggregates not yet acknowledged by the root's
// stream, by round.
func (g *Aggregator) Outbox() ([]uint64, error) {
	var out []uint64
	err := g.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOutbox).ForEach(func(k, _ []byte) error {
			out = append(out, getU64Key(k))
			return nil
		})
	})
	return out, err
}
