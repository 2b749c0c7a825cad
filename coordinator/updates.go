package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/backoff"
	"github.com/edgesched/edgesched/quant"
)

func jsonUnmarshal(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	return nil
}

// consume pulls updates and handles them one at a time; fetch errors are
// retried with capped, jittered backoff.
func (c *Coordinator) consume(ctx context.Context, cons jetstream.Consumer) error {
	backoff := backoff.New(50*time.Millisecond, 5*time.Second, c.cfg.Seed)
	for ctx.Err() == nil {
		batch, err := cons.Fetch(64, jetstream.FetchMaxWait(500*time.Millisecond))
		if err == nil {
			for msg := range batch.Messages() {
				c.handle(ctx, msg)
			}
			err = batch.Error()
		}
		if err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			c.log.Warn("fetch updates", "err", err)
			if !backoff.Sleep(ctx) {
				return ctx.Err()
			}
			continue
		}
		backoff.Reset()
	}
	return ctx.Err()
}

// handle processes one update message: verify, then record it (or why it
// was refused) in one transaction, then ack it on the stream, then answer
// the site. A crash between the commit and the stream ack redelivers the
// message, which the site's high-water mark then recognises: it gets its
// recorded verdict again, and an update is never applied twice.
func (c *Coordinator) handle(ctx context.Context, msg jetstream.Msg) {
	var streamSeq uint64
	if md, err := msg.Metadata(); err == nil {
		streamSeq = md.Sequence.Stream
	}
	ack, err := c.processFrom(ctx, msg.Subject(), msg.Data(), streamSeq)
	if err != nil {
		// store failure: leave it unacked, JetStream redelivers it
		c.log.Error("process update", "err", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	if err := msg.Ack(); err != nil {
		c.log.Warn("ack update on the stream", "err", err)
	}
	if ack != nil {
		if raw, err := federated.Marshal(ack); err == nil {
			if b := c.bus; b != nil {
				_ = b.nc.Publish(federated.AckSubjectPrefix+ack.Site, raw)
			}
		}
	}
}

// Process decides on one update message and records the verdict. It
// returns the Ack for the site (nil when the message cannot be attributed
// to a site) and an error only when the store failed (the message must be
// retried).
func (c *Coordinator) Process(ctx context.Context, data []byte) (*federated.Ack, error) {
	return c.ProcessFrom(ctx, "", data)
}

// errSubject: an update on another site's subject (ReasonSubject).
var errSubject = errors.New("coordinator: update on another site's subject")

// ProcessFrom is Process for a message that arrived on subject: an update
// whose header names another site than its subject does is refused
// (ReasonSubject) without touching either site's record, so relaying a
// captured update cannot burn the real site's sequence. An empty subject
// skips the check.
func (c *Coordinator) ProcessFrom(ctx context.Context, subject string, data []byte) (*federated.Ack, error) {
	return c.processFrom(ctx, subject, data, 0)
}

// processFrom is ProcessFrom for the message at streamSeq of the update
// stream (0: unknown). A message that cannot be attributed to a site has no
// sequence of its own to judge it by, so its refusal is recorded under
// its stream sequence: delivered again (the coordinator stopped before
// acking it), it is not counted twice.
func (c *Coordinator) processFrom(ctx context.Context, subject string, data []byte, streamSeq uint64) (*federated.Ack, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now().UTC()
	c.metrics.updateBytes.Add(float64(len(data)))
	m, err := federated.DecodeUpdateMsg(data, c.cfg.Sites)
	if err == nil && subject != "" && subject != federated.UpdateSubjectPrefix+m.Header.Site {
		err = fmt.Errorf("%w: site %q seq %d arrived on %s", errSubject, m.Header.Site, m.Header.Seq, subject)
	}
	if err != nil {
		reason := federated.ReasonMalformed
		switch {
		case errors.Is(err, errSubject):
			reason = federated.ReasonSubject
		case errors.Is(err, federated.ErrUnknownSite):
			reason = federated.ReasonUnknownSite
		case errors.Is(err, federated.ErrSiteSignature):
			reason = federated.ReasonSignature
		case len(data) > federated.MaxUpdateBytes:
			reason = federated.ReasonTooLarge
		}
		c.log.Warn("update refused", "reason", reason, "err", err)
		c.metrics.updates.WithLabelValues("rejected", reason).Inc()
		return nil, c.db.Update(func(tx *bolt.Tx) error {
			if streamSeq > 0 {
				if again, err := seenUnattributed(tx, streamSeq); err != nil || again {
					return err
				}
			}
			if err := countReject(tx, reason); err != nil {
				return err
			}
			return audit(tx, now, "update.rejected", 0, "", fmt.Sprintf("%s: %v", reason, err))
		})
	}
	h := m.Header
	ack := &federated.Ack{V: federated.ProtocolVersion, Site: h.Site, Seq: h.Seq, Round: h.Round}
	var round *Round // the current round as accept left it (when accepted)
	again := false   // the update recorded last, delivered again
	err = c.db.Update(func(tx *bolt.Tx) error {
		var site Site
		if _, err := getJSON(tx.Bucket(bucketSites), []byte(h.Site), &site); err != nil {
			return err
		}
		site.Site, site.LastSeen = h.Site, now
		if site.JudgedFrom == 0 {
			site.JudgedFrom = site.HWM + 1 // verdicts are kept from here on
		}
		if h.Seq == site.HWM && site.LastStatus != "" && h.Seq < site.JudgedFrom {
			// (a record from before verdicts were kept) the stream
			// redelivers the update recorded last when the coordinator
			// stopped between recording it and acking it: same verdict
			ack.Status, ack.Reason, again = site.LastStatus, site.LastReason, true
			return nil
		}
		judged := h.Seq <= site.HWM // without kept verdicts, HWM says
		if h.Seq >= site.JudgedFrom && h.Seq+judgedWindow > site.HWM {
			v, err := getVerdict(tx, h.Site, h.Seq)
			if err != nil {
				return err
			}
			if v != nil && h.Seq == site.HWM {
				// the stream redelivers the update recorded last when the
				// coordinator stopped between recording it and acking it:
				// it was judged then, so it gets the same verdict and
				// changes nothing (it is no replay)
				ack.Status, ack.Reason, again = v.Status, v.Reason, true
				return nil
			}
			// Not judged though below HWM: the stream redelivered it after
			// newer ones (the coordinator had fetched it and stopped before
			// judging it, and the site's later updates were judged while
			// it waited out AckWait): judge it now.
			judged = v != nil
		}
		if judged {
			// the same message again (a retry whose ack was lost, after
			// the stream's de-duplication window) or an old one replayed:
			// either way it changes nothing, and it is counted
			ack.Status, ack.Reason = federated.Duplicate, federated.ReasonReplay
			if site.Rejected == nil {
				site.Rejected = map[string]int{}
			}
			site.Rejected[federated.ReasonReplay]++
			if err := countReject(tx, federated.ReasonReplay); err != nil {
				return err
			}
			return putJSON(tx.Bucket(bucketSites), []byte(h.Site), &site)
		}
		site.HWM = max(site.HWM, h.Seq)
		reason, detail, r, err := c.accept(tx, m, &site)
		if err != nil {
			return err
		}
		round = r
		if reason != "" {
			ack.Status, ack.Reason = federated.Rejected, reason
			if site.Rejected == nil {
				site.Rejected = map[string]int{}
			}
			site.Rejected[reason]++
			if err := countReject(tx, reason); err != nil {
				return err
			}
			if err := audit(tx, now, "update.rejected", h.Round, h.Site, fmt.Sprintf("seq %d: %s: %s", h.Seq, reason, detail)); err != nil {
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
		if err := putVerdict(tx, h.Site, h.Seq, site.HWM, verdict{Status: ack.Status, Reason: ack.Reason}); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bucketSites), []byte(h.Site), &site)
	})
	if err != nil {
		return nil, fmt.Errorf("record update %s: %w", federated.MsgID(h.Site, h.Seq), err)
	}
	if again {
		c.log.Info("update delivered again: verdict repeated", "site", h.Site, "seq", h.Seq, "status", ack.Status, "reason", ack.Reason)
		return ack, nil
	}
	c.cfg.fail(FailUpdateCommitted)
	c.metrics.updates.WithLabelValues(string(ack.Status), ack.Reason).Inc()
	c.log.Debug("update", "site", h.Site, "seq", h.Seq, "round", h.Round, "status", ack.Status, "reason", ack.Reason)
	if ack.Status == federated.Accepted {
		if err := c.afterAccept(ctx, round); err != nil {
			c.log.Error("after accepting an update", "err", err)
		}
	}
	return ack, nil
}

// accept checks an authenticated update against the current round and
// stores it; it returns a rejection reason (and detail) or "" and the
// updated current round when accepted. It runs inside Process's
// transaction.
func (c *Coordinator) accept(tx *bolt.Tx, m *federated.UpdateMsg, site *Site) (string, string, *Round, error) {
	h := m.Header
	cur := getU64(tx.Bucket(bucketMeta), keyRound)
	r, err := getRound(tx, cur)
	if err != nil {
		return "", "", nil, err
	}
	switch {
	case r == nil || h.Round > r.Round:
		return federated.ReasonFutureRound, fmt.Sprintf("round %d, current %d", h.Round, cur), nil, nil
	case r.Mode == federated.Sync && h.Round < r.Round:
		return federated.ReasonStaleRound, fmt.Sprintf("round %d, current %d", h.Round, r.Round), nil, nil
	case r.State != StateCollecting:
		return federated.ReasonRoundClosed, fmt.Sprintf("round %d is %s", r.Round, r.State), nil, nil
	case r.Mode == federated.Sync && h.BaseModel != r.BaseModel:
		return federated.ReasonBaseModel, fmt.Sprintf("trained from %s, round base %s", short(h.BaseModel), short(r.BaseModel)), nil, nil
	}
	if r.Mode == federated.Async {
		// the base must be a model we published, not too old
		base, err := getModel(tx, h.BaseVersion)
		if err != nil {
			return "", "", nil, err
		}
		if base == nil || base.FloatModel != h.BaseModel {
			return federated.ReasonBaseModel, fmt.Sprintf("version %d is not %s", h.BaseVersion, short(h.BaseModel)), nil, nil
		}
		if st := int(r.BaseVersion) - int(h.BaseVersion); c.cfg.MaxStaleness > 0 && st > c.cfg.MaxStaleness {
			return federated.ReasonStaleRound, fmt.Sprintf("%d versions old (at most %d)", st, c.cfg.MaxStaleness), nil, nil
		}
	}
	dims, err := c.dims(tx, r.BaseVersion)
	if err != nil {
		return "", "", nil, err
	}
	u, err := quant.DecodeUpdate(m.Payload, dims)
	switch {
	case errors.Is(err, quant.ErrNonFinite):
		return federated.ReasonNonFinite, err.Error(), nil, nil
	case errors.Is(err, quant.ErrShape):
		return federated.ReasonShape, err.Error(), nil, nil
	case err != nil:
		return federated.ReasonMalformed, err.Error(), nil, nil
	case len(u.Values) != dims:
		return federated.ReasonShape, fmt.Sprintf("%d values, the model has %d", len(u.Values), dims), nil, nil
	case u.Base != h.BaseModel:
		return federated.ReasonBaseModel, "payload and header name different base models", nil, nil
	}
	ub := tx.Bucket(bucketUpdates).Bucket(u64(r.Round))
	if ub == nil {
		return "", "", nil, fmt.Errorf("%w: round %d has no update bucket", ErrStore, r.Round)
	}
	key := []byte(h.Site)
	if r.Mode == federated.Async {
		key = []byte(federated.MsgID(h.Site, h.Seq))
	} else if ub.Get(key) != nil {
		return federated.ReasonReplay, fmt.Sprintf("site already contributed to round %d", r.Round), nil, nil
	}
	if err := ub.Put(key, encodeStored(m)); err != nil {
		return "", "", nil, err
	}
	r.Accepted++
	if err := putJSON(tx.Bucket(bucketRounds), u64(r.Round), r); err != nil {
		return "", "", nil, err
	}
	if err := audit(tx, c.clock.Now(), "update.accepted", r.Round, h.Site, fmt.Sprintf("seq %d, %d samples, base version %d", h.Seq, h.Samples, h.BaseVersion)); err != nil {
		return "", "", nil, err
	}
	return "", "", r, nil
}

// afterAccept closes a sync round once every expected site contributed,
// and aggregates an async buffer once it is full. r is the current round
// as the accepting transaction stored it (callers hold c.mu, so it is
// still current): reading it back would decode its record, which lists
// every expected site, once more per update.
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
