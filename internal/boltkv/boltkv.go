// Package boltkv holds the small bbolt conventions the coordinator's and
// the agent's stores share: big-endian uint64 keys and values, and opening
// a database with its buckets and a schema stamp checked in one
// transaction.
//
// The functions hold no state; a *bolt.DB they open belongs to the caller,
// who closes it.
package boltkv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrSchema is returned when a database was written by a build with
// another schema.
var ErrSchema = errors.New("boltkv: store schema mismatch")

// U64 encodes v as an 8-byte big-endian key or value (so keys sort
// numerically).
func U64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

// GetU64 reads an 8-byte big-endian value of b (0 when absent or not 8
// bytes).
func GetU64(b *bolt.Bucket, k []byte) uint64 { return FromU64(b.Get(k)) }

// FromU64 decodes an 8-byte big-endian key or value (0 when not 8 bytes).
func FromU64(v []byte) uint64 {
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// Open opens (creating it and its directory, mode 0700) the database at
// path with mode 0600, waiting at
// most 5 s for another process's lock, creates buckets, and stamps
// (first open) or checks schema under key schemaKey of the first bucket.
// what names the store in errors ("agent store").
func Open(path, what string, schemaKey []byte, schema string, buckets ...[]byte) (*bolt.DB, error) {
	if len(buckets) == 0 {
		return nil, fmt.Errorf("open %s: no buckets", what)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create %s directory: %w", what, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", what, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range buckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		m := tx.Bucket(buckets[0])
		switch v := m.Get(schemaKey); {
		case v == nil:
			return m.Put(schemaKey, []byte(schema))
		case string(v) != schema:
			return fmt.Errorf("%w: schema %q, this build reads %q", ErrSchema, v, schema)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s %s: %w", what, path, err)
	}
	return db, nil
}
