package flclient

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bbolt layout (agent.db): every change is one transaction.
var (
	bucketMeta   = []byte("meta")   // schema, next sequence, last trained round, residual, counters
	bucketOutbox = []byte("outbox") // sequence (uint64 BE) -> signed update message
	bucketModels = []byte("models") // "installed" / "lkg" -> Installed JSON; "blob/<version>/<dtype>" -> artifact

	keySchema    = []byte("schema")
	keySeq       = []byte("seq")        // last sequence used
	keyRound     = []byte("round")      // last round trained
	keyResidual  = []byte("residual")   // error-feedback residual (float32 LE)
	keyInstalled = []byte("installed")  // Installed JSON
	keyLKG       = []byte("lkg")        // last known good before it
	keyCounters  = []byte("counters")   // Counters JSON
	keyTrained   = []byte("trainedver") // model version the last update was trained from
)

const schemaVersion = "1"

// ErrStore wraps a damaged or foreign agent database.
var ErrStore = errors.New("flclient: bad store")

// Counters are the agent's durable event counts.
type Counters struct {
	Trained   int `json:"trained"`
	Published int `json:"published"`
	// DroppedFull counts updates dropped because the outbox was full
	// (drop-oldest policy) or not made (refuse-new policy).
	DroppedFull      int            `json:"dropped_full"`
	Accepted         int            `json:"accepted"`
	Duplicate        int            `json:"duplicate"`
	Rejected         map[string]int `json:"rejected,omitempty"`
	Installed        int            `json:"installed"`
	RefusedModels    int            `json:"refused_models"`
	PublishFailures  int            `json:"publish_failures"`
	LastPublishError string         `json:"last_publish_error,omitempty"`
}

// Installed describes an installed model.
type Installed struct {
	Version   uint64    `json:"version"`
	Round     uint64    `json:"round"`
	Float     string    `json:"float_model"`
	Int8      string    `json:"int8_model"`
	Installed time.Time `json:"installed"`
}

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

func getU64(b *bolt.Bucket, k []byte) uint64 {
	v := b.Get(k)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func openStore(path string) (*bolt.DB, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open agent store: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketOutbox, bucketModels} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		m := tx.Bucket(bucketMeta)
		switch v := m.Get(keySchema); {
		case v == nil:
			return m.Put(keySchema, []byte(schemaVersion))
		case string(v) != schemaVersion:
			return fmt.Errorf("%w: schema %q, this build reads %q", ErrStore, v, schemaVersion)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open agent store %s: %w", path, err)
	}
	return db, nil
}

func getCounters(tx *bolt.Tx) (Counters, error) {
	var c Counters
	if raw := tx.Bucket(bucketMeta).Get(keyCounters); raw != nil {
		if err := json.Unmarshal(raw, &c); err != nil {
			return c, fmt.Errorf("%w: counters: %v", ErrStore, err)
		}
	}
	return c, nil
}

// bumpCounters applies f to the durable counters in tx.
func bumpCounters(tx *bolt.Tx, f func(*Counters)) error {
	c, err := getCounters(tx)
	if err != nil {
		return err
	}
	f(&c)
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketMeta).Put(keyCounters, raw)
}

func floatsBytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func bytesFloats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func blobKey(version uint64, dtype string) []byte {
	return []byte(fmt.Sprintf("blob/%020d/%s", version, dtype))
}
