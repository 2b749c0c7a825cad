package flclient

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/internal/boltkv"
)

// bbolt layout (agent.db): every change is one transaction.
var (
	bucketMeta   = []byte("meta")   // schema, next sequence, last trained round, residual, counters
	bucketOutbox = []byte("outbox") // sequence (uint64 BE) -> signed update message
	bucketModels = []byte("models") // "installed" / "lkg" -> Installed JSON; "blob/<version>/<dtype>" -> artifact

	keySchema    = []byte("schema")
	keySeq       = []byte("seq")        // last sequence used
	keySeqFloor  = []byte("seqfloor")   // the coordinator's high-water mark, from a replay's ack: sequences continue above it
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
	DroppedFull   int            `json:"dropped_full"`
	Accepted      int            `json:"accepted"`
	Duplicate     int            `json:"duplicate"`
	Rejected      map[string]int `json:"rejected,omitempty"`
	Installed     int            `json:"installed"`
	RefusedModels int            `json:"refused_models"`
	// RefusedModelReasons counts refused models by reason (trust.go's
	// Refuse* constants); LastRefusal is the newest refusal.
	RefusedModelReasons map[string]int `json:"refused_model_reasons,omitempty"`
	LastRefusal         string         `json:"last_refusal,omitempty"`
	// Freezes counts the times the model feed was found frozen.
	Freezes int `json:"freezes,omitempty"`
	// SequenceCatchUps counts replay acks that moved this store's
	// sequence up to the coordinator's high-water mark (federated.Ack.HWM:
	// the store had lost its sequence).
	SequenceCatchUps int    `json:"sequence_catch_ups,omitempty"`
	PublishFailures  int    `json:"publish_failures"`
	LastPublishError string `json:"last_publish_error,omitempty"`
}

// Installed describes an installed model.
type Installed struct {
	Version   uint64    `json:"version"`
	Round     uint64    `json:"round"`
	Float     string    `json:"float_model"`
	Int8      string    `json:"int8_model"`
	Installed time.Time `json:"installed"`
}

// u64 and getU64 are the stores' big-endian uint64 keys and values.
var u64, getU64 = boltkv.U64, boltkv.GetU64

func openStore(path string) (*bolt.DB, error) {
	db, err := boltkv.Open(path, "agent store", keySchema, schemaVersion, bucketMeta, bucketOutbox, bucketModels)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStore, err)
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
