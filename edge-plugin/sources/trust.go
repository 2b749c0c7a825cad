package sources

import (
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/internal/boltkv"
	"github.com/edgesched/edgesched/quant"
)

// Model trust beyond a running process (docs/security.md).
//
// Rollback protection survives restarts when the store has a state file
// (args.modelStatePath): a small bbolt database holding the highest model
// version the plugin ever accepted and its model ID (the floor). The
// floor is written, in one transaction, before a new model is swapped in;
// at start it is read back, so after a restart a model below the floor
// (or the floor's version with another model ID) is refused as rollback
// even though nothing is loaded yet. A failed write refuses the model
// (reason state) and keeps the last-known-good one: the floor must never
// lag what runs.
//
// Why a local file and not an annotation on the model ConfigMap: whoever
// can write the ConfigMap (the thing rollback protection defends against)
// could lower an annotation on it just as easily; the state file lives on
// the scheduler's node, outside the API. Its directory must survive pod
// restarts (a hostPath or a persistent volume); on an emptyDir the floor
// only survives container restarts.
//
// Freeze protection: with args.modelMaxAge a new model whose signed
// creation time is older than that is refused (reason stale): a feed held
// back cannot slip an old model in as the current one.

// More refusal reasons (model_refusals_total).
const (
	RefuseStale = "stale"
	RefuseState = "state"
)

// ModelStoreOptions configure OpenModelStore. The zero value of each
// optional field is documented.
type ModelStoreOptions struct {
	// Keys are the trusted signing keys (retired keys refused). Required.
	Keys *quant.Keyring
	// StatePath is the state file that keeps the rollback floor across
	// restarts (created, mode 0600); "": the floor lives in memory only.
	StatePath string
	// MaxAge refuses new models whose signed creation time is older
	// (0: no limit).
	MaxAge time.Duration
	// Now is the clock of MaxAge (nil: time.Now).
	Now func() time.Time
}

// modelTrust is a ModelStore's persistent rollback floor and age limit.
// Its fields are guarded by the store's mu.
type modelTrust struct {
	statePath string
	maxAge    time.Duration
	now       func() time.Time
	floor     quant.Floor // the highest model accepted (state file, key "floor")
}

var (
	stateBucket = []byte("plugin")
	stateSchema = []byte("schema")
	stateFloor  = []byte("floor")
)

const stateSchemaVersion = "1"

// errState wraps a damaged state file.
var errState = errors.New("edgeplugin: bad model state file")

// decodeFloor parses the floor record (quant.DecodeFloor, strict) and
// requires a version and a full model ID.
func decodeFloor(b []byte) (quant.Floor, error) {
	f, err := quant.DecodeFloor(b)
	if err != nil {
		return f, fmt.Errorf("%w: floor: %w", errState, err)
	}
	if f.Version == 0 || len(f.ModelID) != 64 {
		return f, fmt.Errorf("%w: floor version %d, model %q", errState, f.Version, f.ModelID)
	}
	return f, nil
}

// OpenModelStore returns an empty store with o's trust settings, reading
// the rollback floor from o.StatePath (created when missing). A damaged
// state file is an error: starting without the floor would reopen the
// door to rollbacks.
func OpenModelStore(o ModelStoreOptions) (*ModelStore, error) {
	if o.Keys == nil {
		return nil, errors.New("edgeplugin: model store needs the trusted keys")
	}
	if o.MaxAge < 0 {
		return nil, fmt.Errorf("edgeplugin: model max age %v", o.MaxAge)
	}
	s := NewModelStore(o.Keys)
	s.trust = modelTrust{statePath: o.StatePath, maxAge: o.MaxAge, now: o.Now}
	if s.trust.now == nil {
		s.trust.now = time.Now
	}
	if o.StatePath == "" {
		return s, nil
	}
	db, err := boltkv.Open(o.StatePath, "plugin model state", stateSchema, stateSchemaVersion, stateBucket)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(stateBucket).Get(stateFloor)
		if raw == nil {
			return nil
		}
		f, err := decodeFloor(raw)
		s.trust.floor = f
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.StatePath, err)
	}
	return s, nil
}

// Floor returns the highest model version and ID the store ever accepted
// (from the state file after a restart); 0 before any.
func (s *ModelStore) Floor() (uint64, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.trust.floor.Version, s.trust.floor.ModelID
}

// checkTrust refuses h if it is too old or below the floor. Callers hold
// s.mu.
func (s *ModelStore) checkTrust(h *quant.Header) error {
	t := &s.trust
	if t.maxAge > 0 {
		if err := quant.CheckFresh(h, t.now(), t.maxAge); err != nil {
			return s.refuse(RefuseStale, err)
		}
	}
	if t.floor.Version > 0 {
		if err := quant.CheckNewer(&quant.Header{Version: t.floor.Version, ModelID: t.floor.ModelID}, h); err != nil {
			return s.refuse(RefuseRollback, fmt.Errorf("%w (the highest version this scheduler accepted, kept in %s)", err, t.statePath))
		}
	}
	return nil
}

// raiseFloor records h as the floor (in the state file first, when there
// is one) if it is above it. Callers hold s.mu.
func (s *ModelStore) raiseFloor(h *quant.Header) error {
	t := &s.trust
	if h.Version <= t.floor.Version {
		return nil
	}
	f := quant.Floor{Version: h.Version, ModelID: h.ModelID, Accepted: t.nowOr().UTC()}
	if t.statePath != "" {
		raw, err := f.Encode()
		if err != nil {
			return err
		}
		db, err := boltkv.Open(t.statePath, "plugin model state", stateSchema, stateSchemaVersion, stateBucket)
		if err != nil {
			return s.refuse(RefuseState, err)
		}
		err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(stateBucket).Put(stateFloor, raw) })
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return s.refuse(RefuseState, fmt.Errorf("record model version %d in %s: %w", h.Version, t.statePath, err))
		}
	}
	t.floor = f
	return nil
}

func (t *modelTrust) nowOr() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}
