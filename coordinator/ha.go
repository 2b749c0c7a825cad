package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator/metrics"
	"github.com/edgesched/edgesched/coordinator/replica"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/backoff"
	"github.com/edgesched/edgesched/policy"
)

// High availability (docs/federated.md "Highly available coordinator").
// Replicas of the coordinator share one JetStream cluster; one is active.
//
//   - The lease: key leaseKey of bucket LeaseBucket (MaxAge LeaseTTL). A
//     standby takes it with Create (it exists only while the active
//     renews it); the active renews it with Update on the revision it
//     holds. The revision at which a replica took it is its epoch.
//   - The state: the active's coordinator.db is shipped as a checkpoint
//     (an online backup) to the object store CheckpointBucket before
//     anything leaves the coordinator but update acks: before a round is
//     announced and before a model is published, and every
//     CheckpointEvery. With it goes the update stream's sequence below
//     which every update is judged in it (the consumer's ack floor before
//     the backup). The stream is never trimmed above it, so the stream is
//     the journal of what came after: a new active restores the newest
//     checkpoint and judges the stream again from there, each update once.
//   - Fencing: the checkpoint pointer (key checkpointKey of bucket
//     HABucket) and the state bucket's keys are written with compare-and-
//     set on the revision the writer last saw. A new active first writes
//     the pointer, then rewrites the state bucket's keys; from then on
//     every write of a deposed active fails (and stops it), and every
//     model it could still publish is in the checkpoint the new active
//     restored. Each active reads the stream with its own consumer
//     (coordinator-e<epoch>), so a deposed one's acks touch nothing.

// JetStream names of high availability (replicated like the rest,
// Config.Replicas).
const (
	// LeaseBucket holds the active replica's lease (key "active").
	LeaseBucket = federated.LeaseBucket
	// HABucket holds the pointer to the newest checkpoint (key
	// "checkpoint").
	HABucket = federated.HABucket
	// CheckpointBucket is the object store of checkpoints.
	CheckpointBucket = federated.CheckpointBucket

	leaseKey      = "active"
	checkpointKey = "checkpoint"
)

// Defaults of high availability.
const (
	// DefaultLeaseTTL: a standby takes over at most this long (plus its
	// poll, a quarter of it) after the active's last renewal; the active
	// renews every quarter of it.
	DefaultLeaseTTL = 5 * time.Second
	// DefaultCheckpointEvery bounds how much of the update stream a new
	// active judges again (and how long the stream keeps judged updates).
	DefaultCheckpointEvery = 30 * time.Second
	// catchUpLimit bounds how long a new active holds back closing a
	// round at its deadline while it judges again what the stream holds.
	catchUpLimit = 30 * time.Second
)

// ErrDeposed: another replica became active (or this one could not renew
// its lease in time); this one stopped. Start it again as a standby.
var ErrDeposed = errors.New("coordinator: deposed: another replica is active")

// Lease and Checkpoint are the values of the lease key and the checkpoint
// pointer (package replica).
type (
	Lease      = replica.Lease
	Checkpoint = replica.Checkpoint
)

// HAStatus is the active replica as the admin endpoint ha.status answers
// (HA false, the rest zero: a coordinator without high availability).
type HAStatus struct {
	HA         bool        `json:"ha"`
	Replica    string      `json:"replica"`
	Epoch      uint64      `json:"epoch"`
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
}

// EndpointHAStatus answers the active replica's HAStatus.
const EndpointHAStatus = "ha.status"

// haState is an active replica's (nil without high availability).
type haState struct {
	replica string
	epoch   uint64
	kv      jetstream.KeyValue    // HABucket
	obj     jetstream.ObjectStore // CheckpointBucket
	deposed func()                // stops Run

	// guarded by Coordinator.mu
	ptr     Checkpoint
	ptrRev  uint64
	ckptGen uint64            // store generation of the checkpoint
	revs    map[string]uint64 // state bucket keys' revisions last written
	last    map[string][]byte // ... and the values last tried
	cons    jetstream.Consumer
	catchUp uint64    // stream sequence to judge before closing at a deadline
	until   time.Time // ... for at most this long

	shown  atomic.Pointer[Checkpoint] // ptr as HA shows it (set with ptr)
	floor  atomic.Uint64              // the stream is trimmed below this only
	judged atomic.Uint64              // highest stream sequence judged
}

// RunReplica runs one replica of a highly available coordinator
// (cfg.HA): it waits as a standby until it holds the lease, restores the
// newest checkpoint into cfg.DataDir, bootstraps start when the registry
// is still empty, and runs as the active coordinator (Run) while it holds
// the lease. It returns nil when ctx ends and ErrDeposed when it lost the
// lease: the process should exit and be started again (as a standby).
func RunReplica(ctx context.Context, cfg Config, nc *nats.Conn, start *policy.Model) error {
	if !cfg.HA {
		return fmt.Errorf("%w: HA: RunReplica needs HA", ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	hm, err := metrics.NewReplica(cfg.Registerer)
	if err != nil {
		return err
	}
	ttl := cfg.leaseTTL()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	reps := max(cfg.Replicas, 1)
	var lease, ha jetstream.KeyValue
	var obj jetstream.ObjectStore
	// the buckets, retried while the cluster elects leaders
	for bo := backoff.New(250*time.Millisecond, 5*time.Second, cfg.Seed^0x4a11); ; {
		lease, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LeaseBucket, History: 1, TTL: ttl, Storage: jetstream.FileStorage, Replicas: reps})
		if err == nil {
			ha, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: HABucket, History: 1, Storage: jetstream.FileStorage, Replicas: reps})
		}
		if err == nil {
			obj, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: CheckpointBucket, Storage: jetstream.FileStorage, Replicas: reps})
		}
		if err == nil {
			break
		}
		log.Warn("high availability buckets", "err", err)
		if !bo.Sleep(ctx) {
			return nil
		}
	}
	// standby: take the lease once it is free
	me, _ := json.Marshal(Lease{Replica: cfg.ReplicaID, Acquired: time.Now().UTC()})
	log.Info("standby: waiting for the lease", "replica", cfg.ReplicaID, "lease_ttl", ttl)
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(time.Now().UnixNano())))
	epoch, err := replica.Acquire(ctx, lease, leaseKey, me, ttl, rng, log)
	if err != nil {
		return nil // stopped while a standby
	}
	hm.Active.Set(1)
	defer hm.Active.Set(0)
	log.Info("lease taken: this replica is active", "replica", cfg.ReplicaID, "epoch", epoch)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lost atomic.Bool
	deposed := func() { lost.Store(true); cancel() }
	renewed := make(chan struct{})
	var held atomic.Uint64 // the lease's revision as last renewed
	held.Store(epoch)
	go func() {
		defer close(renewed)
		replica.Renew(ctx, lease, leaseKey, &held, me, ttl, deposed, log)
	}()
	defer func() {
		cancel()
		<-renewed
		if !lost.Load() {
			// stopped: hand over at once rather than after the TTL
			dctx, dcancel := context.WithTimeout(context.Background(), ttl/4)
			defer dcancel()
			if err := lease.Delete(dctx, leaseKey, jetstream.LastRevision(held.Load())); err != nil {
				log.Warn("release the lease", "err", err)
			}
		}
	}()

	h := &haState{replica: cfg.ReplicaID, epoch: epoch, kv: ha, obj: obj, deposed: deposed, revs: map[string]uint64{}, last: map[string][]byte{}}
	took, err := h.fence(ctx, js)
	if err != nil {
		return h.result(ctx, &lost, err)
	}
	if took {
		hm.Takeovers.Inc()
	}
	if err := h.restore(ctx, cfg.DataDir); err != nil {
		return h.result(ctx, &lost, err)
	}
	c, err := New(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	c.ha = h
	h.ckptGen = ^uint64(0) // the first checkpoint is taken whatever the store holds
	if err := c.Bootstrap(ctx, start); err != nil {
		return err
	}
	log.Info("active: restored", "epoch", epoch, "checkpoint", h.ptr.Object, "floor", h.ptr.Floor, "takeover", took)
	return h.result(ctx, &lost, c.Run(ctx, nc))
}

// result is RunReplica's error: ErrDeposed when the lease was lost.
func (h *haState) result(ctx context.Context, lost *atomic.Bool, err error) error {
	if lost.Load() {
		return fmt.Errorf("%w (replica %s, epoch %d)", ErrDeposed, h.replica, h.epoch)
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// fence makes the new active's claim on the checkpoint pointer: every
// checkpoint a deposed active could still write is refused from now on.
// It reports whether another replica had been active.
func (h *haState) fence(ctx context.Context, js jetstream.JetStream) (bool, error) {
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		var cur Checkpoint
		var rev uint64
		e, err := h.kv.Get(ctx, checkpointKey)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return false, fmt.Errorf("read the checkpoint pointer: %w", err)
		default:
			rev = e.Revision()
			if cur, err = replica.DecodeCheckpoint(e.Value()); err != nil {
				return false, err
			}
		}
		next := cur
		next.Epoch, next.Replica, next.Taken = h.epoch, h.replica, time.Now().UTC()
		raw, _ := json.Marshal(next)
		nrev, err := h.kv.Update(ctx, checkpointKey, raw, rev)
		if replica.IsConflict(err) {
			continue // the deposed active checkpointed meanwhile: read it
		}
		if err != nil {
			return false, fmt.Errorf("claim the checkpoint pointer: %w", err)
		}
		h.ptr, h.ptrRev = next, nrev
		h.shown.Store(&next)
		h.floor.Store(next.Floor)
		h.judged.Store(next.Floor) // nothing to judge again: caught up
		// the stream's end now: judged again before a deadline closes
		if s, err := js.Stream(ctx, federated.UpdateStream); err == nil {
			h.catchUp = s.CachedInfo().State.LastSeq
		}
		h.until = time.Now().Add(catchUpLimit)
		return cur.Epoch != 0, nil
	}
}

// restore replaces dir's coordinator.db with the checkpoint (none yet:
// the local store stays).
func (h *haState) restore(ctx context.Context, dir string) error {
	if h.ptr.Object == "" {
		return nil
	}
	return replica.Restore(ctx, h.obj, h.ptr.Object, filepath.Join(dir, store.File))
}

// ours reports a checkpoint pointer this active wrote (its epoch).
func (h *haState) ours(v []byte) bool {
	p, err := replica.DecodeCheckpoint(v)
	return err == nil && p.Epoch == h.epoch
}

// checkpoint ships the store when it changed since the last checkpoint.
// Callers hold c.mu. A refused pointer update deposes the replica.
func (c *Coordinator) checkpoint(ctx context.Context) error {
	h := c.ha
	if h == nil {
		return nil
	}
	gen := c.gen.Load()
	if gen == h.ckptGen {
		return nil
	}
	floor := h.ptr.Floor
	if h.cons != nil {
		// before the backup: every update acked is judged in it
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		info, err := h.cons.Info(ictx)
		cancel()
		if err != nil {
			return fmt.Errorf("checkpoint: update consumer: %w", err)
		}
		floor = max(floor, info.AckFloor.Stream)
	}
	var buf bytes.Buffer
	if _, err := c.BackupTo(&buf); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	name := fmt.Sprintf("e%d-g%d.db", h.epoch, gen)
	if _, err := h.obj.PutBytes(ctx, name, buf.Bytes()); err != nil {
		return fmt.Errorf("checkpoint %s: %w", name, err)
	}
	next := Checkpoint{Epoch: h.epoch, Replica: h.replica, Object: name, Floor: floor, Bytes: int64(buf.Len()), Taken: c.clock.Now().UTC()}
	raw, _ := json.Marshal(next)
	rev, err := replica.CASPut(ctx, h.kv, checkpointKey, raw, h.ptrRev, h.ours)
	if replica.IsConflict(err) {
		h.deposed()
		_ = h.obj.Delete(context.WithoutCancel(ctx), name)
		return fmt.Errorf("%w: checkpoint refused (epoch %d)", ErrDeposed, h.epoch)
	}
	if err != nil {
		return fmt.Errorf("checkpoint pointer: %w", err)
	}
	old := h.ptr.Object
	h.ptr, h.ptrRev, h.ckptGen = next, rev, gen
	h.shown.Store(&next)
	h.floor.Store(floor)
	c.metrics.Checkpoints.Inc()
	c.metrics.CheckpointBytes.Set(float64(buf.Len()))
	if old != "" && old != name {
		if err := h.obj.Delete(ctx, old); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			c.limited.Warn("checkpoint", "remove the previous checkpoint", "object", old, "err", err)
		}
	}
	return nil
}

// putState writes key of the state bucket: with high availability by
// compare-and-set on the revision this active last wrote (the first
// write of an active reads it: a deposed active's write in between is
// read and overwritten, after which every one of its writes is refused).
// Callers hold c.mu.
func (c *Coordinator) putState(ctx context.Context, key string, raw []byte) error {
	h := c.ha
	if h == nil {
		_, err := c.bus.kv.Put(ctx, key, raw)
		return err
	}
	if err := c.checkpoint(ctx); err != nil {
		return err
	}
	rev, known := h.revs[key]
	for range 10 {
		if !known {
			e, err := c.bus.kv.Get(ctx, key)
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
		prev := h.last[key]
		ours := func(v []byte) bool { return known && bytes.Equal(v, prev) }
		nrev, err := replica.CASPut(ctx, c.bus.kv, key, raw, rev, ours)
		h.last[key] = raw
		if err == nil {
			h.revs[key] = nrev
			return nil
		}
		if !replica.IsConflict(err) {
			return err
		}
		if known {
			// written by another since this active's last write
			h.deposed()
			return fmt.Errorf("%w: %s written by another replica (epoch %d)", ErrDeposed, key, h.epoch)
		}
	}
	return fmt.Errorf("write %s: compare-and-set refused 10 times", key)
}

// fenceState rewrites the state bucket's keys as they are, so that a
// deposed active's next write of either is refused.
func (c *Coordinator) fenceState(ctx context.Context) error {
	if c.ha == nil {
		return nil
	}
	for _, key := range []string{federated.KeyRound, federated.KeyModel} {
		if _, known := c.ha.revs[key]; known {
			continue
		}
		e, err := c.bus.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // nothing a deposed active wrote: the first put creates it
		}
		if err != nil {
			return fmt.Errorf("fence %s: %w", key, err)
		}
		if err := c.putState(ctx, key, e.Value()); err != nil {
			return fmt.Errorf("fence %s: %w", key, err)
		}
	}
	return nil
}

// haConsumer is an active's consumer of the update stream: its own
// (coordinator-e<epoch>), starting after the checkpoint's floor; the
// consumers of earlier actives are deleted.
func (c *Coordinator) haConsumer(ctx context.Context, b *bus) (jetstream.Consumer, error) {
	h := c.ha
	name := fmt.Sprintf("%s-e%d", consumerName, h.epoch)
	s, err := b.js.Stream(ctx, federated.UpdateStream)
	if err != nil {
		return nil, fmt.Errorf("update stream: %w", err)
	}
	for n := range s.ConsumerNames(ctx).Name() {
		if n != name && (n == consumerName || strings.HasPrefix(n, consumerName+"-e")) {
			if err := s.DeleteConsumer(ctx, n); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				c.limited.Warn("consumer", "delete an earlier active's consumer", "consumer", n, "err", err)
			}
		}
	}
	cfg := consumerConfig(jetstream.DeliverAllPolicy, 0)
	if f := h.floor.Load(); f > 0 {
		cfg = consumerConfig(jetstream.DeliverByStartSequencePolicy, f+1)
	}
	cfg.Durable = name
	cons, err := b.js.CreateOrUpdateConsumer(ctx, federated.UpdateStream, cfg)
	if err != nil {
		return nil, fmt.Errorf("create update consumer %s: %w", name, err)
	}
	h.cons = cons
	return cons, nil
}

// catchingUp reports whether a new active still judges again what the
// stream held when it took over (a deadline then waits: an update the
// deposed active accepted is not refused as late).
func (h *haState) catchingUp() bool {
	return h != nil && h.judged.Load() < h.catchUp && time.Now().Before(h.until)
}

// HA answers the admin endpoint ha.status.
// It does not wait for the state mutex (a checkpoint or an aggregation
// may hold it for seconds).
func (c *Coordinator) HA() HAStatus {
	if c.ha == nil {
		return HAStatus{}
	}
	ptr := *c.ha.shown.Load()
	return HAStatus{HA: true, Replica: c.ha.replica, Epoch: c.ha.epoch, Checkpoint: &ptr}
}
