package flclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/sanity"
)

// Model trust (docs/security.md). A model is installed only if:
//
//   - both artifacts verify against ModelKeys (a key retired by a
//     rotation is refused: retired_key);
//   - they are the versions and model IDs the notice names (mismatch);
//   - its version is above the highest version this site ever installed
//     (rollback), a high-water mark kept in agent.db that survives
//     restarts and is never lowered; the same version with another model
//     ID is refused too (conflict);
//   - its signed creation time is within MaxModelAge (stale: freeze
//     protection, a withheld feed cannot keep serving an old model that
//     claims to be current);
//   - both models score a calibration set (sanity.Rows of the
//     artifact's schema) with finite scores that are not all equal
//     (sanity: a signed model with absurd scales would make every node
//     tie or score zero).
//
// Each refusal is counted by reason (Counters.RefusedModelReasons) and the
// last one kept (Counters.LastRefusal). A notice for the version already
// installed (the coordinator republishing after a crash) is no refusal.
//
// Freeze detection: when round announcements name a base version above
// the installed one and no such model is installed within FreezeAfter,
// or the installed model is older than MaxModelAge, the site reports
// itself frozen (TrustStatus, Counters.Freezes, an error log).

// Refusal reasons of models.
const (
	RefuseRollback   = "rollback"
	RefuseConflict   = "conflict"
	RefuseSignature  = "signature"
	RefuseUnknownKey = "unknown_key"
	RefuseRetiredKey = "retired_key"
	RefuseStale      = "stale"
	RefuseMismatch   = "mismatch"
	RefuseArtifact   = "artifact"
	RefuseFetch      = "fetch"
	RefuseSanity     = "sanity"
	// RefuseNotice: the model notice itself does not decode (malformed,
	// another protocol version, larger than federated.MaxControlBytes);
	// its version is unknown (0 in the refusal).
	RefuseNotice = "notice"
)

// ErrModelRefused wraps every model refusal of the client.
var ErrModelRefused = errors.New("flclient: model refused")

// ModelRefusal is a refused model with its reason (a Refuse* constant).
type ModelRefusal struct {
	Reason  string
	Version uint64
	Err     error
}

func (e *ModelRefusal) Error() string {
	return fmt.Sprintf("flclient: model version %d refused (%s): %v", e.Version, e.Reason, e.Err)
}

// Unwrap returns the cause and ErrModelRefused.
func (e *ModelRefusal) Unwrap() []error { return []error{ErrModelRefused, e.Err} }

// Meta keys of model trust, each a quant.Floor record.
var (
	keyModelHWM  = []byte("modelhwm")  // highest version ever installed, with its int8 model ID
	keyAnnounced = []byte("announced") // highest base version announced, Accepted: when first seen
)

// getMark reads the mark under key (the zero Floor when there is none).
func getMark(tx *bolt.Tx, key []byte) (quant.Floor, error) {
	raw := tx.Bucket(bucketMeta).Get(key)
	if raw == nil {
		return quant.Floor{}, nil
	}
	m, err := quant.DecodeFloor(raw)
	if err != nil {
		return m, fmt.Errorf("%w: %s: %w", ErrStore, key, err)
	}
	return m, nil
}

func putMark(tx *bolt.Tx, key []byte, m quant.Floor) error {
	raw, err := m.Encode()
	if err != nil {
		return err
	}
	return tx.Bucket(bucketMeta).Put(key, raw)
}

// migrateHWM sets the high-water mark of a store written before it
// existed from the installed model (once, at open).
func migrateHWM(db *bolt.DB) error {
	return db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta).Get(keyModelHWM) != nil {
			return nil
		}
		raw := tx.Bucket(bucketModels).Get(keyInstalled)
		if raw == nil {
			return nil
		}
		var inst Installed
		if err := json.Unmarshal(raw, &inst); err != nil {
			return fmt.Errorf("%w: installed: %v", ErrStore, err)
		}
		return putMark(tx, keyModelHWM, quant.Floor{Version: inst.Version, ModelID: inst.Int8})
	})
}

func (c *Client) now() time.Time {
	if c.cfg.Now != nil {
		return c.cfg.Now()
	}
	return time.Now()
}

// refuseModel counts a refusal and returns it as a *ModelRefusal.
func (c *Client) refuseModel(reason string, version uint64, err error) error {
	r := &ModelRefusal{Reason: reason, Version: version, Err: err}
	if uerr := c.db.Update(func(tx *bolt.Tx) error {
		return bumpCounters(tx, func(k *Counters) {
			k.RefusedModels++
			if k.RefusedModelReasons == nil {
				k.RefusedModelReasons = map[string]int{}
			}
			k.RefusedModelReasons[reason]++
			k.LastRefusal = r.Error()
		})
	}); uerr != nil {
		c.log.Error("count model refusal", "err", uerr)
	}
	c.log.Warn("model refused", "version", version, "reason", reason, "err", err)
	c.report()
	return r
}

// artifactReason classifies an artifact fetch or decode failure.
func artifactReason(err error) string {
	switch {
	case errors.Is(err, quant.ErrRetiredKey):
		return RefuseRetiredKey
	case errors.Is(err, quant.ErrUnknownKey):
		return RefuseUnknownKey
	case errors.Is(err, quant.ErrSignature), errors.Is(err, quant.ErrUnsigned):
		return RefuseSignature
	case errors.Is(err, quant.ErrArtifact), errors.Is(err, errDamagedObject):
		return RefuseArtifact
	case errors.Is(err, errArtifactMismatch):
		return RefuseMismatch
	}
	return RefuseFetch
}

var errArtifactMismatch = errors.New("flclient: artifact does not match")

// install verifies and installs a published model (the rules above); the
// previous model is kept as last known good. again marks a retry of a
// notice whose artifacts could not be fetched: failing to fetch them once
// more is not counted as another refusal.
func (c *Client) install(ctx context.Context, js jetstream.JetStream, n *federated.ModelNotice, again bool) error {
	var hwm quant.Floor
	if err := c.db.View(func(tx *bolt.Tx) error {
		var err error
		hwm, err = getMark(tx, keyModelHWM)
		return err
	}); err != nil {
		return err
	}
	switch {
	case n.Version < hwm.Version:
		return c.refuseModel(RefuseRollback, n.Version, fmt.Errorf("%w: the notice offers version %d, this site has installed version %d", quant.ErrRollback, n.Version, hwm.Version))
	case n.Version == hwm.Version && n.Int8Model != hwm.ModelID:
		return c.refuseModel(RefuseConflict, n.Version, fmt.Errorf("%w: version %d is model %s here, the notice names %s", quant.ErrRollback, n.Version, quant.ShortID(hwm.ModelID), quant.ShortID(n.Int8Model)))
	case n.Version == hwm.Version:
		return nil // installed already (a republished notice)
	}
	fctx, cancel := context.WithTimeout(ctx, c.cfg.PublishTimeout)
	defer cancel()
	q, qraw, err := c.fetchArtifact(fctx, js, n.Int8Object, n.Version, quant.Int8)
	if err == nil && q.Header.ModelID != n.Int8Model {
		err = fmt.Errorf("%w: int8 object holds model %s, the notice names %s", errArtifactMismatch, q.Header.ModelID, n.Int8Model)
	}
	var f *quant.Artifact
	var fraw []byte
	if err == nil {
		f, fraw, err = c.fetchArtifact(fctx, js, n.FloatObject, n.Version, quant.Float32)
	}
	if err == nil && f.Header.ModelID != n.FloatModel {
		err = fmt.Errorf("%w: float object holds model %s, the notice names %s", errArtifactMismatch, f.Header.ModelID, n.FloatModel)
	}
	if err != nil {
		if reason := artifactReason(err); reason != RefuseFetch || !again {
			return c.refuseModel(reason, n.Version, err)
		}
		// the same notice's artifacts out of reach again: counted once
		return &ModelRefusal{Reason: RefuseFetch, Version: n.Version, Err: err}
	}
	if err := quant.CheckFresh(&q.Header, c.now(), c.cfg.MaxModelAge); err != nil {
		return c.refuseModel(RefuseStale, n.Version, err)
	}
	for _, a := range []*quant.Artifact{q, f} {
		if err := sanity.CheckArtifact(a); err != nil {
			return c.refuseModel(RefuseSanity, n.Version, err)
		}
	}
	inst := Installed{Version: n.Version, Round: n.Round, Float: f.Header.ModelID, Int8: q.Header.ModelID, Installed: c.now().UTC()}
	var rollback error
	err = c.db.Update(func(tx *bolt.Tx) error {
		// the mark again, in the installing transaction
		cur, err := getMark(tx, keyModelHWM)
		if err != nil {
			return err
		}
		if rollback = quant.CheckNewer(&quant.Header{ModelID: cur.ModelID, Version: cur.Version}, &q.Header); rollback != nil {
			return rollback
		}
		mb := tx.Bucket(bucketModels)
		if prev := mb.Get(keyInstalled); prev != nil {
			if err := mb.Put(keyLKG, append([]byte(nil), prev...)); err != nil {
				return err
			}
		}
		raw, err := json.Marshal(inst)
		if err != nil {
			return err
		}
		if err := mb.Put(keyInstalled, raw); err != nil {
			return err
		}
		if err := mb.Put(blobKey(n.Version, quant.Float32), fraw); err != nil {
			return err
		}
		if err := mb.Put(blobKey(n.Version, quant.Int8), qraw); err != nil {
			return err
		}
		if err := putMark(tx, keyModelHWM, quant.Floor{Version: n.Version, ModelID: q.Header.ModelID}); err != nil {
			return err
		}
		pruneBlobs(mb, tx, n.Version)
		return bumpCounters(tx, func(k *Counters) { k.Installed++ })
	})
	if rollback != nil {
		return c.refuseModel(RefuseRollback, n.Version, rollback)
	}
	if err != nil {
		return fmt.Errorf("install model version %d: %w", n.Version, err)
	}
	c.log.Info("model installed", "version", n.Version, "int8", quant.ShortID(q.Header.ModelID))
	c.report()
	c.mu.Lock()
	hooks := append([]func(Installed){}, c.onModel...)
	c.mu.Unlock()
	for _, f := range hooks {
		f(inst)
	}
	return nil
}

// noteAnnouncement records the highest base version announced and when it
// was first seen (freeze detection).
func (c *Client) noteAnnouncement(a *federated.RoundAnnouncement) {
	err := c.db.Update(func(tx *bolt.Tx) error {
		m, err := getMark(tx, keyAnnounced)
		if err != nil || a.BaseVersion <= m.Version {
			return err
		}
		return putMark(tx, keyAnnounced, quant.Floor{Version: a.BaseVersion, Accepted: c.now().UTC()})
	})
	if err != nil {
		c.log.Error("record announced version", "err", err)
	}
}

// Freeze reasons (TrustStatus.Frozen).
const (
	// FrozenBehind: rounds train from a version this site has not been
	// able to install for longer than FreezeAfter.
	FrozenBehind = "behind_announcements"
	// FrozenAged: the installed model is older than MaxModelAge.
	FrozenAged = "model_too_old"
)

// Freeze describes a frozen model feed.
type Freeze struct {
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
	Detail string    `json:"detail"`
}

// TrustStatus is the site's model-trust state.
type TrustStatus struct {
	// HighestVersion is the highest model version ever installed (the
	// rollback floor); Announced the highest base version rounds named.
	HighestVersion uint64 `json:"highest_version"`
	HighestInt8    string `json:"highest_int8_model,omitempty"`
	Announced      uint64 `json:"announced_version"`
	// ModelCreated is the installed int8 model's signed creation time
	// (zero before the first install): the model's age is measured from
	// it.
	ModelCreated time.Time `json:"model_created,omitzero"`
	// Frozen is set while the model feed looks frozen.
	Frozen *Freeze `json:"frozen,omitempty"`
	// Trusted and Retired are ModelKeys' key IDs.
	Trusted []string `json:"trusted_keys"`
	Retired []string `json:"retired_keys,omitempty"`
}

// TrustStatus reads the model-trust state and evaluates the freeze rules
// at the client's clock.
func (c *Client) TrustStatus() (TrustStatus, error) {
	var s TrustStatus
	var hwm, ann quant.Floor
	var created time.Time
	err := c.db.View(func(tx *bolt.Tx) error {
		var err error
		if hwm, err = getMark(tx, keyModelHWM); err != nil {
			return err
		}
		if ann, err = getMark(tx, keyAnnounced); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return s, err
	}
	if _, a, err := c.installedArtifact(quant.Int8); err == nil {
		created = a.Header.Created
	}
	s.HighestVersion, s.HighestInt8, s.Announced, s.ModelCreated = hwm.Version, hwm.ModelID, ann.Version, created
	s.Trusted, s.Retired = c.cfg.ModelKeys.IDs(), c.cfg.ModelKeys.Retired()
	now := c.now()
	switch {
	case c.cfg.FreezeAfter > 0 && ann.Version > hwm.Version && now.Sub(ann.Accepted) > c.cfg.FreezeAfter:
		s.Frozen = &Freeze{Reason: FrozenBehind, Since: ann.Accepted.Add(c.cfg.FreezeAfter),
			Detail: fmt.Sprintf("rounds train from version %d since %s; this site runs version %d", ann.Version, ann.Accepted.Format(time.RFC3339), hwm.Version)}
	case c.cfg.MaxModelAge > 0 && !created.IsZero() && now.Sub(created) > c.cfg.MaxModelAge:
		s.Frozen = &Freeze{Reason: FrozenAged, Since: created.Add(c.cfg.MaxModelAge),
			Detail: fmt.Sprintf("version %d was created %s ago, the maximum age is %s", hwm.Version, now.Sub(created).Round(time.Second), c.cfg.MaxModelAge)}
	}
	return s, nil
}

// freezeLoop evaluates the freeze rules every StatePoll until ctx ends,
// logging and counting each freeze once, and its end.
func (c *Client) freezeLoop(ctx context.Context) {
	if c.cfg.FreezeAfter <= 0 && c.cfg.MaxModelAge <= 0 {
		return
	}
	t := time.NewTicker(c.cfg.StatePoll)
	defer t.Stop()
	frozen := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s, err := c.TrustStatus()
		if err != nil {
			c.log.Error("model trust status", "err", err)
			continue
		}
		switch {
		case s.Frozen != nil && frozen != s.Frozen.Reason:
			frozen = s.Frozen.Reason
			c.log.Error("model feed frozen", "reason", s.Frozen.Reason, "detail", s.Frozen.Detail)
			_ = c.db.Update(func(tx *bolt.Tx) error { return bumpCounters(tx, func(k *Counters) { k.Freezes++ }) })
			c.report()
		case s.Frozen == nil && frozen != "":
			frozen = ""
			c.log.Info("model feed moving again", "version", s.HighestVersion)
		}
	}
}
