package flclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/boltkv"
	"github.com/edgesched/edgesched/quant"
)

// Sequencer shares one site's update sequence (and the outbox entries
// not yet stored by the stream) between the agents of that site, of which
// one at a time runs the client (the site leader). The coordinator
// refuses any sequence at or below the site's high-water mark, so a new
// leader must continue the sequence above every one its predecessors
// used, and must send their unsent updates before its own. Config's
// Sequencer is optional: without it the sequence is this agent's own
// (a single-agent site). agent/site implements it on the site's cluster.
//
// The client calls the methods from its own goroutines, one call at a
// time per method; an error from Reserve or Stage means no update is
// queued (it is retried on the next round or async tick).
type Sequencer interface {
	// Reserve returns a sequence greater than after (the client's own
	// newest) and greater than any the site has used, and never returns
	// it again; at most federated.MaxSeq, ErrSequenceExhausted when no
	// such sequence is left (nothing reserved). Before a round's first
	// update (again false) it returns ErrRoundQueued when the site
	// already queued an update for round, so a sync round gets one
	// contribution per site, not one per leader.
	Reserve(ctx context.Context, round, after uint64, again bool) (uint64, error)
	// Stage durably hands the signed update msg with sequence seq over
	// to the site before the client commits it to its outbox (so a
	// successor finds it however this agent stops), recording that the
	// site queued an update for round. It returns ErrRoundQueued (and
	// stages nothing) when again is false and another agent of the site
	// queued an update for round since Reserve.
	Stage(ctx context.Context, seq, round uint64, again bool, msg []byte) error
	// Done says update seq left this client's outbox (the stream stored
	// it, the outbox dropped it when full, or the commit failed after
	// Stage): the site's copy can go.
	Done(ctx context.Context, seq uint64) error
}

// ErrRoundQueued is returned by a Sequencer when the site already queued
// an update for the round.
var ErrRoundQueued = errors.New("flclient: the site already queued an update for this round")

// ErrSequenceExhausted is returned (wrapped, naming the site) when the
// site's update sequence reached federated.MaxSeq: no update can be
// queued, and nothing queued or recorded is changed. Going on would wrap
// to 0, below the coordinator's high-water mark, where every update is
// refused as a replay.
var ErrSequenceExhausted = errors.New("flclient: update sequence exhausted")

// ErrAdopt wraps Adopt's refusals of a message that is not this site's
// signed update with the sequence given (a full outbox is ErrOutboxFull).
var ErrAdopt = errors.New("flclient: update not adopted")

// Outbox returns the sequences waiting in the outbox, oldest first.
func (c *Client) Outbox() ([]uint64, error) {
	var out []uint64
	err := c.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOutbox).ForEach(func(k, _ []byte) error {
			out = append(out, boltkv.FromU64(k))
			return nil
		})
	})
	return out, err
}

// OutboxEntry returns the signed update with sequence seq waiting in the
// outbox (nil when it is not there).
func (c *Client) OutboxEntry(seq uint64) ([]byte, error) {
	var msg []byte
	err := c.db.View(func(tx *bolt.Tx) error {
		msg = append([]byte(nil), tx.Bucket(bucketOutbox).Get(u64(seq))...)
		return nil
	})
	if len(msg) == 0 {
		msg = nil
	}
	return msg, err
}

// Adopt puts a signed update that another agent of this site queued into
// the outbox under its own sequence, so this client publishes it (oldest
// first, before its newer updates). msg must be this site's update, signed
// with the site's key, with sequence seq; an entry already present is
// left alone. Adopted entries count against OutboxLimit like any other,
// under the same OutboxPolicy and in the same transaction as the adoption:
// a full outbox under drop-oldest drops its oldest entry, whoever made it
// (the adopted update itself when it is older than every entry), and
// under refuse-new takes nothing more. Either is counted
// (Counters.DroppedFull), logged and reported, and with a Sequencer the
// update that left the outbox is reported Done (retried until ctx ends);
// when the adopted update found no room Adopt returns an error wrapping
// ErrOutboxFull. The client's own sequence moves up to seq so it never
// reuses it, adopted or not.
func (c *Client) Adopt(ctx context.Context, seq uint64, msg []byte) error {
	reg := &federated.Registry{}
	if err := reg.Add(c.cfg.Site, c.cfg.Signer.Public()); err != nil {
		return fmt.Errorf("%w: %w", ErrAdopt, err)
	}
	m, err := federated.DecodeUpdateMsg(msg, reg)
	if err != nil {
		return fmt.Errorf("%w: sequence %d: %w", ErrAdopt, seq, err)
	}
	if m.Header.Site != c.cfg.Site || m.Header.Seq != seq {
		return fmt.Errorf("%w: the message is %s, not %s", ErrAdopt, federated.MsgID(m.Header.Site, m.Header.Seq), federated.MsgID(c.cfg.Site, seq))
	}
	var dropped uint64 // the entry that left the outbox for room, seq itself when it found none
	err = c.db.Update(func(tx *bolt.Tx) error {
		ob, meta := tx.Bucket(bucketOutbox), tx.Bucket(bucketMeta)
		if ob.Get(u64(seq)) != nil {
			return nil
		}
		if getU64(meta, keySeq) < seq {
			if err := meta.Put(keySeq, u64(seq)); err != nil {
				return err
			}
		}
		var err error
		dropped, err = c.makeRoom(tx, seq)
		switch {
		case errors.Is(err, ErrOutboxFull): // refuse-new: counted here, committed with the sequence
			dropped = seq
			return bumpCounters(tx, func(k *Counters) { k.DroppedFull++ })
		case err != nil || dropped == seq: // (drop-oldest counted dropping seq itself)
			return err
		}
		return ob.Put(u64(seq), msg)
	})
	if err != nil {
		return fmt.Errorf("adopt update %d: %w", seq, err)
	}
	if dropped == seq {
		c.log.Warn("outbox full: adopted update not queued", "seq", seq, "limit", c.cfg.OutboxLimit, "policy", c.cfg.OutboxPolicy)
		err = fmt.Errorf("%w: update %d not adopted (limit %d, %s)", ErrOutboxFull, seq, c.cfg.OutboxLimit, c.cfg.OutboxPolicy)
	} else if dropped != 0 {
		c.log.Warn("outbox full: oldest update dropped", "dropped_seq", dropped, "seq", seq, "limit", c.cfg.OutboxLimit)
	}
	if dropped != 0 {
		c.report()
		if c.cfg.Sequencer != nil {
			c.siteDone(ctx, dropped)
		}
	}
	if err == nil {
		c.kick()
	}
	return err
}

// Forget removes outbox entries that another agent of the site delivered
// (absent sequences are ignored), in one transaction.
func (c *Client) Forget(seqs ...uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	err := c.db.Update(func(tx *bolt.Tx) error {
		ob := tx.Bucket(bucketOutbox)
		for _, s := range seqs {
			if err := ob.Delete(u64(s)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("forget delivered updates: %w", err)
	}
	return nil
}

// InstalledInt8Bytes returns the installed int8 artifact's signed bytes
// (verified against ModelKeys on the way out) and its record: what the
// model installer writes into the scheduler's ConfigMap. Before the first
// install it returns ErrNoModel (and a nil record); any other error is a
// failure to read or verify what is installed (with the record when that
// was readable).
func (c *Client) InstalledInt8Bytes() (*Installed, []byte, error) {
	var inst *Installed
	var raw []byte
	err := c.db.View(func(tx *bolt.Tx) error {
		mb := tx.Bucket(bucketModels)
		v := mb.Get(keyInstalled)
		if v == nil {
			return ErrNoModel
		}
		inst = &Installed{}
		if err := json.Unmarshal(v, inst); err != nil {
			return fmt.Errorf("%w: installed: %v", ErrStore, err)
		}
		raw = append([]byte(nil), mb.Get(blobKey(inst.Version, quant.Int8))...)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if _, err := quant.Decode(raw, quant.DecodeOptions{Keys: c.cfg.ModelKeys}); err != nil {
		return inst, nil, fmt.Errorf("installed version %d: %w", inst.Version, err)
	}
	return inst, raw, nil
}

// ErrNoModel is returned (wrapped) when no model is installed yet; any
// other error reading the installed model is a real failure.
var ErrNoModel = errors.New("flclient: no model yet")
