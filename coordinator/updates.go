package coordinator

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/bounds"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/backoff"
	"github.com/edgesched/edgesched/internal/parallel"
	"github.com/edgesched/edgesched/quant"
)

// Ingest (docs/federated.md "Ingest"). Updates flow through three stages:
//
//  1. fetch: the durable pull consumer hands over what the stream has, at
//     most fetchBytes a request;
//  2. verify: every message is checked, as soon as it arrives, by one of
//     a pool of Config.Verifiers workers — the envelope and its ed25519
//     signature, then the payload (checksum, finite values, its L2 norm),
//     then, in a round that stores payloads, the stored record of what
//     passed is made (a copy and its CRC) — without the coordinator's
//     lock, and handed on in stream order; junk costs one worker a
//     signature check, never the store a transaction;
//  3. judge: under the lock, whatever has been verified (up to
//     Config.Batch messages and groupBytes) is judged in one bbolt
//     transaction (one commit for all its verdicts: a group commit), then
//     acked on the stream, then answered to the sites. The round record is
//     written once per group, not per update, and so are a summing
//     round's running sums (sums.go), to which the group's accepted
//     updates are added on Config.Verifiers goroutines.
//
// While one group is judged the next messages are verified. A crash between the
// commit and the stream acks redelivers the group: each message finds its
// verdict under its stream sequence and gets it again, counting nothing.

// incoming is one update message on its way through ingest.
type incoming struct {
	subject   string
	data      []byte
	streamSeq uint64
	msg       jetstream.Msg // nil for Process
	verified  chan struct{} // closed once verified (fetchLoop's)

	// verification's findings (the envelope refused: not attributable
	// to a site)
	federated.CheckedUpdate

	// record is the message's stored form (store.EncodeStoredUpdate),
	// made by verification's workers, outside the lock, for a message
	// whose envelope and payload passed: judge stores it when it accepts
	// the update (nil: judge encodes it itself)
	record []byte

	// judge's
	ack    *federated.Ack
	again  bool   // delivered again: verdict repeated, nothing counted
	reason string // refusal reason of an unattributable message
}

// groupBytes bounds the message bytes of one group (at least one message
// is taken whatever its size).
const groupBytes = 32 << 20

// fetchBytes bounds one pull request (of at most Batch messages).
const fetchBytes = 16 << 20

// verifyAll verifies a group (federated.CheckUpdateMsg) with the
// configured number of workers, without the lock.
func (c *Coordinator) verifyAll(group []*incoming) {
	parallel.For(len(group), c.cfg.Verifiers, func(i int) { c.verifyOne(group[i]) })
}

// verifyOne verifies one message (federated.CheckUpdateMsg) without the
// lock and, unless the current round sums its updates, makes its stored
// record.
func (c *Coordinator) verifyOne(in *incoming) {
	in.CheckedUpdate = federated.CheckUpdateMsg(in.data, in.subject, c.cfg.Sites, int(c.curDims.Load()))
	in.record = nil
	if in.Err == nil && in.PayloadErr == nil && !c.curSum.Load() {
		// the copy and checksum of the stored record (a 50 KB update:
		// a tenth of the judging transaction's time) in parallel
		in.record, _ = store.EncodeStoredUpdate(&in.Msg.Header, in.Msg.Payload)
	}
}

// consume runs ingest until ctx ends or the store fails for good
// (ErrStore). Fetch errors and transient store errors (a full disk) are
// retried with capped, jittered backoff; messages whose verdicts could not
// be stored are left to the stream to deliver again. A group is whatever
// has been verified when the previous one is committed (up to Batch
// messages and groupBytes): the slower the store, the larger the groups.
func (c *Coordinator) consume(ctx context.Context, cons jetstream.Consumer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	verified := make(chan *incoming, 2*c.cfg.Batch)
	var wg sync.WaitGroup
	wg.Go(func() { c.fetchLoop(ctx, cons, verified) })
	defer wg.Wait()
	defer cancel()
	bo := backoff.New(50*time.Millisecond, 5*time.Second, c.cfg.Seed^0x1e57)
	for {
		var group []*incoming
		select {
		case <-ctx.Done():
			return ctx.Err()
		case in := <-verified:
			group = append(group, in)
		}
		size := len(group[0].data)
	fill:
		for len(group) < c.cfg.Batch && size < groupBytes {
			select {
			case in := <-verified:
				group, size = append(group, in), size+len(in.data)
			default:
				break fill
			}
		}
		for len(group) > 0 {
			n, err := c.judge(ctx, group)
			if err != nil {
				for _, in := range group {
					if in.msg != nil {
						_ = in.msg.NakWithDelay(time.Second)
					}
				}
				c.metrics.StoreErrors.Inc()
				if errors.Is(err, ErrStore) {
					return err
				}
				c.limited.Warn("store", "recording update verdicts failed; the stream delivers them again", "err", err, "updates", len(group))
				if !bo.Sleep(ctx) {
					return ctx.Err()
				}
				break
			}
			bo.Reset()
			group = group[n:]
		}
	}
}

// fetchLoop pulls messages, has them verified by a pool of Verifiers
// workers as they arrive and hands them on in stream order once verified.
// At most 2*Batch messages are between the fetch and the hand-over.
func (c *Coordinator) fetchLoop(ctx context.Context, cons jetstream.Consumer, verified chan<- *incoming) {
	workers := c.cfg.Verifiers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	jobs := make(chan *incoming, 2*c.cfg.Batch)
	inOrder := make(chan *incoming, 2*c.cfg.Batch)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for in := range jobs {
				c.verifyOne(in)
				close(in.verified)
			}
		})
	}
	wg.Go(func() {
		for in := range inOrder {
			select {
			case <-ctx.Done():
				return
			case <-in.verified:
			}
			select {
			case <-ctx.Done():
				return
			case verified <- in:
			}
		}
	})
	defer wg.Wait()
	defer close(jobs)
	defer close(inOrder)
	bo := backoff.New(50*time.Millisecond, 5*time.Second, c.cfg.Seed)
	for ctx.Err() == nil {
		batch, err := cons.Fetch(c.cfg.Batch, jetstream.FetchMaxBytes(fetchBytes), jetstream.FetchMaxWait(500*time.Millisecond))
		if err == nil {
			msgs := batch.Messages()
			for {
				var m jetstream.Msg
				var open bool
				select {
				case <-ctx.Done():
					return
				case m, open = <-msgs:
				}
				if !open {
					break
				}
				in := newIncoming(m)
				in.verified = make(chan struct{})
				select {
				case <-ctx.Done():
					return
				case inOrder <- in:
				}
				jobs <- in // never blocks for long: the workers need nothing to drain it
			}
			err = batch.Error()
		}
		if err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			c.limited.Warn("fetch", "fetch updates", "err", err)
			if !bo.Sleep(ctx) {
				return
			}
			continue
		}
		bo.Reset()
	}
}

func newIncoming(m jetstream.Msg) *incoming {
	in := &incoming{subject: m.Subject(), data: m.Data(), msg: m}
	if md, err := m.Metadata(); err == nil {
		in.streamSeq = md.Sequence.Stream
	}
	return in
}

// Process decides on one update message and records the verdict. It
// returns the Ack for the site (nil when the message cannot be attributed
// to a site) and an error only when the store failed (the message must be
// retried).
func (c *Coordinator) Process(ctx context.Context, data []byte) (*federated.Ack, error) {
	return c.ProcessFrom(ctx, "", data)
}

// ProcessFrom is Process for a message that arrived on subject: an update
// whose header names another site than its subject does is refused
// (ReasonSubject) without touching either site's record, so relaying a
// captured update cannot burn the real site's sequence. An empty subject
// skips the check.
func (c *Coordinator) ProcessFrom(ctx context.Context, subject string, data []byte) (*federated.Ack, error) {
	return c.processFrom(ctx, subject, data, 0)
}

// processFrom is ProcessFrom for the message at streamSeq of the update
// stream (0: unknown), through the same verify and judge as ingest.
func (c *Coordinator) processFrom(ctx context.Context, subject string, data []byte, streamSeq uint64) (*federated.Ack, error) {
	in := &incoming{subject: subject, data: data, streamSeq: streamSeq}
	c.verifyAll([]*incoming{in})
	if _, err := c.judge(ctx, []*incoming{in}); err != nil {
		return nil, err
	}
	return in.ack, nil
}

// batchState is what one judging transaction keeps in memory: the current
// round (written back once, at the end, when an update changed it).
type batchState struct {
	round    *Round
	dims     int
	dirty    bool
	complete bool // the round has all it waits for: close it after the commit

	// a summing round's sums and the group's accepted updates, added to
	// them at the end of the transaction
	acc   *accState
	terms []federated.FixedTerm
}

// judge records the verdicts on a prefix of group in one transaction and
// returns its length: it stops after an update that completes the current
// round, which is then closed (and aggregated) before the rest is judged
// against the next round. After the commit it acks each message on the
// stream and answers its site. An error means nothing was recorded.
func (c *Coordinator) judge(ctx context.Context, group []*incoming) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now().UTC()
	var st batchState
	n := 0
	err := c.update(func(tx *bolt.Tx) error {
		n = 0
		st = batchState{}
		cur := getU64(tx.Bucket(store.BucketMeta), store.KeyRound)
		if cur > 0 {
			r, err := c.rounds.Get(tx, cur)
			if err != nil {
				return err
			}
			st.round = r
			if r != nil {
				if st.dims, err = c.dims(tx, r.BaseVersion); err != nil {
					return err
				}
				c.curDims.Store(int64(st.dims))
				c.curSum.Store(r.Sum != nil)
			}
		}
		for _, in := range group {
			in.ack, in.again, in.reason = nil, false, ""
			if err := c.judgeOne(tx, in, &st, now); err != nil {
				return err
			}
			n++
			if st.complete {
				break
			}
		}
		if err := c.commitSums(tx, &st); err != nil {
			return err
		}
		if st.dirty {
			return store.PutRound(tx, st.round)
		}
		return nil
	})
	if err != nil {
		// the sums in memory may hold what was not committed: read them
		// again from the store
		c.acc = nil
		return 0, err
	}
	done := group[:n]
	if c.ha != nil {
		for _, in := range done {
			c.ha.Judged(in.streamSeq)
		}
	}
	for _, in := range done {
		if !in.again {
			c.cfg.fail(FailUpdateCommitted)
		}
	}
	for _, in := range done {
		c.count(in)
		if in.msg != nil {
			if err := in.msg.Ack(); err != nil {
				c.limited.Warn("ack", "ack update on the stream", "err", err)
			}
		}
		if in.ack != nil && c.bus != nil {
			if raw, err := federated.Marshal(in.ack); err == nil {
				_ = c.bus.nc.Publish(federated.AckSubjectPrefix+in.ack.Site, raw)
			}
		}
	}
	if st.complete {
		if err := c.closeRound(ctx, st.round); err != nil {
			if errors.Is(err, ErrStore) {
				return n, err
			}
			c.limited.Warn("close", "closing a complete round", "round", st.round.Round, "err", err)
		}
	}
	return n, nil
}

// count updates metrics and logs for a judged message (after its commit:
// a verdict that could not be stored is counted when it is).
func (c *Coordinator) count(in *incoming) {
	c.metrics.UpdateBytes.Add(float64(len(in.data)))
	switch {
	case in.again && in.ack == nil:
		c.log.Debug("unattributable message delivered again: refused again, not counted", "stream_seq", in.streamSeq, "reason", in.reason)
	case in.again:
		c.log.Info("update delivered again: verdict repeated", "site", in.ack.Site, "seq", in.ack.Seq, "status", in.ack.Status, "reason", in.ack.Reason)
	case in.ack == nil:
		c.metrics.Updates.WithLabelValues(string(federated.Rejected), in.reason).Inc()
		c.limited.Warn("refused:"+in.reason, "update refused", "reason", in.reason, "err", in.Err)
	default:
		a := in.ack
		c.metrics.Updates.WithLabelValues(string(a.Status), a.Reason).Inc()
		if a.Status == federated.Rejected {
			c.limited.Warn("refused:"+a.Reason, "update refused", "site", a.Site, "seq", a.Seq, "round", a.Round, "reason", a.Reason)
		} else {
			c.log.Debug("update", "site", a.Site, "seq", a.Seq, "round", a.Round, "status", a.Status, "reason", a.Reason)
		}
	}
}

// judgeOne judges one verified message inside the batch's transaction.
func (c *Coordinator) judgeOne(tx *bolt.Tx, in *incoming, st *batchState, now time.Time) error {
	if in.Err != nil {
		reason := federated.ReasonMalformed
		switch {
		case errors.Is(in.Err, federated.ErrWrongSubject):
			reason = federated.ReasonSubject
		case errors.Is(in.Err, federated.ErrUnknownSite):
			reason = federated.ReasonUnknownSite
		case errors.Is(in.Err, federated.ErrSiteSignature):
			reason = federated.ReasonSignature
		case len(in.data) > federated.MaxUpdateBytes:
			reason = federated.ReasonTooLarge
		}
		in.reason = reason
		if in.streamSeq > 0 {
			again, err := store.SeenUnattributed(tx, in.streamSeq)
			if err != nil {
				return err
			}
			if again {
				in.again = true
				in.ack = nil
				return nil
			}
		}
		if err := store.CountReject(tx, reason); err != nil {
			return err
		}
		return store.Audit(tx, now, c.cfg.AuditKeep, "update.rejected", 0, "", fmt.Sprintf("%s: %v", reason, in.Err))
	}
	h := in.Msg.Header
	ack := &federated.Ack{V: federated.ProtocolVersion, Site: h.Site, Seq: h.Seq, Round: h.Round}
	in.ack = ack
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
		ack.Status, ack.Reason, in.again = site.LastStatus, site.LastReason, true
		return nil
	}
	judged := h.Seq <= site.HWM // without kept verdicts, HWM says
	if h.Seq >= site.JudgedFrom && h.Seq+store.JudgedWindow > site.HWM {
		v, err := store.GetVerdict(tx, h.Site, h.Seq)
		if err != nil {
			return err
		}
		if v != nil && (h.Seq == site.HWM || (in.streamSeq > 0 && v.Stream == in.streamSeq)) {
			// the stream delivers again a message judged before (the
			// coordinator stopped between recording its verdict and
			// acking it): the same verdict, and nothing changes (it is no
			// replay)
			ack.Status, ack.Reason, in.again = v.Status, v.Reason, true
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
		ack.Status, ack.Reason = federated.Duplicate, federated.ReasonReplay
		if site.Rejected == nil {
			site.Rejected = map[string]int{}
		}
		site.Rejected[federated.ReasonReplay]++
		if err := store.CountReject(tx, federated.ReasonReplay); err != nil {
			return err
		}
		return store.PutRecord(tx.Bucket(store.BucketSites), []byte(h.Site), site)
	}
	site.HWM = max(site.HWM, h.Seq)
	reason, detail, err := c.accept(tx, in, st, now)
	if err != nil {
		return err
	}
	if reason != "" {
		ack.Status, ack.Reason = federated.Rejected, reason
		if site.Rejected == nil {
			site.Rejected = map[string]int{}
		}
		site.Rejected[reason]++
		if err := store.CountReject(tx, reason); err != nil {
			return err
		}
		if err := store.Audit(tx, now, c.cfg.AuditKeep, "update.rejected", h.Round, h.Site, fmt.Sprintf("seq %d: %s: %s", h.Seq, reason, detail)); err != nil {
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
	if err := store.PutVerdict(tx, h.Site, h.Seq, site.HWM, store.Verdict{Status: ack.Status, Reason: ack.Reason, Stream: in.streamSeq}); err != nil {
		return err
	}
	return store.PutRecord(tx.Bucket(store.BucketSites), []byte(h.Site), site)
}

// accept checks an authenticated update against the current round and
// its bounds and stores it; it returns a rejection reason (and detail), or
// "" when accepted (st.round then counts it).
func (c *Coordinator) accept(tx *bolt.Tx, in *incoming, st *batchState, now time.Time) (string, string, error) {
	h := in.Msg.Header
	r := st.round
	switch {
	case r == nil || h.Round > r.Round:
		var cur uint64
		if r != nil {
			cur = r.Round
		}
		return federated.ReasonFutureRound, fmt.Sprintf("round %d, current %d", h.Round, cur), nil
	case r.Mode == federated.Sync && h.Round < r.Round:
		return federated.ReasonStaleRound, fmt.Sprintf("round %d, current %d", h.Round, r.Round), nil
	case r.State != StateCollecting || st.complete:
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
		if st := int(r.BaseVersion) - int(h.BaseVersion); c.cfg.MaxStaleness > 0 && st > c.cfg.MaxStaleness {
			return federated.ReasonStaleRound, fmt.Sprintf("%d versions old (at most %d)", st, c.cfg.MaxStaleness), nil
		}
	}
	if reason, detail := bounds.Check(r, st.dims, &in.CheckedUpdate); reason != "" {
		return reason, detail, nil
	}
	ub := tx.Bucket(store.BucketUpdates).Bucket(u64(r.Round))
	if ub == nil {
		return "", "", fmt.Errorf("%w: round %d has no update bucket", ErrStore, r.Round)
	}
	key := []byte(h.Site)
	if r.Mode == federated.Async {
		key = []byte(federated.MsgID(h.Site, h.Seq))
	} else if ub.Get(key) != nil {
		return federated.ReasonReplay, fmt.Sprintf("site already contributed to round %d", r.Round), nil
	}
	rec := in.record
	if r.Sum != nil {
		var reason, detail string
		var err error
		if rec, reason, detail, err = c.addToSums(tx, in, st); err != nil || reason != "" {
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
	st.dirty = true
	if (r.Mode == federated.Sync && r.Accepted >= len(r.Expected)) || (r.Mode == federated.Async && r.Accepted >= c.cfg.Buffer) {
		st.complete = true
	}
	if err := store.Audit(tx, now, c.cfg.AuditKeep, "update.accepted", r.Round, h.Site, fmt.Sprintf("seq %d, %d samples, base version %d, norm %.4g", h.Seq, h.Samples, h.BaseVersion, in.Payload.Norm)); err != nil {
		return "", "", err
	}
	return "", "", nil
}

// afterAccept closes a sync round once every expected site contributed,
// and aggregates an async buffer once it is full (recovery after a crash
// between the two). Callers hold c.mu.
func (c *Coordinator) afterAccept(ctx context.Context, r *Round) error {
	if r == nil || r.State != StateCollecting {
		return nil
	}
	if (r.Mode == federated.Sync && r.Accepted >= len(r.Expected)) || (r.Mode == federated.Async && r.Accepted >= c.cfg.Buffer) {
		return c.closeRound(ctx, r)
	}
	return nil
}

// dims is the parameter count of a stored model version.
func (c *Coordinator) dims(tx *bolt.Tx, version uint64) (int, error) {
	m, err := c.floatModel(tx, version)
	if err != nil {
		return 0, err
	}
	return m.Net.NumParams(), nil
}
