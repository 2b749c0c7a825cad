package replica

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
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
	JS    jetstream.JetStream   // the context they were opened with (the state bucket's fenced writes use it)
	Lease jetstream.KeyValue    // federated.LeaseBucket (entries expire after TTL)
	HA    jetstream.KeyValue    // federated.HABucket: the checkpoint pointer
	Obj   jetstream.ObjectStore // federated.CheckpointBucket
	// TTL is the lease bucket's: every replica times its lease with the
	// bucket's TTL, whatever its own --lease-ttl (OpenBuckets).
	TTL time.Duration
}

// OpenBuckets creates (or updates) the buckets with replicas replicas,
// retried with capped, jittered backoff while the cluster elects
// leaders; it fails only when ctx ends (its error). The lease bucket's
// TTL is ttl only when this replica creates the bucket: one that exists
// keeps its TTL (Buckets.TTL; a replica whose ttl differs says so in a
// warning), because an active times its renewals and its step-down by
// the TTL it started with, and a replica that shortened it would expire
// the active's lease before it steps down. To change it, stop every
// replica and edit the bucket (docs/federated.md).
func OpenBuckets(ctx context.Context, js jetstream.JetStream, ttl time.Duration, replicas int, seed uint64, log *slog.Logger) (*Buckets, error) {
	b := Buckets{JS: js}
	var err error
	for bo := backoff.New(250*time.Millisecond, 5*time.Second, seed^0x4a11); ; {
		b.Lease, b.TTL, err = openLease(ctx, js, ttl, replicas, log)
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

// openLease opens the lease bucket, creating it with ttl when there is
// none, and returns it with its TTL.
func openLease(ctx context.Context, js jetstream.JetStream, ttl time.Duration, replicas int, log *slog.Logger) (jetstream.KeyValue, time.Duration, error) {
	cfg := jetstream.KeyValueConfig{Bucket: federated.LeaseBucket, History: 1, TTL: ttl, Storage: jetstream.FileStorage, Replicas: replicas}
	kv, err := js.KeyValue(ctx, federated.LeaseBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		// (another replica creating it at the same time with another
		// TTL: refused, and the next try adopts its TTL)
		kv, err = js.CreateKeyValue(ctx, cfg)
		return kv, ttl, err
	}
	if err != nil {
		return nil, 0, err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("lease bucket: %w", err)
	}
	if cur := st.TTL(); cur > 0 && cur != ttl {
		log.Warn("the lease bucket's TTL differs from this replica's lease TTL: using the bucket's", "bucket_ttl", cur, "lease_ttl", ttl)
		cfg.TTL = cur
	}
	kv, err = js.CreateOrUpdateKeyValue(ctx, cfg) // (the replica count)
	return kv, cfg.TTL, err
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
// goroutine until Release (Renew: since is when the Create that took it
// was sent, clk the clock, nil for SystemClock). The context it returns
// ends with ctx, with Release, or when the lease is lost (Deposed).
func Hold(ctx context.Context, kv jetstream.KeyValue, val []byte, ttl time.Duration, epoch uint64, since time.Time, clk Clock, log *slog.Logger) (context.Context, *Held) {
	ctx, cancel := context.WithCancel(ctx)
	h := &Held{kv: kv, ttl: ttl, log: log, cancel: cancel, done: make(chan struct{})}
	h.held.Store(epoch)
	go func() {
		defer close(h.done)
		Renew(ctx, kv, LeaseKey, &h.held, val, ttl, since, clk, h.Deposed, log)
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
	js      jetstream.JetStream
	lease   jetstream.KeyValue    // LeaseBucket
	kv      jetstream.KeyValue    // HABucket
	obj     jetstream.ObjectStore // CheckpointBucket
	deposed func()
	log     *slog.Logger

	// serialised by the caller
	ptr     Checkpoint
	ptrRev  uint64
	ckptGen uint64            // store generation of the checkpoint
	unsure  []string          // checkpoint objects whose pointer update's answer was lost
	revs    map[string]uint64 // state bucket keys' revisions last written
	catchUp uint64            // stream sequence to judge before closing at a deadline
	until   time.Time         // ... for at most this long
	swept   Sweep             // what the sweeps did since TakeSweep

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
	a := &Active{replica: replica, epoch: epoch, js: b.JS, lease: b.Lease, kv: b.HA, obj: b.Obj, deposed: deposed, log: log,
		revs: map[string]uint64{}}
	a.ckptGen = ^uint64(0) // the first checkpoint is taken whatever the store holds
	a.shown.Store(&Checkpoint{})
	return a
}

// Fence makes the new active's claim on the checkpoint pointer: every
// checkpoint a deposed active could still write is refused from now on.
// It reports whether another replica had been active. With regional,
// the root consumes the regional stream too (its catch-up waits for it).
// A pointer a later epoch already claimed (this replica was paused
// between taking the lease and its claim) is not taken: ErrDeposed.
func (a *Active) Fence(ctx context.Context, js jetstream.JetStream, regional bool) (bool, error) {
	took := false
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		// (from the leader: a KV get is a direct get, and a follower
		// behind it showed an earlier pointer, whose revision every claim
		// was refused on, as fast as it was asked, until it caught up; a
		// pointer deleted by hand is claimed on its delete marker's
		// revision, where a KV get's not found made it revision 0, refused
		// for ever)
		cur, rev, found, err := a.pointer(ctx)
		switch {
		case errors.Is(err, ErrCheckpoint):
			return false, err
		case err != nil:
			return false, fmt.Errorf("read the checkpoint pointer: %w", err)
		case !found && rev > 0:
			// written once and since deleted (by hand: nothing here
			// deletes it): this active restores no checkpoint and the
			// federation starts again from its first model, which an
			// operator must know
			a.log.Warn("the checkpoint pointer was deleted: no checkpoint is restored, this active starts from the store it has", "key", CheckpointKey, "marker_revision", rev)
		}
		later, err := a.later(ctx, cur.Epoch)
		if err != nil {
			return false, err
		}
		if later {
			a.deposed()
			return false, fmt.Errorf("%w: the checkpoint pointer is epoch %d's, later than this epoch %d", ErrDeposed, cur.Epoch, a.epoch)
		}
		if cur.Epoch != 0 && cur.Epoch != a.epoch {
			took = true // (a claim of ours whose answer was lost is not another's)
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
		a.catchUp = a.streamEnd(ctx, js, federated.UpdateStream)
		if regional {
			a.regCatchUp = a.streamEnd(ctx, js, federated.RegionalStream)
		}
		a.until = time.Now().Add(CatchUpLimit)
		return took, nil
	}
}

// streamEnd is the last sequence of stream (0: there is none), what a
// new active judges again before a deadline closes a round. One it
// cannot read (a takeover after the server leading the stream was lost:
// the lookup times out while the stream elects a leader) is taken for
// more than will be judged: the deadline is held for all of CatchUpLimit
// (with 0 it was not held at all, and an update the deposed active had
// accepted in time could be refused as late).
func (a *Active) streamEnd(ctx context.Context, js jetstream.JetStream, stream string) uint64 {
	s, err := js.Stream(ctx, stream)
	switch {
	case err == nil:
		return s.CachedInfo().State.LastSeq
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return 0
	}
	a.log.Warn("read where a stream ends: rounds wait the whole catch-up limit before closing at a deadline", "stream", stream, "limit", CatchUpLimit, "err", err)
	return math.MaxUint64
}

// later reports whether epoch e is a later active's than this one's: it
// is above this epoch and a revision the lease bucket has reached. (A
// lease bucket deleted and created again starts its revisions, and so
// the epochs, over: an epoch from before that, above every revision the
// bucket has, is no later active's, and refusing it would keep every
// replica from becoming active.)
func (a *Active) later(ctx context.Context, e uint64) (bool, error) {
	if e <= a.epoch {
		return false, nil
	}
	if a.lease == nil {
		return true, nil
	}
	st, err := a.lease.Status(ctx)
	if err != nil {
		return false, fmt.Errorf("lease bucket: %w", err)
	}
	if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok && bs.StreamInfo() != nil {
		return e <= bs.StreamInfo().State.LastSeq, nil
	}
	return true, nil
}

// RestoreTo replaces path with the checkpoint Fence found (none yet: the
// file stays).
func (a *Active) RestoreTo(ctx context.Context, path string) error {
	if a.ptr.Object == "" {
		return nil
	}
	return Restore(ctx, a.obj, a.ptr, path)
}

// Due reports whether the store at generation gen is not checkpointed.
func (a *Active) Due(gen uint64) bool { return gen != a.ckptGen }

// Ship stores data, the store at generation gen in which every message
// at or below the floors f of the streams is judged, as the newest
// checkpoint and points the pointer at it. A floor never goes down (a
// consumer not yet created, or new, reports less: the previous
// checkpoint's stands). A refused pointer update deposes the replica
// (ErrDeposed).
//
// Each attempt stores its own object (e<epoch>-g<gen>-<nonce>.db): an
// attempt whose pointer update was applied though its answer was lost
// may be the checkpoint a new active claimed and restores, so a later
// attempt never reuses its name, and no object the pointer names (read
// just before) is ever removed. Such an object is removed once a later
// checkpoint of this active is in the pointer, or, when this active is
// refused, unless the pointer names it. (The pointer names an object only
// as long as no active checkpointed since: once it names another, no
// claim can copy the earlier one again, as a claim is a compare-and-set
// on the pointer's revision.) Once the pointer names the new checkpoint,
// the objects earlier attempts left behind (an active that crashed
// between its object and its pointer update) are swept: at most
// SweepLimit of them, the oldest first (sweep, TakeSweep).
func (a *Active) Ship(ctx context.Context, gen uint64, data []byte, f Floors, now time.Time) error {
	floor := max(f.Update, a.ptr.Floor)
	regFloor := max(f.Regional, a.ptr.Regional)
	name := objectName(a.epoch, gen, rand.Uint64())
	info, err := a.obj.PutBytes(ctx, name, data)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", name, err)
	}
	next := Checkpoint{Epoch: a.epoch, Replica: a.replica, Object: name, Floor: floor, Regional: regFloor,
		Bytes: int64(len(data)), Digest: info.Digest, Taken: now.UTC()}
	raw, _ := json.Marshal(next)
	rev := a.ptrRev
	for try := 0; ; try++ {
		nrev, err := a.kv.Update(ctx, CheckpointKey, raw, rev)
		if err == nil {
			rev = nrev
			break
		}
		if IsConflict(err) && try < 10 {
			cur, crev, found, perr := a.pointer(ctx)
			if perr == nil && !found {
				perr = jetstream.ErrKeyNotFound
			}
			if err = perr; err == nil || errors.Is(err, ErrCheckpoint) {
				if err != nil || cur.Epoch != a.epoch {
					// another active claimed it: this active's objects
					// are garbage, but for the one the claim copied
					a.deposed()
					for _, o := range append(a.unsure, name, a.ptr.Object) {
						if o != "" {
							a.drop(context.WithoutCancel(ctx), o)
						}
					}
					a.unsure = nil
					return fmt.Errorf("%w: checkpoint refused (epoch %d, the pointer's %d)", ErrDeposed, a.epoch, cur.Epoch)
				}
				// a pointer update of ours whose answer was lost: update
				// what it wrote (its object is in unsure)
				rev = crev
				continue
			}
		}
		// the pointer may name it (an update applied, its answer lost)
		a.unsure = append(a.unsure, name)
		return fmt.Errorf("checkpoint pointer: %w", err)
	}
	old, unsure := a.ptr.Object, a.unsure
	a.ptr, a.ptrRev, a.ckptGen, a.unsure = next, rev, gen, nil
	a.shown.Store(&next)
	a.floor.Store(floor)
	a.regFloor.Store(regFloor)
	for _, o := range append(unsure, old) {
		if o != "" && o != name {
			a.drop(ctx, o)
		}
	}
	a.sweep(ctx, name, gen)
	return nil
}

// drop removes the checkpoint object name unless the pointer names it
// now (or cannot be read: then it stays).
func (a *Active) drop(ctx context.Context, name string) {
	p, _, found, err := a.pointer(ctx)
	switch {
	case err != nil:
		a.log.Warn("keep a checkpoint: the pointer cannot be read", "object", name, "err", err)
		return
	case found && p.Object == name:
		return
	}
	if err := a.obj.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		a.log.Warn("remove a checkpoint", "object", name, "err", err)
	}
}

// pointer reads the checkpoint pointer and its revision from the HA
// bucket's leader (leaderLastMsg: a follower behind it could show a
// pointer from before a new active's claim, and drop would then remove
// the object the claim restores); found is false when there is none.
func (a *Active) pointer(ctx context.Context) (p Checkpoint, rev uint64, found bool, err error) {
	m, err := leaderLastMsg(ctx, a.js, "KV_"+federated.HABucket, "$KV."+federated.HABucket+"."+CheckpointKey)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return p, 0, false, nil
	case err != nil:
		return p, 0, false, err
	case m.Header.Get(kvOperation) != "" || m.Header.Get(jetstream.MarkerReasonHeader) != "":
		return p, m.Sequence, false, nil
	}
	p, err = DecodeCheckpoint(m.Data)
	return p, m.Sequence, err == nil, err
}

// Written reports whether this active wrote key of the state bucket.
func (a *Active) Written(key string) bool {
	_, ok := a.revs[key]
	return ok
}

// EpochHeader is the message header in which an active writes its epoch
// with every value of the state bucket (the value, which sites and
// regional aggregators read, is unchanged; a KV read does not show the
// header).
const EpochHeader = "Edgesched-Epoch"

// PutState writes key of the state bucket kv by compare-and-set, with
// this active's epoch (EpochHeader). The key's last write decides: a
// later epoch's (a new active's, or its fence) is refused and deposes
// this active (ErrDeposed), whether or not this active wrote the key
// before; so is anyone else's write after this active's last one; a
// write of this epoch is this active's own (one whose answer was lost is
// recognised); an earlier epoch's (or one without an epoch: a
// coordinator without high availability, or an earlier version) is
// overwritten by this active's first write of the key.
func (a *Active) PutState(ctx context.Context, kv jetstream.KeyValue, key string, raw []byte) error {
	return a.writeState(ctx, kv.Bucket(), key, raw, false)
}

// FenceState makes this active's claim on keys of the state bucket kv
// (those it has not written yet): each is written again as it is, the
// same value (or, where there is none, a delete marker, which readers
// take for no value) with this active's epoch. From then on every write
// of an earlier active is refused (PutState), whether it wrote the key
// before or not.
func (a *Active) FenceState(ctx context.Context, kv jetstream.KeyValue, keys ...string) error {
	for _, key := range keys {
		if a.Written(key) {
			continue
		}
		if err := a.writeState(ctx, kv.Bucket(), key, nil, true); err != nil {
			return fmt.Errorf("fence %s: %w", key, err)
		}
	}
	return nil
}

// stateEntry is the last message of a state bucket key.
type stateEntry struct {
	rev   uint64 // 0: none
	epoch uint64 // its writer's (0: none said)
	put   bool   // a value (not a delete or purge marker)
	value []byte
}

// readState reads key's last message of bucket, headers included, from
// the stream's leader (leaderLastMsg).
func (a *Active) readState(ctx context.Context, bucket, key string) (stateEntry, error) {
	m, err := leaderLastMsg(ctx, a.js, "KV_"+bucket, "$KV."+bucket+"."+key)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return stateEntry{}, nil
	}
	if err != nil {
		return stateEntry{}, err
	}
	e := stateEntry{rev: m.Sequence, put: m.Header.Get(kvOperation) == "" && m.Header.Get(jetstream.MarkerReasonHeader) == ""}
	e.epoch, _ = strconv.ParseUint(m.Header.Get(EpochHeader), 10, 64)
	if e.put {
		e.value = m.Data
	}
	return e, nil
}

// leaderLastMsg reads subject's last message of stream through the
// stream's leader (the STREAM.MSG.GET API). jetstream.Stream's
// GetLastMsgForSubject makes a direct get on a stream that allows them,
// as KV buckets do, and any replica answers a direct get, a follower
// possibly behind the leader: a write of this active's just acked could
// look overwritten by another replica, and the active depose itself.
func leaderLastMsg(ctx context.Context, js jetstream.JetStream, stream, subject string) (*jetstream.RawStreamMsg, error) {
	o := js.Options()
	prefix := jetstream.DefaultAPIPrefix
	switch {
	case o.Domain != "":
		prefix = "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		prefix = strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	if _, ok := ctx.Deadline(); !ok {
		timeout := o.DefaultTimeout
		if timeout <= 0 {
			timeout = 5 * time.Second
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := json.Marshal(struct {
		LastBySubj string `json:"last_by_subj"`
	}{subject})
	if err != nil {
		return nil, err
	}
	msg, err := js.Conn().RequestWithContext(ctx, prefix+"STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, fmt.Errorf("get the last message of %s: %w", subject, err)
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Subject  string    `json:"subject"`
			Sequence uint64    `json:"seq"`
			Header   []byte    `json:"hdrs"`
			Data     []byte    `json:"data"`
			Time     time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, fmt.Errorf("get the last message of %s: %w", subject, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, jetstream.ErrMsgNotFound
	case resp.Error != nil:
		return nil, fmt.Errorf("get the last message of %s: %w", subject, resp.Error)
	case resp.Message == nil:
		return nil, fmt.Errorf("get the last message of %s: %w", subject, jetstream.ErrInvalidJetStreamResponse)
	}
	out := &jetstream.RawStreamMsg{Subject: resp.Message.Subject, Sequence: resp.Message.Sequence, Data: resp.Message.Data, Time: resp.Message.Time, Header: nats.Header{}}
	if len(resp.Message.Header) > 0 {
		if out.Header, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return nil, fmt.Errorf("get the last message of %s: headers: %w", subject, err)
		}
	}
	return out, nil
}

// kvOperation is the header of a KV delete or purge marker.
const kvOperation = "KV-Operation"

// writeState writes raw to key of bucket (fence: what is there again,
// PutState and FenceState).
func (a *Active) writeState(ctx context.Context, bucket, key string, raw []byte, fence bool) error {
	for range 10 {
		cur, err := a.readState(ctx, bucket, key)
		if err != nil {
			return fmt.Errorf("read %s: %w", key, err)
		}
		rev, known := a.revs[key]
		later, err := a.later(ctx, cur.epoch)
		switch {
		case err != nil:
			return err
		case later:
			a.deposed()
			return fmt.Errorf("%w: %s written by epoch %d, later than this epoch %d", ErrDeposed, key, cur.epoch, a.epoch)
		case known && cur.rev != rev && cur.epoch != a.epoch:
			a.deposed()
			return fmt.Errorf("%w: %s written by another replica (epoch %d) after this epoch %d's last write", ErrDeposed, key, cur.epoch, a.epoch)
		case cur.epoch == a.epoch && cur.rev != 0 && (fence || (cur.rev != rev && cur.put && bytes.Equal(cur.value, raw))):
			// a write of ours whose answer was lost: it is there
			a.revs[key] = cur.rev
			return nil
		}
		m := &nats.Msg{Subject: "$KV." + bucket + "." + key, Header: nats.Header{}, Data: raw}
		m.Header.Set(EpochHeader, strconv.FormatUint(a.epoch, 10))
		if fence {
			m.Data = cur.value
			if !cur.put {
				m.Header.Set(kvOperation, "DEL")
			}
		}
		ack, err := a.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(cur.rev))
		if err == nil {
			a.revs[key] = ack.Sequence
			return nil
		}
		var api *jetstream.APIError
		if !errors.As(err, &api) || (api.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence && api.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return fmt.Errorf("write %s: %w", key, err)
		}
		// written meanwhile: read it again
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

// DeleteEarlierConsumers deletes the consumers of stream s named base (a
// coordinator's without high availability) or base-e<N> with N below
// epoch: an earlier active's (fencing: its fetches and acks no longer
// touch the stream). A later epoch's consumer is a later active's: it is
// left (this active is deposed and learns it at its next fenced write;
// deleting it would stop the later active's ingest). A failed deletion
// is logged.
func DeleteEarlierConsumers(ctx context.Context, s jetstream.Stream, base string, epoch uint64, log *slog.Logger) {
	for n := range s.ConsumerNames(ctx).Name() {
		e, ok := consumerEpoch(base, n)
		if n != base && (!ok || e >= epoch) {
			continue
		}
		if err := s.DeleteConsumer(ctx, n); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			log.Warn("delete an earlier active's consumer", "consumer", n, "err", err)
		}
	}
}

// consumerEpoch is the epoch of a consumer named base-e<epoch>.
func consumerEpoch(base, name string) (uint64, bool) {
	rest, ok := strings.CutPrefix(name, base+"-e")
	if !ok {
		return 0, false
	}
	e, err := strconv.ParseUint(rest, 10, 64)
	return e, err == nil
}

// ConsumerName is the durable consumer of an active of epoch on a
// stream whose consumer is base without high availability.
func ConsumerName(base string, epoch uint64) string { return fmt.Sprintf("%s-e%d", base, epoch) }

// Status is the replica, its epoch and the newest checkpoint pointer,
// without waiting for the caller's mutex.
func (a *Active) Status() (string, uint64, Checkpoint) {
	return a.replica, a.epoch, *a.shown.Load()
}
