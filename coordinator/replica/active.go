package replica

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/backoff"
)

// Keys of the lease and the checkpoint pointer in their buckets
// (federated.LeaseBucket, federated.HABucket).
const (
	LeaseKey      = "active"
	CheckpointKey = "checkpoint"
)

// CatchUpLimit bounds how long a new active holds back closing a round
// at its deadline while it judges again what the stream holds.
const CatchUpLimit = 30 * time.Second

// ErrDeposed: another replica became active (or this one could not renew
// its lease in time); this one stopped. (Its text is the coordinator's.)
var ErrDeposed = errors.New("coordinator: deposed: another replica is active")

// Buckets are the JetStream buckets of high availability.
type Buckets struct {
	Lease jetstream.KeyValue    // federated.LeaseBucket (entries expire after ttl)
	HA    jetstream.KeyValue    // federated.HABucket: the checkpoint pointer
	Obj   jetstream.ObjectStore // federated.CheckpointBucket
}

// OpenBuckets creates (or updates) the buckets with replicas replicas,
// retried with capped, jittered backoff while the cluster elects
// leaders; it fails only when ctx ends (its error).
func OpenBuckets(ctx context.Context, js jetstream.JetStream, ttl time.Duration, replicas int, seed uint64, log *slog.Logger) (*Buckets, error) {
	var b Buckets
	var err error
	for bo := backoff.New(250*time.Millisecond, 5*time.Second, seed^0x4a11); ; {
		b.Lease, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: federated.LeaseBucket, History: 1, TTL: ttl, Storage: jetstream.FileStorage, Replicas: replicas})
		if err == nil {
			b.HA, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: federated.HABucket, History: 1, Storage: jetstream.FileStorage, Replicas: replicas})
		}
		if err == nil {
			b.Obj, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: federated.CheckpointBucket, Storage: jetstream.FileStorage, Replicas: replicas})
		}
		if err == nil {
			return &b, nil
		}
		log.Warn("high availability buckets", "err", err)
		if !bo.Sleep(ctx) {
			return nil, ctx.Err()
		}
	}
}

// Held is a lease taken at revision epoch, renewed by a goroutine it
// owns (Renew) until Release.
type Held struct {
	kv     jetstream.KeyValue
	ttl    time.Duration
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
	held   atomic.Uint64 // the lease's revision as last renewed
	lost   atomic.Bool
}

// Hold renews the lease taken at revision epoch (value val) on a
// goroutine until Release. The context it returns ends with ctx, with
// Release, or when the lease is lost (Deposed).
func Hold(ctx context.Context, kv jetstream.KeyValue, val []byte, ttl time.Duration, epoch uint64, log *slog.Logger) (context.Context, *Held) {
	ctx, cancel := context.WithCancel(ctx)
	h := &Held{kv: kv, ttl: ttl, log: log, cancel: cancel, done: make(chan struct{})}
	h.held.Store(epoch)
	go func() {
		defer close(h.done)
		Renew(ctx, kv, LeaseKey, &h.held, val, ttl, h.Deposed, log)
	}()
	return ctx, h
}

// Deposed records that the lease is lost and ends Hold's context.
func (h *Held) Deposed() { h.lost.Store(true); h.cancel() }

// Lost reports whether the lease was lost.
func (h *Held) Lost() bool { return h.lost.Load() }

// Release stops the renewals and, unless the lease was lost, deletes it
// so that a standby takes over at once rather than after the TTL.
func (h *Held) Release() {
	h.cancel()
	<-h.done
	if h.lost.Load() {
		return
	}
	dctx, dcancel := context.WithTimeout(context.Background(), h.ttl/4)
	defer dcancel()
	if err := h.kv.Delete(dctx, LeaseKey, jetstream.LastRevision(h.held.Load())); err != nil {
		h.log.Warn("release the lease", "err", err)
	}
}

// Active is an active replica's side of the checkpoint pointer and the
// fenced state bucket. Its methods other than Judged, RegionalJudged,
// CatchingUp, Floor, RegionalFloor and Status are serialised by the
// caller (the coordinator's mutex).
type Active struct {
	replica string
	epoch   uint64
	kv      jetstream.KeyValue    // HABucket
	obj     jetstream.ObjectStore // CheckpointBucket
	deposed func()
	log     *slog.Logger

	// serialised by the caller
	ptr     Checkpoint
	ptrRev  uint64
	ckptGen uint64            // store generation of the checkpoint
	revs    map[string]uint64 // state bucket keys' revisions last written
	last    map[string][]byte // ... and the values last tried
	catchUp uint64            // stream sequence to judge before closing at a deadline
	until   time.Time         // ... for at most this long

	shown  atomic.Pointer[Checkpoint] // ptr as Status shows it (set with ptr)
	floor  atomic.Uint64              // the stream is trimmed below this only
	judged atomic.Uint64              // highest stream sequence judged
	// the regional stream's: its sequence to judge before closing at a
	// deadline (set by Fence), the checkpoint's floor, the highest judged
	regCatchUp uint64
	regFloor   atomic.Uint64
	regJudged  atomic.Uint64
}

// Floors are the sequences of the streams a root consumes at or below
// which everything is judged in a checkpoint (its consumers' ack floors
// read before the backup).
type Floors struct {
	Update   uint64 // federated.UpdateStream
	Regional uint64 // federated.RegionalStream
}

// NewActive is replica's state as the active of epoch; deposed is called
// when a write of it is refused.
func NewActive(replica string, epoch uint64, b *Buckets, deposed func(), log *slog.Logger) *Active {
	a := &Active{replica: replica, epoch: epoch, kv: b.HA, obj: b.Obj, deposed: deposed, log: log,
		revs: map[string]uint64{}, last: map[string][]byte{}}
	a.ckptGen = ^uint64(0) // the first checkpoint is taken whatever the store holds
	a.shown.Store(&Checkpoint{})
	return a
}

// Fence makes the new active's claim on the checkpoint pointer: every
// checkpoint a deposed active could still write is refused from now on.
// It reports whether another replica had been active. With regional,
// the root consumes the regional stream too (its catch-up waits for it).
func (a *Active) Fence(ctx context.Context, js jetstream.JetStream, regional bool) (bool, error) {
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		var cur Checkpoint
		var rev uint64
		e, err := a.kv.Get(ctx, CheckpointKey)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return false, fmt.Errorf("read the checkpoint pointer: %w", err)
		default:
			rev = e.Revision()
			if cur, err = DecodeCheckpoint(e.Value()); err != nil {
				return false, err
			}
		}
		next := cur
		next.Epoch, next.Replica, next.Taken = a.epoch, a.replica, time.Now().UTC()
		raw, _ := json.Marshal(next)
		nrev, err := a.kv.Update(ctx, CheckpointKey, raw, rev)
		if IsConflict(err) {
			continue // the deposed active checkpointed meanwhile: read it
		}
		if err != nil {
			return false, fmt.Errorf("claim the checkpoint pointer: %w", err)
		}
		a.ptr, a.ptrRev = next, nrev
		a.shown.Store(&next)
		a.floor.Store(next.Floor)
		a.judged.Store(next.Floor) // nothing to judge again: caught up
		a.regFloor.Store(next.Regional)
		a.regJudged.Store(next.Regional)
		// the streams' ends now: judged again before a deadline closes
		if s, err := js.Stream(ctx, federated.UpdateStream); err == nil {
			a.catchUp = s.CachedInfo().State.LastSeq
		}
		if s, err := js.Stream(ctx, federated.RegionalStream); err == nil && regional {
			a.regCatchUp = s.CachedInfo().State.LastSeq
		}
		a.until = time.Now().Add(CatchUpLimit)
		return cur.Epoch != 0, nil
	}
}

// RestoreTo replaces path with the checkpoint Fence found (none yet: the
// file stays).
func (a *Active) RestoreTo(ctx context.Context, path string) error {
	if a.ptr.Object == "" {
		return nil
	}
	return Restore(ctx, a.obj, a.ptr.Object, path)
}

// ours reports a checkpoint pointer this active wrote (its epoch).
func (a *Active) ours(v []byte) bool {
	p, err := DecodeCheckpoint(v)
	return err == nil && p.Epoch == a.epoch
}

// Due reports whether the store at generation gen is not checkpointed.
func (a *Active) Due(gen uint64) bool { return gen != a.ckptGen }

// Ship stores data, the store at generation gen in which every message
// at or below the floors f of the streams is judged, as the newest
// checkpoint and points the pointer at it. A floor never goes down (a
// consumer not yet created, or new, reports less: the previous
// checkpoint's stands). A refused pointer update deposes the replica
// (ErrDeposed).
func (a *Active) Ship(ctx context.Context, gen uint64, data []byte, f Floors, now time.Time) error {
	floor := max(f.Update, a.ptr.Floor)
	regFloor := max(f.Regional, a.ptr.Regional)
	name := fmt.Sprintf("e%d-g%d.db", a.epoch, gen)
	if _, err := a.obj.PutBytes(ctx, name, data); err != nil {
		return fmt.Errorf("checkpoint %s: %w", name, err)
	}
	next := Checkpoint{Epoch: a.epoch, Replica: a.replica, Object: name, Floor: floor, Regional: regFloor, Bytes: int64(len(data)), Taken: now.UTC()}
	raw, _ := json.Marshal(next)
	rev, err := CASPut(ctx, a.kv, CheckpointKey, raw, a.ptrRev, a.ours)
	if IsConflict(err) {
		a.deposed()
		_ = a.obj.Delete(context.WithoutCancel(ctx), name)
		return fmt.Errorf("%w: checkpoint refused (epoch %d)", ErrDeposed, a.epoch)
	}
	if err != nil {
		return fmt.Errorf("checkpoint pointer: %w", err)
	}
	old := a.ptr.Object
	a.ptr, a.ptrRev, a.ckptGen = next, rev, gen
	a.shown.Store(&next)
	a.floor.Store(floor)
	a.regFloor.Store(regFloor)
	if old != "" && old != name {
		if err := a.obj.Delete(ctx, old); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			a.log.Warn("remove the previous checkpoint", "object", old, "err", err)
		}
	}
	return nil
}

// Written reports whether this active wrote key of the state bucket.
func (a *Active) Written(key string) bool {
	_, ok := a.revs[key]
	return ok
}

// PutState writes key of the state bucket kv by compare-and-set on the
// revision this active last wrote (the first write of an active reads
// it: a deposed active's write in between is read and overwritten, after
// which every one of its writes is refused).
func (a *Active) PutState(ctx context.Context, kv jetstream.KeyValue, key string, raw []byte) error {
	rev, known := a.revs[key]
	for range 10 {
		if !known {
			e, err := kv.Get(ctx, key)
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound):
				rev = 0
			case err != nil:
				return err
			default:
				rev = e.Revision()
			}
		}
		// (an earlier attempt whose answer was lost may have been applied)
		prev := a.last[key]
		ours := func(v []byte) bool { return known && bytes.Equal(v, prev) }
		nrev, err := CASPut(ctx, kv, key, raw, rev, ours)
		a.last[key] = raw
		if err == nil {
			a.revs[key] = nrev
			return nil
		}
		if !IsConflict(err) {
			return err
		}
		if known {
			// written by another since this active's last write
			a.deposed()
			return fmt.Errorf("%w: %s written by another replica (epoch %d)", ErrDeposed, key, a.epoch)
		}
	}
	return fmt.Errorf("write %s: compare-and-set refused 10 times", key)
}

// Judged records that the update at stream sequence seq is judged.
// Callers are serialised (the coordinator's mutex).
func (a *Active) Judged(seq uint64) {
	if seq > a.judged.Load() {
		a.judged.Store(seq)
	}
}

// RegionalJudged records that the regional aggregate at sequence seq of
// the regional stream is judged. Callers are serialised (the regional
// consumer's loop).
func (a *Active) RegionalJudged(seq uint64) {
	if seq > a.regJudged.Load() {
		a.regJudged.Store(seq)
	}
}

// CatchingUp reports whether a new active still judges again what the
// update stream or the regional stream held when it took over (a
// deadline then waits: an update or a regional aggregate the deposed
// active accepted is not refused as late). A nil Active is not.
func (a *Active) CatchingUp() bool {
	return a != nil && (a.judged.Load() < a.catchUp || a.regJudged.Load() < a.regCatchUp) && time.Now().Before(a.until)
}

// Floor is the stream sequence below which the stream may be trimmed
// (the newest checkpoint's).
func (a *Active) Floor() uint64 { return a.floor.Load() }

// RegionalFloor is the regional stream's sequence at or below which every
// aggregate is judged in the newest checkpoint: a new active's regional
// consumer starts after it (0: at the stream's start).
func (a *Active) RegionalFloor() uint64 { return a.regFloor.Load() }

// Epoch is the lease revision at which this replica became active.
func (a *Active) Epoch() uint64 { return a.epoch }

// DeleteEarlierConsumers deletes the consumers of stream named base or
// base-e<N> other than keep: an earlier active's (fencing: its fetches and
// acks no longer touch the stream). A failed deletion is logged.
func DeleteEarlierConsumers(ctx context.Context, s jetstream.Stream, base, keep string, log *slog.Logger) {
	for n := range s.ConsumerNames(ctx).Name() {
		if n != keep && (n == base || strings.HasPrefix(n, base+"-e")) {
			if err := s.DeleteConsumer(ctx, n); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				log.Warn("delete an earlier active's consumer", "consumer", n, "err", err)
			}
		}
	}
}

// ConsumerName is the durable consumer of an active of epoch on a
// stream whose consumer is base without high availability.
func ConsumerName(base string, epoch uint64) string { return fmt.Sprintf("%s-e%d", base, epoch) }

// Status is the replica, its epoch and the newest checkpoint pointer,
// without waiting for the caller's mutex.
func (a *Active) Status() (string, uint64, Checkpoint) {
	return a.replica, a.epoch, *a.shown.Load()
}
