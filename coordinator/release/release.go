package release

import (
	"context"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/internal/boltkv"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/sanity"
)

// Error is a failure to make a model version that retrying cannot mend
// (the same model meets it again): a round whose aggregate it is fails
// with Reason (a store.FailReason* value).
type Error struct {
	Reason string
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Maker makes model versions.
type Maker struct {
	// Signer signs both artifacts.
	Signer *quant.Signer
	// Calibrate returns the raw feature rows m is quantized on and
	// checked against.
	Calibrate   func(ctx context.Context, m *nn.Model) ([]float32, error)
	Calibration quant.CalibrationOptions
	// AutoPublish: a round's version is pending publication at once;
	// otherwise it waits as a candidate (a version of no round is pending
	// either way).
	AutoPublish bool
}

// Version is a new model version, quantized and signed, not yet stored.
type Version struct {
	Rec         *store.Model
	Float, Int8 []byte // the signed artifacts
}

// Make makes m model version version: its float32 artifact, then its int8
// artifact calibrated on the rows of Calibrate, quantized, checked
// (quant/sanity), both signed, and its registry record (round: the round
// it aggregates, 0 for none; parent: the model it comes from). A model
// that cannot be made is an *Error; a cancelled ctx is returned as it is.
func (mk *Maker) Make(ctx context.Context, m *nn.Model, version, round uint64, parent string, created time.Time, note string) (*Version, error) {
	// Both artifacts carry m's input bounds (policy.Schema.Lo, Hi), which
	// an aggregate keeps from the version it was made from (the model the
	// federation started with): calibration, quantization and the check
	// see the inputs held within them, as every scorer of the version will.
	info := quant.Info{Version: version, Round: round, Parent: parent, Created: created, Metrics: map[string]float64{"round": float64(round)}}
	fa, err := quant.FromModel(m.Float(), info)
	if err != nil {
		return nil, &Error{store.FailReasonNonFinite, fmt.Errorf("model version %d: %w", version, err)}
	}
	fb, err := fa.Encode(mk.Signer)
	if err != nil {
		return nil, &Error{store.FailReasonNonFinite, fmt.Errorf("model version %d: %w", version, err)}
	}
	rows, err := mk.Calibrate(ctx, m)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &Error{store.FailReasonCalibrate, fmt.Errorf("calibrate model version %d: %w", version, err)}
	}
	info.Parent = fa.Header.ModelID
	qa, err := quant.Quantize(m.Float(), rows, mk.Calibration, info)
	if err != nil {
		return nil, &Error{store.FailReasonQuantize, fmt.Errorf("quantize model version %d: %w", version, err)}
	}
	if err := sanity.Check(qa, rows); err != nil {
		return nil, &Error{store.FailReasonSanity, fmt.Errorf("model version %d: %w", version, err)}
	}
	qb, err := qa.Encode(mk.Signer)
	if err != nil {
		return nil, &Error{store.FailReasonQuantize, fmt.Errorf("model version %d: %w", version, err)}
	}
	rec := &store.Model{Version: version, Round: round, Status: store.ModelPending, FloatModel: fa.Header.ModelID, Int8Model: qa.Header.ModelID, Parent: parent, Created: created.UTC(), Note: note}
	if !mk.AutoPublish && round > 0 {
		rec.Status = store.ModelCandidate
	}
	return &Version{Rec: rec, Float: fb, Int8: qb}, nil
}

// Next is the version a model made now gets.
func Next(tx *bolt.Tx) uint64 {
	return boltkv.GetU64(tx.Bucket(store.BucketMeta), store.KeyVersion) + 1
}

// Put stores v in tx as the next version (an ErrStore error when it is
// not) and audits it (auditKeep: audit events kept, 0: all).
func Put(tx *bolt.Tx, v *Version, now time.Time, auditKeep int) error {
	rec := v.Rec
	if next := Next(tx); next != rec.Version {
		return fmt.Errorf("%w: model version %d prepared, %d is next", store.ErrStore, rec.Version, next)
	}
	if err := store.PutModel(tx, rec); err != nil {
		return err
	}
	bl := tx.Bucket(store.BucketBlobs)
	if err := bl.Put(store.BlobKey(rec.Version, quant.Float32), v.Float); err != nil {
		return err
	}
	if err := bl.Put(store.BlobKey(rec.Version, quant.Int8), v.Int8); err != nil {
		return err
	}
	if err := tx.Bucket(store.BucketMeta).Put(store.KeyVersion, boltkv.U64(rec.Version)); err != nil {
		return err
	}
	return store.Audit(tx, now, auditKeep, "model.stored", rec.Round, "", fmt.Sprintf("version %d (%s) float %s int8 %s", rec.Version, rec.Note, quant.ShortID(rec.FloatModel), quant.ShortID(rec.Int8Model)))
}

// Artifacts returns copies of stored version version's float32 and int8
// artifacts (empty when missing), to be used after tx.
func Artifacts(tx *bolt.Tx, version uint64) (float, int8 []byte) {
	bl := tx.Bucket(store.BucketBlobs)
	float = append([]byte(nil), bl.Get(store.BlobKey(version, quant.Float32))...)
	int8 = append([]byte(nil), bl.Get(store.BlobKey(version, quant.Int8))...)
	return float, int8
}

// LoadFloat decodes stored version version's float32 artifact into a
// model: signed by own, or before a key rotation by a key of other (nil:
// none). A missing or foreign artifact is an ErrStore error.
func LoadFloat(tx *bolt.Tx, version uint64, own *quant.Signer, other *quant.Keyring) (*nn.Model, error) {
	raw := tx.Bucket(store.BucketBlobs).Get(store.BlobKey(version, quant.Float32))
	if raw == nil {
		return nil, fmt.Errorf("%w: no float artifact for version %d", store.ErrStore, version)
	}
	keys := &quant.Keyring{}
	if _, err := keys.Add(own.Public()); err != nil {
		return nil, err
	}
	a, err := quant.Decode(raw, quant.DecodeOptions{Keys: keys})
	if errors.Is(err, quant.ErrUnknownKey) && other != nil {
		// signed before a key rotation
		a, err = quant.Decode(raw, quant.DecodeOptions{Keys: other})
	}
	if err != nil {
		return nil, fmt.Errorf("%w: version %d: %v", store.ErrStore, version, err)
	}
	return nn.FromArtifact(a)
}

// ObjectName names a model version's artifact of dtype in the model
// object store.
func ObjectName(version uint64, dtype string) string {
	return fmt.Sprintf("v%06d.%s.esa", version, dtype)
}
