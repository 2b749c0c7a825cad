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
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator/bus"
	"github.com/edgesched/edgesched/coordinator/metrics"
	"github.com/edgesched/edgesched/coordinator/replica"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/policy/nn"
)

// High availability (docs/federated.md "Highly available coordinator").
// Replicas of the coordinator share one JetStream cluster; one is active.
//
//   - The lease: key replica.LeaseKey of bucket LeaseBucket (MaxAge LeaseTTL). A
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
//   - Fencing: the checkpoint pointer (key replica.CheckpointKey of bucket
//     HABucket) and the state bucket's keys are written with compare-and-
//     set on the revision the writer last saw, the state keys with the
//     writer's epoch in a header (replica.EpochHeader). A new active first
//     writes the pointer (refused when a later epoch holds it), then
//     rewrites the state bucket's keys with its epoch; from then on every
//     write of a deposed active fails (and stops it), and every model it
//     could still publish is in the checkpoint the new active restored.
//     Each active reads the stream with its own consumer
//     (coordinator-e<epoch>), so a deposed one's acks touch nothing; it
//     deletes the earlier epochs' only, and an active whose consumer is
//     deleted (by a later one) stops, deposed.

// JetStream names of high availability (replicated like the rest,
// Config.Replicas).
const (
	// LeaseBucket holds the active replica's lease (key replica.LeaseKey).
	LeaseBucket = federated.LeaseBucket
	// HABucket holds the pointer to the newest checkpoint (key
	// "checkpoint").
	HABucket = federated.HABucket
	// CheckpointBucket is the object store of checkpoints.
	CheckpointBucket = federated.CheckpointBucket
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
)

// ErrDeposed: another replica became active (or this one could not renew
// its lease in time); this one stopped. Start it again as a standby.
var ErrDeposed = replica.ErrDeposed

// Lease and Checkpoint are the values of the lease key and the checkpoint
// pointer (package replica).
type (
	Lease      = replica.Lease
	Checkpoint = replica.Checkpoint
)

// RunReplica runs one replica of a highly available coordinator
// (cfg.HA): it waits as a standby until it holds the lease, restores the
// newest checkpoint into cfg.DataDir, bootstraps start when the registry
// is still empty, and runs as the active coordinator (Run) while it holds
// the lease. It returns nil when ctx ends and ErrDeposed when it lost the
// lease: the process should exit and be started again (as a standby).
func RunReplica(ctx context.Context, cfg Config, nc *nats.Conn, start *nn.Model) error {
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
	b, err := replica.OpenBuckets(ctx, js, ttl, max(cfg.Replicas, 1), cfg.Seed, log)
	if err != nil {
		return nil // stopped
	}
	// the lease bucket's TTL: the first replica's --lease-ttl (the lease
	// is timed by the system clock, never cfg.Clock)
	ttl = b.TTL
	// standby: take the lease once it is free
	me, _ := json.Marshal(Lease{Replica: cfg.ReplicaID, Acquired: time.Now().UTC()})
	log.Info("standby: waiting for the lease", "replica", cfg.ReplicaID, "lease_ttl", ttl)
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(time.Now().UnixNano())))
	epoch, since, err := replica.Acquire(ctx, b.Lease, replica.LeaseKey, me, ttl, rng, nil, log)
	if err != nil {
		return nil // stopped while a standby
	}
	hm.Active.Set(1)
	defer hm.Active.Set(0)
	log.Info("lease taken: this replica is active", "replica", cfg.ReplicaID, "epoch", epoch)

	ctx, held := replica.Hold(ctx, b.Lease, me, ttl, epoch, since, nil, log)
	defer held.Release()
	h := replica.NewActive(cfg.ReplicaID, epoch, b, held.Deposed, log)
	result := func(err error) error {
		switch {
		case held.Lost():
			return fmt.Errorf("%w (replica %s, epoch %d)", ErrDeposed, cfg.ReplicaID, epoch)
		case errors.Is(err, bus.ErrConsumerGone):
			// only a later active deletes this epoch's consumer
			// (replica.DeleteEarlierConsumers): stop rather than fetch
			// from nothing for ever while holding the lease (which
			// Release gives up, if it is still this replica's)
			return fmt.Errorf("%w (replica %s, epoch %d): %w", ErrDeposed, cfg.ReplicaID, epoch, err)
		case ctx.Err() != nil:
			return nil
		}
		return err
	}
	took, err := h.Fence(ctx, js, cfg.Regions != nil)
	if err != nil {
		return result(err)
	}
	if took {
		hm.Takeovers.Inc()
	}
	if err := h.RestoreTo(ctx, filepath.Join(cfg.DataDir, store.File)); err != nil {
		return result(err)
	}
	c, err := New(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	c.ha = h
	if err := c.Bootstrap(ctx, start); err != nil {
		return result(err) // (deposed meanwhile: ErrDeposed, not the cancellation)
	}
	_, _, ptr := h.Status()
	log.Info("active: restored", "epoch", epoch, "checkpoint", ptr.Object, "floor", ptr.Floor, "takeover", took)
	return result(c.Run(ctx, nc))
}

// checkpoint ships the store when it changed since the last checkpoint.
// Callers hold c.mu. A refused pointer update deposes the replica.
func (c *Coordinator) checkpoint(ctx context.Context) error {
	h := c.ha
	if h == nil {
		return nil
	}
	gen := c.gen.Load()
	if !h.Due(gen) {
		return nil
	}
	// before the backup: every update and regional aggregate acked is
	// judged in it (its verdict committed before its ack)
	var floors replica.Floors
	for _, f := range []struct {
		cons jetstream.Consumer
		at   *uint64
		what string
	}{{c.haCons, &floors.Update, "update"}, {c.regCons, &floors.Regional, "regional"}} {
		if f.cons == nil {
			continue // not yet created: the previous checkpoint's floor stands
		}
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		info, err := f.cons.Info(ictx)
		cancel()
		if err != nil {
			return fmt.Errorf("checkpoint: %s consumer: %w", f.what, err)
		}
		*f.at = info.AckFloor.Stream
	}
	var buf bytes.Buffer
	if _, err := c.BackupTo(&buf); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := h.Ship(ctx, gen, buf.Bytes(), floors, c.clock.Now()); err != nil {
		return err
	}
	c.metrics.Checkpoints.Inc()
	c.metrics.CheckpointBytes.Set(float64(buf.Len()))
	swept := h.TakeSweep()
	c.metrics.CheckpointsSwept.Add(float64(swept.Removed))
	c.metrics.CheckpointSweepErrors.Add(float64(swept.Failed))
	return nil
}

// putState writes key of the state bucket: with high availability after
// a checkpoint, by compare-and-set (replica.Active.PutState). Callers
// hold c.mu.
func (c *Coordinator) putState(ctx context.Context, key string, raw []byte) error {
	if c.ha == nil {
		_, err := c.bus.KV.Put(ctx, key, raw)
		return err
	}
	if err := c.checkpoint(ctx); err != nil {
		return err
	}
	return c.ha.PutState(ctx, c.bus.KV, key, raw)
}

// fenceState checkpoints the store restored and makes this active's
// claim on the state bucket's keys (replica.Active.FenceState): a
// deposed active's next write of either is refused. Callers hold c.mu.
func (c *Coordinator) fenceState(ctx context.Context) error {
	if c.ha == nil {
		return nil
	}
	if err := c.checkpoint(ctx); err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	return c.ha.FenceState(ctx, c.bus.KV, federated.KeyRound, federated.KeyModel)
}

// HA answers the admin endpoint ha.status.
// It does not wait for the state mutex (a checkpoint or an aggregation
// may hold it for seconds).
func (c *Coordinator) HA() HAStatus {
	if c.ha == nil {
		return HAStatus{}
	}
	id, epoch, ptr := c.ha.Status()
	return HAStatus{HA: true, Replica: id, Epoch: epoch, Checkpoint: &ptr}
}
