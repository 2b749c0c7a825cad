package replica

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Lease is the value of the lease key.
type Lease struct {
	Replica  string    `json:"replica"`
	Acquired time.Time `json:"acquired"`
}

// Checkpoint is the value of the checkpoint pointer.
type Checkpoint struct {
	// Epoch and Replica of the active that wrote it.
	Epoch   uint64 `json:"epoch"`
	Replica string `json:"replica"`
	// Object in CheckpointBucket ("" after a takeover with no checkpoint
	// yet: the new active's local store is used as is).
	Object string `json:"object,omitempty"`
	// Floor: every update at or below this stream sequence is judged in
	// the checkpoint.
	Floor uint64 `json:"floor"`
	// Regional: every regional aggregate at or below this sequence of the
	// regional stream (federated.RegionalStream) is judged in the
	// checkpoint. Absent (0) in a pointer of a root without regions or of
	// a version before it was recorded: a new active reads the regional
	// stream from its start, and each aggregate the checkpoint already
	// judged gets its kept verdict again (counted nothing).
	Regional uint64 `json:"regional,omitempty"`
	// Bytes is the object's size and Digest its digest as the object
	// store gave it ("SHA-256=..."; absent in a pointer of a version
	// before it was recorded): a restore checks both.
	Bytes  int64     `json:"bytes,omitempty"`
	Digest string    `json:"digest,omitempty"`
	Taken  time.Time `json:"taken"`
}

// ErrCheckpoint wraps a checkpoint pointer that cannot be decoded.
var ErrCheckpoint = errors.New("replica: bad checkpoint pointer")

// maxPointerBytes bounds a checkpoint pointer (a few hundred bytes).
const maxPointerBytes = 4 << 10

// DecodeCheckpoint decodes a checkpoint pointer strictly: one JSON
// object of known fields, at most maxPointerBytes, an epoch, and an
// object name only with a floor-consistent size.
func DecodeCheckpoint(raw []byte) (Checkpoint, error) {
	var p Checkpoint
	if len(raw) > maxPointerBytes {
		return p, fmt.Errorf("%w: %d bytes, at most %d", ErrCheckpoint, len(raw), maxPointerBytes)
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil {
		return Checkpoint{}, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	if d.More() {
		return Checkpoint{}, fmt.Errorf("%w: trailing data", ErrCheckpoint)
	}
	switch {
	case p.Epoch == 0:
		return Checkpoint{}, fmt.Errorf("%w: no epoch", ErrCheckpoint)
	case p.Bytes < 0 || (p.Object == "" && p.Bytes != 0):
		return Checkpoint{}, fmt.Errorf("%w: object %q of %d bytes", ErrCheckpoint, p.Object, p.Bytes)
	case p.Object == "" && p.Digest != "":
		return Checkpoint{}, fmt.Errorf("%w: digest without an object", ErrCheckpoint)
	}
	return p, nil
}

// IsConflict reports a compare-and-set refused by the server.
func IsConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// CASPut writes key by compare-and-set on rev and returns the new
// revision. A write of ours that the server applied though its answer
// was lost (a timeout under load) leaves rev stale: a conflict with a
// value ours says (an earlier write of this replica) writes raw again by
// compare-and-set on that value's revision; any other conflict is
// returned (IsConflict). The value read is never adopted without that
// write: a KV get is a direct get, which a follower behind the stream's
// leader may answer with an earlier write of ours after another
// replica's (the lease's value is the same at every renewal), and only
// the leader's compare-and-set tells (a refused one reads again, at most
// casReads times in all: the next read may come from a replica that is
// up to date).
func CASPut(ctx context.Context, kv jetstream.KeyValue, key string, raw []byte, rev uint64, ours func([]byte) bool) (uint64, error) {
	nrev, err := kv.Update(ctx, key, raw, rev)
	for range casReads {
		if !IsConflict(err) {
			return nrev, err
		}
		e, gerr := kv.Get(ctx, key)
		if gerr != nil || !ours(e.Value()) {
			return 0, err
		}
		nrev, err = kv.Update(ctx, key, raw, e.Revision())
	}
	return nrev, err
}

// casReads bounds CASPut's reads after a refused compare-and-set.
const casReads = 3

// Clock is what a lease is timed with: SystemClock, or a test's.
type Clock interface {
	Now() time.Time
	// After is time.After.
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the system's clock.
type SystemClock struct{}

// Now is time.Now.
func (SystemClock) Now() time.Time { return time.Now() }

// After is time.After.
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func clockOr(c Clock) Clock {
	if c == nil {
		return SystemClock{}
	}
	return c
}

// Acquire takes the lease at key (value val) once it is free: it tries
// Create every quarter of ttl, jittered by up to an eighth, until it
// succeeds or ctx ends (its error). It returns the revision (the epoch)
// and the time (clk's; nil: SystemClock) just before the Create that
// succeeded was sent: the server stored the lease after it, so the lease
// expires no earlier than ttl after it (Renew counts from there).
func Acquire(ctx context.Context, kv jetstream.KeyValue, key string, val []byte, ttl time.Duration, rng *rand.Rand, clk Clock, log *slog.Logger) (uint64, time.Time, error) {
	clk = clockOr(clk)
	for {
		sent := clk.Now()
		// an answer later than half the TTL leaves too little of it: Hold
		// would step down at once
		cctx, cancel := context.WithTimeout(ctx, ttl/2)
		epoch, err := kv.Create(cctx, key, val)
		cancel()
		if err == nil {
			return epoch, sent, nil
		}
		if ctx.Err() != nil {
			return 0, time.Time{}, ctx.Err()
		}
		if !IsConflict(err) {
			log.Debug("take the lease", "err", err)
		}
		select {
		case <-ctx.Done():
			return 0, time.Time{}, ctx.Err()
		case <-clk.After(ttl/4 + time.Duration(rng.Int64N(int64(ttl/8)+1))):
		}
	}
}

// renewal is the outcome of one renewal sent at sent.
type renewal struct {
	rev  uint64
	sent time.Time
	err  error
}

// Renew renews the lease at key (value val, revision held) every quarter
// of ttl until ctx ends. since is when the lease was last known stored:
// the time just before the Create that took it was sent (Acquire). A
// refused renewal (the lease expired and was taken) calls deposed and
// returns; so does the step-down deadline, three quarters of ttl after the
// last renewal that succeeded was sent (or since), whatever the renewals
// in flight: the server expires the lease no earlier than ttl after that
// send, so the active steps down at least a quarter of ttl before a
// standby can take the lease. Each renewal runs on a goroutine of its own
// (bounded by a quarter of ttl), waited for before Renew returns. clk
// (nil: SystemClock) times it all.
func Renew(ctx context.Context, kv jetstream.KeyValue, key string, held *atomic.Uint64, val []byte, ttl time.Duration, since time.Time, clk Clock, deposed func(), log *slog.Logger) {
	clk = clockOr(clk)
	ctx, cancel := context.WithCancel(ctx)
	var inflight chan renewal // the renewal under way (nil: none)
	defer func() {
		cancel()
		if inflight != nil {
			<-inflight
		}
	}()
	last := since // the last renewal that succeeded was sent then
	next := since.Add(ttl / 4)
	for {
		now := clk.Now()
		stepDown := last.Add(ttl * 3 / 4)
		if !now.Before(stepDown) {
			// a standby may take it at ttl: stop before
			log.Warn("lease not renewed in time: stepping down", "since", now.Sub(last))
			deposed()
			return
		}
		var tick <-chan time.Time
		if inflight == nil {
			tick = clk.After(next.Sub(now))
		}
		select {
		case <-ctx.Done():
			return
		case <-clk.After(stepDown.Sub(now)):
		case <-tick:
			sent := clk.Now()
			next = sent.Add(ttl / 4)
			ch, rev := make(chan renewal, 1), held.Load()
			inflight = ch
			go func() {
				cctx, ccancel := context.WithTimeout(ctx, ttl/4)
				defer ccancel()
				r, err := CASPut(cctx, kv, key, val, rev, func(v []byte) bool { return bytes.Equal(v, val) })
				ch <- renewal{r, sent, err}
			}()
		case r := <-inflight:
			inflight = nil
			switch {
			case r.err == nil:
				held.Store(r.rev)
				last = r.sent
			case IsConflict(r.err):
				log.Warn("lease taken by another replica: stepping down", "err", r.err)
				deposed()
				return
			case ctx.Err() != nil:
				return
			default:
				log.Warn("renew the lease", "err", r.err)
			}
		}
	}
}

// ErrCheckpointObject: the object a checkpoint pointer names is not what
// the pointer says (its size or its digest).
var ErrCheckpointObject = errors.New("replica: checkpoint object does not match its pointer")

// A restore reads the checkpoint within RestoreTimeout of its size: a
// minute, plus a second per RestoreRate bytes (a generous floor: a
// 100 MB checkpoint gets 2 min 40 s; a cluster's links move far more).
// Without a deadline of its own the object store client would cut the
// whole streamed read at its default request timeout (5 s), and every
// standby would fail the same way on a checkpoint that takes longer.
const (
	RestoreBase = time.Minute
	RestoreRate = 1 << 20 // bytes a second
)

// RestoreTimeout is how long a restore of a checkpoint of size bytes may
// take.
func RestoreTimeout(size int64) time.Duration {
	return RestoreBase + time.Duration(float64(max(size, 0))/RestoreRate*float64(time.Second))
}

// Restore writes the object p names (p.Object of obj) to path, through a
// temporary file that is synced and then renamed over path, within
// RestoreTimeout(p.Bytes) (or ctx's earlier deadline). The object must
// be p.Bytes long and, when p has one, have p.Digest (the object store
// checks the bytes against its digest as they are read): otherwise
// ErrCheckpointObject, and path is left as it was.
func Restore(ctx context.Context, obj jetstream.ObjectStore, p Checkpoint, path string) error {
	name := p.Object
	ctx, cancel := context.WithTimeout(ctx, RestoreTimeout(p.Bytes))
	defer cancel()
	r, err := obj.Get(ctx, name)
	if err != nil {
		return fmt.Errorf("read checkpoint %s: %w", name, err)
	}
	defer r.Close()
	if p.Digest != "" {
		info, err := r.Info()
		if err != nil {
			return fmt.Errorf("read checkpoint %s: %w", name, err)
		}
		if info.Digest != p.Digest {
			return fmt.Errorf("%w: %s has digest %s, the pointer %s", ErrCheckpointObject, name, info.Digest, p.Digest)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".restore"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("restore checkpoint: %w", err)
	}
	// (one byte more than the pointer says tells a longer object)
	n, err := io.Copy(f, io.LimitReader(r, p.Bytes+1))
	if err == nil && n != p.Bytes {
		err = fmt.Errorf("%w: %s: read %d bytes, the pointer says %d", ErrCheckpointObject, name, n, p.Bytes)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("restore checkpoint %s: %w", name, err)
	}
	return nil
}
