package boltkv

import (
	"errors"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func TestU64SortsNumerically(t *testing.T) {
	// 255 < 256 numerically; big-endian bytes keep that order.
	a, b := U64(255), U64(256)
	if string(a) >= string(b) || FromU64(a) != 255 || FromU64(b) != 256 || FromU64([]byte{1}) != 0 {
		t.Fatalf("U64/FromU64: %x %x", a, b)
	}
}

func TestOpenStampsAndChecksSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	meta, data, key := []byte("meta"), []byte("data"), []byte("schema")
	db, err := Open(path, "test store", key, "v1", meta, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(data).Put(U64(7), U64(42)) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(path, "test store", key, "v2", meta, data); !errors.Is(err, ErrSchema) {
		t.Fatalf("other schema: %v, want ErrSchema", err)
	}
	db, err = Open(path, "test store", key, "v1", meta, data)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		if got := GetU64(tx.Bucket(data), U64(7)); got != 42 {
			t.Fatalf("value survived reopen: %d", got)
		}
		return nil
	})
	if _, err := Open(filepath.Join(t.TempDir(), "y.db"), "test store", key, "v1"); err == nil {
		t.Fatal("no buckets: want an error")
	}
}
