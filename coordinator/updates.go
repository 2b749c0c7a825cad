package coordinator

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/ingest"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/parallel"
)

// Ingest (docs/federated.md "Ingest"; package coordinator/ingest): its
// pipeline fetches and verifies update messages and hands them here in
// groups; judge records a group's verdicts in one transaction under the
// lock (ingest.Batch), then acks the messages on the stream, answers the
// sites and closes a round the group completed.

// verifyAll verifies a group with the configured number of workers,
// without the lock.
func (c *Coordinator) verifyAll(group []*ingest.Incoming) {
	parallel.For(len(group), c.cfg.Verifiers, func(i int) { c.verify(group[i]) })
}

// verify verifies one message (ingest.Incoming.Verify) against the current
// round, without the lock.
func (c *Coordinator) verify(in *ingest.Incoming) {
	in.Verify(c.cfg.Sites, int(c.curDims.Load()), c.curSum.Load())
}

// consume runs ingest on cons until ctx ends or the store fails for good
// (ErrStore; ingest.Pipeline.Run).
func (c *Coordinator) consume(ctx context.Context, cons jetstream.Consumer) error {
	p := ingest.Pipeline{Batch: c.cfg.Batch, Verifiers: c.cfg.Verifiers, MaxInflightBytes: c.cfg.MaxInflightBytes, Seed: c.cfg.Seed,
		Verify: c.verify, Judge: c.judge, StoreError: c.metrics.StoreErrors.Inc, Warn: c.limited.Warn}
	c.metrics.SetInflight(p.InflightBytes)
	return p.Run(ctx, cons)
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
	in := &ingest.Incoming{Subject: subject, Data: data, StreamSeq: streamSeq}
	c.verifyAll([]*ingest.Incoming{in})
	if _, err := c.judge(ctx, []*ingest.Incoming{in}); err != nil {
		return nil, err
	}
	return in.Ack, nil
}

// ingestRules are the rules the verdicts on updates follow.
func (c *Coordinator) ingestRules() ingest.Rules {
	return ingest.Rules{AuditKeep: c.cfg.AuditKeep, MaxStaleness: c.cfg.MaxStaleness, Buffer: c.cfg.Buffer,
		OnePerSite: c.cfg.onePerSite(), Workers: c.cfg.Verifiers, Sums: &c.sums,
		Regional: func(site string) bool { _, ok := c.cfg.Regions.RegionOf(site); return ok }}
}

// judge records the verdicts on a prefix of group in one transaction and
// returns its length: it stops after an update that completes the current
// round, which is then closed (and aggregated) before the rest is judged
// against the next round. After the commit it acks each message on the
// stream and answers its site. An error means nothing was recorded.
func (c *Coordinator) judge(ctx context.Context, group []*ingest.Incoming) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now().UTC()
	var st ingest.Batch
	n := 0
	err := c.update(func(tx *bolt.Tx) error {
		n = 0
		st = ingest.Batch{Rules: c.ingestRules()}
		cur := getU64(tx.Bucket(store.BucketMeta), store.KeyRound)
		if cur > 0 {
			r, err := c.rounds.Get(tx, cur)
			if err != nil {
				return err
			}
			st.Round = r
			if r != nil {
				if st.Dims, err = c.dims(tx, r.BaseVersion); err != nil {
					return err
				}
				c.curDims.Store(int64(st.Dims))
				c.curSum.Store(r.Sum != nil)
			}
		}
		for _, in := range group {
			if err := st.Judge(tx, in, now); err != nil {
				return err
			}
			n++
			if st.Complete {
				break
			}
		}
		return st.Commit(tx)
	})
	if err != nil {
		// the sums in memory may hold what was not committed: read them
		// again from the store
		c.sums.Forget()
		return 0, err
	}
	done := group[:n]
	if c.ha != nil {
		for _, in := range done {
			c.ha.Judged(in.StreamSeq)
		}
	}
	for _, in := range done {
		if !in.Again {
			c.cfg.fail(FailUpdateCommitted)
		}
	}
	for _, in := range done {
		c.count(in)
		if in.StreamMsg != nil {
			if err := in.StreamMsg.Ack(); err != nil {
				c.limited.Warn("ack", "ack update on the stream", "err", err)
			}
		}
		if in.Ack != nil && c.bus != nil {
			if raw, err := federated.Marshal(in.Ack); err == nil {
				_ = c.bus.NC.Publish(federated.AckSubjectPrefix+in.Ack.Site, raw)
			}
		}
	}
	if st.Complete {
		if err := c.closeRound(ctx, st.Round); err != nil {
			if errors.Is(err, ErrStore) {
				return n, err
			}
			c.limited.Warn("close", "closing a complete round", "round", st.Round.Round, "err", err)
		}
	}
	return n, nil
}

// count updates metrics and logs for a judged message (after its commit:
// a verdict that could not be stored is counted when it is).
func (c *Coordinator) count(in *ingest.Incoming) {
	c.metrics.UpdateBytes.Add(float64(len(in.Data)))
	switch {
	case in.Again && in.Ack == nil:
		c.log.Debug("unattributable message delivered again: refused again, not counted", "stream_seq", in.StreamSeq, "reason", in.Reason)
	case in.Again:
		c.log.Info("update delivered again: verdict repeated", "site", in.Ack.Site, "seq", in.Ack.Seq, "status", in.Ack.Status, "reason", in.Ack.Reason)
	case in.Ack == nil:
		c.metrics.Updates.WithLabelValues(string(federated.Rejected), in.Reason).Inc()
		c.limited.Warn("refused:"+in.Reason, "update refused", "reason", in.Reason, "err", in.Err)
	default:
		a := in.Ack
		c.metrics.Updates.WithLabelValues(string(a.Status), a.Reason).Inc()
		if a.Status == federated.Rejected {
			c.limited.Warn("refused:"+a.Reason, "update refused", "site", a.Site, "seq", a.Seq, "round", a.Round, "reason", a.Reason)
		} else {
			c.log.Debug("update", "site", a.Site, "seq", a.Seq, "round", a.Round, "status", a.Status, "reason", a.Reason)
		}
	}
}

// afterAccept closes a sync round once every expected site contributed,
// and aggregates an async buffer once it is full (recovery after a crash
// between the two). Callers hold c.mu.
func (c *Coordinator) afterAccept(ctx context.Context, r *Round) error {
	if r == nil || r.State != StateCollecting {
		return nil
	}
	if ingest.RoundComplete(r, c.cfg.Buffer) {
		return c.closeRound(ctx, r)
	}
	return nil
}

// dims is the parameter count of a stored model version (decoded once
// per version: the model cache keeps only a few). Callers hold c.mu.
func (c *Coordinator) dims(tx *bolt.Tx, version uint64) (int, error) {
	return c.models.Dims(tx, version)
}
