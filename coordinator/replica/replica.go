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
	Regional uint64    `json:"regional,omitempty"`
	Bytes    int64     `json:"bytes,omitempty"`
	Taken    time.Time `json:"taken"`
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
// value ours says (an earlier write of this replica) adopts that value's
// revision (and is the answer when it is raw itself); any other conflict
// is returned (IsConflict).
func CASPut(ctx context.Context, kv jetstream.KeyValue, key string, raw []byte, rev uint64, ours func([]byte) bool) (uint64, error) {
	nrev, err := kv.Update(ctx, key, raw, rev)
	if !IsConflict(err) {
		return nrev, err
	}
	e, gerr := kv.Get(ctx, key)
	if gerr != nil || !ours(e.Value()) {
		return 0, err
	}
	if bytes.Equal(e.Value(), raw) {
		return e.Revision(), nil
	}
	return kv.Update(ctx, key, raw, e.Revision())
}

// Acquire takes the lease at key (value val) once it is free: it tries
// Create every quarter of ttl, jittered by up to an eighth, until it
// succeeds (the revision, the epoch) or ctx ends (its error).
func Acquire(ctx context.Context, kv jetstream.KeyValue, key string, val []byte, ttl time.Duration, rng *rand.Rand, log *slog.Logger) (uint64, error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, ttl)
		epoch, err := kv.Create(cctx, key, val)
		cancel()
		if err == nil {
			return epoch, nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if !IsConflict(err) {
			log.Debug("take the lease", "err", err)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(ttl/4 + time.Duration(rng.Int64N(int64(ttl/8)+1))):
		}
	}
}

// Renew renews the lease at key (value val, revision held) every quarter
// of ttl until ctx ends; a refused renewal (the lease expired and was
// taken) or none that succeeded for three quarters of ttl calls deposed
// and returns.
func Renew(ctx context.Context, kv jetstream.KeyValue, key string, held *atomic.Uint64, val []byte, ttl time.Duration, deposed func(), log *slog.Logger) {
	t := time.NewTicker(ttl / 4)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, ttl/4)
		r, err := CASPut(cctx, kv, key, val, held.Load(), func(v []byte) bool { return bytes.Equal(v, val) })
		cancel()
		switch {
		case err == nil:
			held.Store(r)
			last = time.Now()
		case IsConflict(err):
			log.Warn("lease taken by another replica: stepping down", "err", err)
			deposed()
			return
		case ctx.Err() != nil:
			return
		case time.Since(last) >= ttl*3/4:
			// a standby may take it at ttl: stop before
			log.Warn("lease not renewed in time: stepping down", "since", time.Since(last), "err", err)
			deposed()
			return
		default:
			log.Warn("renew the lease", "err", err)
		}
	}
}

// Restore writes the object name of obj to path, through a temporary
// file that is synced and then renamed over path.
func Restore(ctx context.Context, obj jetstream.ObjectStore, name, path string) error {
	r, err := obj.Get(ctx, name)
	if err != nil {
		return fmt.Errorf("read checkpoint %s: %w", name, err)
	}
	defer r.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".restore"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("restore checkpoint: %w", err)
	}
	_, err = io.Copy(f, r)
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
