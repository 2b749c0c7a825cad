package store

import (
	"bytes"
	cryptorand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/boltkv"
	"github.com/edgesched/edgesched/quant"
)

// Startup integrity (docs/federated.md "A damaged store"). Before the
// coordinator uses coordinator.db it
//
//   - opens it with bbolt's panics turned into errors (a damaged page
//     makes bbolt panic, or fault on its memory map);
//   - runs bbolt's consistency check (tx.Check: every page reachable once,
//     the free list consistent);
//   - migrates a schema "1" store (JSON records without checksums);
//   - decodes every record strictly (records.go) and checks the cross
//     references (the current round and model exist, every model has both
//     artifacts), and verifies the signatures of the artifacts it will
//     use: the newest published model, every pending or candidate one and
//     the current round's base.
//
// Any failure is one ErrStore error naming the file and what is wrong,
// ending with how to restore it from a backup; the daemon stops with it.
// Runtime store access goes through (*Coordinator).view and update,
// which do the same with panics and faults.

// storeFile is the store's name in DataDir.
const File = "coordinator.db"

// restoreHint ends every damaged-store error.
const restoreHint = "restore a backup with 'edge-coordinator restore --data DIR --from FILE' (docs/federated.md)"

// boltOptions are the store's bbolt options: the hash-map free list
// (allocation stays O(1) when a round's updates are freed) and a large
// initial map so a growing file rarely remaps (a remap waits for every
// reader). The free list is written at every commit: without it bbolt
// rebuilds it at open by walking the pages in a goroutine of its own,
// where a damaged page is a panic nothing can recover.
func boltOptions(readOnly bool) *bolt.Options {
	return &bolt.Options{Timeout: 5 * time.Second, ReadOnly: readOnly, FreelistType: bolt.FreelistMapType,
		InitialMmapSize: 256 << 20}
}

// DamagedError is the one error a damaged store gives: it names the file,
// what is wrong and how to restore a backup. It matches ErrStore.
type DamagedError struct {
	Path string
	Err  error
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("coordinator store %s is damaged: %s; %s", e.Path, strings.TrimPrefix(e.Err.Error(), ErrStore.Error()+": "), restoreHint)
}

// Unwrap returns ErrStore and the cause.
func (e *DamagedError) Unwrap() []error { return []error{ErrStore, e.Err} }

// damaged wraps a failure of the store at path into a *DamagedError
// (once).
func damaged(path string, err error) error {
	if de := (*DamagedError)(nil); errors.As(err, &de) {
		return err
	}
	return &DamagedError{Path: path, Err: err}
}

// guard runs fn with bbolt's panics and memory faults turned into an
// error naming path.
func Guard(path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if re, ok := p.(runtime.Error); ok && strings.Contains(re.Error(), "invalid memory address") {
				err = damaged(path, fmt.Errorf("bbolt faulted reading it (a truncated or damaged file): %v", p))
				return
			}
			err = damaged(path, fmt.Errorf("bbolt failed reading it: %v", p))
		}
	}()
	return fn()
}

// storeKeys verifies the signatures of stored artifacts.
type Keys struct {
	Own   *quant.Keyring // the signer's public key
	Other *quant.Keyring // further trusted keys (a key rotation; may be nil)
}

func (k Keys) decode(raw []byte) (*quant.Artifact, error) {
	a, err := quant.Decode(raw, quant.DecodeOptions{Keys: k.Own})
	if errors.Is(err, quant.ErrUnknownKey) && k.Other != nil {
		a, err = quant.Decode(raw, quant.DecodeOptions{Keys: k.Other})
	}
	return a, err
}

// Options are what Open needs beyond the file: the bounds written into
// rounds still under way in a store migrated from schema 1 (the rounds'
// fields of the same names) and the audit log's retention (0: all).
type Options struct {
	MaxNorm    float64
	MaxSamples int64
	ClipNorm   float64
	AuditKeep  int
}

// Open opens (creating) the store at path, checks it (integrity above)
// and migrates it. keys verify the stored artifacts it will use. Its
// errors name the file; a damaged store is a *DamagedError.
func Open(path string, keys Keys, opts Options) (*bolt.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create coordinator store directory: %w", err)
	}
	if err := refuseSpecial(path); err != nil {
		return nil, err
	}
	var db *bolt.DB
	err := Guard(path, func() error {
		var err error
		db, err = bolt.Open(path, 0o600, boltOptions(false))
		if errors.Is(err, bolt.ErrTimeout) {
			return fmt.Errorf("open coordinator store %s: another process holds it (a coordinator is running on this data directory)", path)
		}
		if err != nil {
			if os.IsPermission(err) {
				return fmt.Errorf("open coordinator store: %w", err)
			}
			return damaged(path, err)
		}
		if err := checkPages(db); err != nil {
			return damaged(path, err)
		}
		if err := initStore(db, opts); err != nil {
			return err
		}
		if err := verifyStore(db, keys); err != nil {
			return damaged(path, err)
		}
		if opts.AuditKeep > 0 {
			return db.Update(func(tx *bolt.Tx) error {
				_, err := pruneAudit(tx, opts.AuditKeep)
				return err
			})
		}
		return nil
	})
	if err != nil {
		if db != nil {
			_ = Guard(path, db.Close)
		}
		return nil, err
	}
	return db, nil
}

// refuseSpecial refuses a store path that is not a regular file (a FIFO
// or device would block or feed bbolt garbage).
func refuseSpecial(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return nil // created by bbolt
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%w: coordinator store %s is not a regular file (%s)", ErrStore, path, st.Mode().Type())
	}
	return nil
}

// checkPages runs bbolt's consistency check, after checking that the
// file holds every page its meta page claims (the check walks the pages in
// a goroutine of bbolt's, where reading past the end of a truncated file
// would be a fault no recover catches).
func checkPages(db *bolt.DB) error {
	return db.View(func(tx *bolt.Tx) error {
		st, err := os.Stat(db.Path())
		if err != nil {
			return err
		}
		if st.Size() < tx.Size() {
			return fmt.Errorf("%w: the file has %d bytes, its pages need %d (truncated)", ErrStore, st.Size(), tx.Size())
		}
		var found []error
		for err := range tx.Check() {
			// bbolt reports a page that made it panic as "panic: ..."
			if msg, ok := strings.CutPrefix(err.Error(), "panic: "); ok {
				err = errors.New(msg)
			}
			found = append(found, err)
			if len(found) == 5 {
				break
			}
		}
		if len(found) > 0 {
			return fmt.Errorf("%w: bbolt consistency check: %w", ErrStore, errors.Join(found...))
		}
		return nil
	})
}

// initStore creates the buckets of a new store, or migrates a schema 1
// store, and refuses any other schema.
func initStore(db *bolt.DB, opts Options) error {
	return db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(BucketMeta)
		if meta == nil {
			if tx.Bucket(BucketRounds) != nil {
				return fmt.Errorf("%w: no meta bucket", ErrStore)
			}
			for _, b := range allBuckets {
				if _, err := tx.CreateBucket(b); err != nil {
					return err
				}
			}
			if err := tx.Bucket(BucketMeta).Put(KeySchema, []byte(SchemaVersion)); err != nil {
				return err
			}
			return ensureDPSecret(tx.Bucket(BucketMeta))
		}
		switch v := string(meta.Get(KeySchema)); v {
		case SchemaVersion:
		case "2":
			// schema 3 adds the sums bucket; schema 2 rounds keep payloads
			if _, err := tx.CreateBucketIfNotExists(BucketSums); err != nil {
				return err
			}
			if err := meta.Put(KeySchema, []byte(SchemaVersion)); err != nil {
				return err
			}
		case "1":
			if err := migrate1(tx, opts); err != nil {
				return fmt.Errorf("%w: migrating schema 1: %v", ErrStore, err)
			}
		default:
			return fmt.Errorf("%w: schema %q, this build reads %q (and migrates \"1\" and \"2\")", ErrStore, v, SchemaVersion)
		}
		for _, b := range allBuckets {
			if tx.Bucket(b) == nil {
				return fmt.Errorf("%w: bucket %s missing", ErrStore, b)
			}
		}
		return ensureDPSecret(meta)
	})
}

// dpSecretLen is the length of the DP secret (KeyDPSecret).
const dpSecretLen = 32

// ensureDPSecret draws the store's DP secret if it has none.
func ensureDPSecret(meta *bolt.Bucket) error {
	if len(meta.Get(KeyDPSecret)) == dpSecretLen {
		return nil
	}
	b := make([]byte, dpSecretLen)
	if _, err := cryptorand.Read(b); err != nil {
		return fmt.Errorf("%w: draw the DP secret: %v", ErrStore, err)
	}
	return meta.Put(KeyDPSecret, b)
}

// DPSecret returns the store's DP secret (KeyDPSecret; a copy).
func DPSecret(tx *bolt.Tx) ([]byte, error) {
	b := tx.Bucket(BucketMeta).Get(KeyDPSecret)
	if len(b) != dpSecretLen {
		return nil, fmt.Errorf("%w: DP secret of %d bytes, want %d", ErrStore, len(b), dpSecretLen)
	}
	return bytes.Clone(b), nil
}

// migrate1 rewrites a schema 1 store: JSON records gain their checksum
// (decoded strictly first), stored updates become binary, and rounds
// still under way get the configured bounds.
func migrate1(tx *bolt.Tx, opts Options) error {
	for _, b := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	rewrite := func(bucket []byte, newRec func() any) error {
		b := tx.Bucket(bucket)
		type kv struct{ k, v []byte }
		var out []kv
		err := b.ForEach(func(k, v []byte) error {
			rec := newRec()
			dec := json.NewDecoder(bytes.NewReader(v))
			dec.DisallowUnknownFields()
			if err := dec.Decode(rec); err != nil {
				return fmt.Errorf("%s: %v", RecordName(bucket, k), err)
			}
			if r, ok := rec.(*Round); ok && (r.State == StateCollecting || r.State == StateAggregating) {
				r.MaxNorm, r.MaxSamples, r.ClipNorm = opts.MaxNorm, opts.MaxSamples, opts.ClipNorm
			}
			raw, err := EncodeRecord(rec)
			if err != nil {
				return err
			}
			out = append(out, kv{append([]byte(nil), k...), raw})
			return nil
		})
		if err != nil {
			return err
		}
		for _, e := range out {
			if err := b.Put(e.k, e.v); err != nil {
				return err
			}
		}
		return nil
	}
	for _, m := range []struct {
		b   []byte
		rec func() any
	}{
		{BucketRounds, func() any { return &Round{} }}, {BucketSites, func() any { return &Site{} }},
		{BucketModels, func() any { return &Model{} }}, {BucketAudit, func() any { return &Event{} }},
		{BucketJudged, func() any { return &Verdict{} }},
	} {
		if err := rewrite(m.b, m.rec); err != nil {
			return err
		}
	}
	// stored updates: JSON {header, payload} -> binary
	ub := tx.Bucket(BucketUpdates)
	var rounds [][]byte
	if err := ub.ForEach(func(k, v []byte) error {
		if v == nil {
			rounds = append(rounds, append([]byte(nil), k...))
		}
		return nil
	}); err != nil {
		return err
	}
	for _, rk := range rounds {
		rb := ub.Bucket(rk)
		type kv struct{ k, v []byte }
		var out []kv
		if err := rb.ForEach(func(k, v []byte) error {
			var old struct {
				Header  federated.UpdateHeader `json:"header"`
				Payload []byte                 `json:"payload"`
			}
			if err := json.Unmarshal(v, &old); err != nil {
				return fmt.Errorf("update %s/%s: %v", RecordName(BucketUpdates, rk), k, err)
			}
			raw, err := EncodeStoredUpdate(&old.Header, old.Payload)
			if err != nil {
				return err
			}
			out = append(out, kv{append([]byte(nil), k...), raw})
			return nil
		}); err != nil {
			return err
		}
		for _, e := range out {
			if err := rb.Put(e.k, e.v); err != nil {
				return err
			}
		}
	}
	return tx.Bucket(BucketMeta).Put(KeySchema, []byte(SchemaVersion))
}

// verifyStore decodes every record strictly, checks the cross references
// and verifies the artifacts the coordinator will use (those signed by a
// key it does not trust are left for their use to refuse: after a key
// rotation that is a configuration matter, not damage).
func verifyStore(db *bolt.DB, keys Keys) error {
	return db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(BucketMeta)
		for _, k := range [][]byte{KeyRound, KeyVersion, keyAudit, keyDPPruned} {
			if v := meta.Get(k); v != nil && len(v) != 8 {
				return fmt.Errorf("%w: meta/%s is %d bytes, want 8", ErrStore, k, len(v))
			}
		}
		each := func(bucket []byte, newRec func() any, fn func(k []byte, rec any) error) error {
			return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
				if v == nil {
					return fmt.Errorf("%w: %s: unexpected nested bucket %q", ErrStore, bucket, k)
				}
				rec := newRec()
				if err := DecodeRecord(v, rec, RecordName(bucket, k)); err != nil {
					return err
				}
				if fn != nil {
					return fn(k, rec)
				}
				return nil
			})
		}
		curRound, curVersion := getU64(meta, KeyRound), getU64(meta, KeyVersion)
		var cur *Round
		if err := each(BucketRounds, func() any { return &Round{} }, func(k []byte, rec any) error {
			r := rec.(*Round)
			if r.Round != getU64Key(k) {
				return fmt.Errorf("%w: %s holds round %d", ErrStore, RecordName(BucketRounds, k), r.Round)
			}
			if r.Round == curRound {
				cur = r
			}
			return nil
		}); err != nil {
			return err
		}
		if curRound > 0 && cur == nil {
			return fmt.Errorf("%w: the current round %d has no record", ErrStore, curRound)
		}
		verify := map[uint64]bool{}
		var newestPublished uint64
		if err := each(BucketModels, func() any { return &Model{} }, func(k []byte, rec any) error {
			m := rec.(*Model)
			if m.Version != getU64Key(k) || m.Version > curVersion {
				return fmt.Errorf("%w: %s holds version %d (newest %d)", ErrStore, RecordName(BucketModels, k), m.Version, curVersion)
			}
			bl := tx.Bucket(BucketBlobs)
			if bl.Get(BlobKey(m.Version, quant.Float32)) == nil || bl.Get(BlobKey(m.Version, quant.Int8)) == nil {
				return fmt.Errorf("%w: model version %d has no stored artifacts", ErrStore, m.Version)
			}
			switch m.Status {
			case ModelPending, ModelCandidate:
				verify[m.Version] = true
			case ModelPublished:
				newestPublished = max(newestPublished, m.Version)
			}
			return nil
		}); err != nil {
			return err
		}
		if curVersion > 0 && tx.Bucket(BucketModels).Get(u64(curVersion)) == nil {
			return fmt.Errorf("%w: the newest model version %d has no record", ErrStore, curVersion)
		}
		if newestPublished > 0 {
			verify[newestPublished] = true
		}
		if cur != nil {
			verify[cur.BaseVersion] = true
		}
		for v := range verify {
			for _, dtype := range []string{quant.Float32, quant.Int8} {
				raw := tx.Bucket(BucketBlobs).Get(BlobKey(v, dtype))
				if raw == nil {
					return fmt.Errorf("%w: model version %d has no %s artifact", ErrStore, v, dtype)
				}
				a, err := keys.decode(raw)
				if errors.Is(err, quant.ErrUnknownKey) || errors.Is(err, quant.ErrRetiredKey) {
					// signed with a key this configuration does not
					// trust (a key rotation, docs/security.md): not
					// damage; using it fails then, naming the key
					continue
				}
				if err != nil {
					return fmt.Errorf("%w: model version %d %s artifact: %v", ErrStore, v, dtype, err)
				}
				if a.Header.Version != v || a.Header.DType != dtype {
					return fmt.Errorf("%w: blobs/%s holds %s version %d", ErrStore, BlobKey(v, dtype), a.Header.DType, a.Header.Version)
				}
			}
		}
		for _, e := range []struct {
			b   []byte
			rec func() any
		}{{BucketSites, func() any { return &Site{} }}, {BucketAudit, func() any { return &Event{} }}, {BucketJudged, func() any { return &Verdict{} }}} {
			if err := each(e.b, e.rec, nil); err != nil {
				return err
			}
		}
		// the stored updates of the rounds not yet aggregated
		if cur != nil && (cur.State == StateCollecting || cur.State == StateAggregating) {
			rb := tx.Bucket(BucketUpdates).Bucket(u64(cur.Round))
			if rb == nil {
				return fmt.Errorf("%w: round %d has no update bucket", ErrStore, cur.Round)
			}
			n := 0
			if err := rb.ForEach(func(k, v []byte) error {
				u, err := DecodeStoredUpdate(v, fmt.Sprintf("%d/%s", cur.Round, k))
				if err == nil && u.Summed != (cur.Sum != nil) {
					err = fmt.Errorf("%w: stored update %d/%s: summed %v in a round that sums %v", ErrStore, cur.Round, k, u.Summed, cur.Sum != nil)
				}
				n++
				return err
			}); err != nil {
				return err
			}
			if cur.Sum != nil {
				if err := checkSums(tx, cur, n); err != nil {
					return err
				}
			}
		}
		return tx.Bucket(BucketRejects).ForEach(func(k, v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("%w: rejects/%s is %d bytes, want 8", ErrStore, k, len(v))
			}
			return nil
		})
	})
}

func getU64Key(k []byte) uint64 { return boltkv.FromU64(k) }

// checkSums checks a summing round's running sums against its record and
// its n stored updates.
func checkSums(tx *bolt.Tx, r *Round, n int) error {
	raw := tx.Bucket(BucketSums).Get(u64(r.Round))
	if raw == nil {
		if n > 0 || r.Accepted > 0 {
			return fmt.Errorf("%w: summing round %d has %d updates and no sums", ErrStore, r.Round, n)
		}
		return nil
	}
	var s federated.FixedSum
	if err := DecodeSum(raw, r.Round, &s, RecordName(BucketSums, u64(r.Round))); err != nil {
		return err
	}
	if s.Count != uint64(n) || s.Count != uint64(r.Accepted) || s.Shift != r.Sum.Shift || s.WShift != r.Sum.WShift {
		return fmt.Errorf("%w: sums of round %d count %d updates (shifts %d/%d), the round %d accepted and %d stored (shifts %d/%d)",
			ErrStore, r.Round, s.Count, s.Shift, s.WShift, r.Accepted, n, r.Sum.Shift, r.Sum.WShift)
	}
	return nil
}

// WriteBackup writes a backup to path through write: into a temporary
// file beside it, synced, then renamed (a crash leaves no half backup
// under the name); it returns the size.
func WriteBackup(path string, write func(io.Writer) (int64, error)) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".backup-*")
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(tmp.Name())
	n, err := write(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return 0, fmt.Errorf("backup to %s: %w", path, err)
	}
	return n, nil
}

// BackupStore copies the store of a coordinator that is not running
// (offline) from dataDir to path, after checking it.
func BackupStore(dataDir, path string) (int64, error) {
	src := filepath.Join(dataDir, File)
	if _, err := os.Stat(src); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	var n int64
	err := Guard(src, func() error {
		opts := boltOptions(true)
		opts.Timeout = 200 * time.Millisecond
		db, err := bolt.Open(src, 0o600, opts)
		if errors.Is(err, bolt.ErrTimeout) {
			return fmt.Errorf("backup: %s is in use by a running coordinator: it writes online backups itself (--backup-every, --backup-dir) and on request (admin endpoint store.backup)", src)
		}
		if err != nil {
			return damaged(src, err)
		}
		defer db.Close()
		if err := checkPages(db); err != nil {
			return damaged(src, err)
		}
		n, err = WriteBackup(path, func(w io.Writer) (int64, error) {
			var n int64
			err := db.View(func(tx *bolt.Tx) error {
				var err error
				n, err = tx.WriteTo(w)
				return err
			})
			return n, err
		})
		return err
	})
	return n, err
}

// CheckStoreFile checks a store file (a backup, or a stopped
// coordinator's store) as the coordinator does at start: pages, schema,
// every record, and the signatures of the artifacts it would use against
// keys (the coordinator's public key, and earlier ones during a rotation).
func CheckStoreFile(path string, keys *quant.Keyring) error {
	if err := refuseSpecial(path); err != nil {
		return err
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("check %s: %w", path, err)
	}
	return Guard(path, func() error {
		opts := boltOptions(true)
		opts.Timeout = 200 * time.Millisecond
		db, err := bolt.Open(path, 0o600, opts)
		if errors.Is(err, bolt.ErrTimeout) {
			return fmt.Errorf("check %s: in use by a running coordinator", path)
		}
		if err != nil {
			return damaged(path, err)
		}
		defer db.Close()
		if err := checkPages(db); err != nil {
			return damaged(path, err)
		}
		var schema string
		if err := db.View(func(tx *bolt.Tx) error {
			if m := tx.Bucket(BucketMeta); m != nil {
				schema = string(m.Get(KeySchema))
			}
			return nil
		}); err != nil {
			return damaged(path, err)
		}
		if schema != SchemaVersion {
			return damaged(path, fmt.Errorf("%w: schema %q (a coordinator migrates \"1\" and \"2\" when it opens it; this check reads %q)", ErrStore, schema, SchemaVersion))
		}
		if err := verifyStore(db, Keys{Own: keys}); err != nil {
			return damaged(path, err)
		}
		return nil
	})
}

// RestoreStore installs the backup at from as dataDir's store after
// checking it (CheckStoreFile with keys). The store it replaces, if any,
// is kept beside it as coordinator.db.replaced-TIME. It refuses while a
// coordinator runs on dataDir. It returns the path the old store was
// moved to ("" when there was none).
func RestoreStore(dataDir, from string, keys *quant.Keyring) (string, error) {
	if err := CheckStoreFile(from, keys); err != nil {
		return "", fmt.Errorf("restore: the backup does not pass the check: %w", err)
	}
	dst := filepath.Join(dataDir, File)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("restore: %w", err)
	}
	// hold the data directory's lock: a running coordinator holds the
	// store's flock, so opening the current store tells
	var old string
	if _, err := os.Stat(dst); err == nil {
		if err := lockedBy(dst); err != nil {
			return "", err
		}
		old = fmt.Sprintf("%s.replaced-%s", dst, time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(dst, old); err != nil {
			return "", fmt.Errorf("restore: keep the current store: %w", err)
		}
	}
	if _, err := WriteBackup(dst, func(w io.Writer) (int64, error) {
		f, err := os.Open(from)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		return io.Copy(w, f)
	}); err != nil {
		if old != "" {
			_ = os.Rename(old, dst)
		}
		return "", fmt.Errorf("restore: %w", err)
	}
	return old, nil
}

// lockedBy returns an error when a process holds the bbolt lock of path.
// A damaged file that bbolt cannot open is not locked (it is what a
// restore replaces).
func lockedBy(path string) error {
	var locked bool
	_ = Guard(path, func() error {
		opts := boltOptions(true)
		opts.Timeout = 200 * time.Millisecond
		db, err := bolt.Open(path, 0o600, opts)
		if errors.Is(err, bolt.ErrTimeout) {
			locked = true
			return nil
		}
		if err == nil {
			db.Close()
		}
		return nil
	})
	if locked {
		return fmt.Errorf("restore: %s is in use by a running coordinator: stop it first", path)
	}
	return nil
}
