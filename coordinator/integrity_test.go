package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
)

// TestMigrateSchema1: a store written before records had checksums
// (schema "1": plain JSON records, updates stored as JSON {header,
// payload}) opens: every record is migrated, the round under way keeps
// its accepted update and aggregates it, and the store says the current
// schema (store.SchemaVersion).
// The old layout is made here from a current store by undoing each
// change, record by record.
func TestMigrateSchema1(t *testing.T) {
	ctx := context.Background()
	u := newUnit(t, 1)
	// schema 1 knew no summing rounds: its rounds stored every payload
	u.c.cfg.StorePayloads = true
	r, err := u.c.StartRound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ack, err := u.c.Process(ctx, u.update(t, "site-a", 1, r)); err != nil || ack.Status != federated.Accepted {
		t.Fatalf("%+v %v", ack, err)
	}
	cfg := u.c.cfg
	path := u.c.path
	u.c.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		strip := func(bucket []byte) error {
			b := tx.Bucket(bucket)
			return b.ForEach(func(k, v []byte) error {
				return b.Put(append([]byte(nil), k...), append([]byte(nil), v[:len(v)-4]...))
			})
		}
		for _, b := range [][]byte{store.BucketRounds, store.BucketSites, store.BucketModels, store.BucketAudit, store.BucketJudged} {
			if err := strip(b); err != nil {
				return err
			}
		}
		rb := tx.Bucket(store.BucketUpdates).Bucket(u64(r.Round))
		return rb.ForEach(func(k, v []byte) error {
			s, err := store.DecodeStoredUpdate(v, "x")
			if err != nil {
				return err
			}
			old, _ := json.Marshal(struct {
				Header  federated.UpdateHeader `json:"header"`
				Payload []byte                 `json:"payload"`
			}{federated.UpdateHeader{V: 1, Site: s.Site, Seq: s.Seq, Round: s.Round, BaseModel: s.BaseModel, BaseVersion: s.BaseVersion, Samples: s.Samples}, s.Payload})
			if err := rb.Put(append([]byte(nil), k...), old); err != nil {
				return err
			}
			return tx.Bucket(store.BucketMeta).Put(store.KeySchema, []byte("1"))
		})
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CheckStoreFile(path, nil); !errors.Is(err, ErrStore) {
		t.Fatalf("check of a schema 1 store: %v, want ErrStore (a coordinator migrates it)", err)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("open a schema 1 store: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	rr, err := c.RoundRecord(r.Round)
	if err != nil || rr.Accepted != 1 || rr.MaxNorm != cfg.MaxUpdateNorm {
		t.Fatalf("migrated round %+v %v", rr, err)
	}
	if err := c.CloseRound(ctx, r.Round); err != nil {
		t.Fatal(err)
	}
	if rr, _ = c.RoundRecord(r.Round); rr.State != StatePublished || rr.Stats["updates"] != 1 {
		t.Fatalf("round after migration: %+v", rr)
	}
	var schema string
	_ = c.view(func(tx *bolt.Tx) error { schema = string(tx.Bucket(store.BucketMeta).Get(store.KeySchema)); return nil })
	if schema != store.SchemaVersion {
		t.Fatalf("schema %q after migration", schema)
	}
}

// TestMigrateSchema2: a schema "2" store (before summing rounds: no sums
// bucket, every round keeps its payloads) opens as schema "3": its round
// under way keeps its accepted update and aggregates it. A store of a
// schema this build does not know ("4") is refused, naming both schemas.
func TestMigrateSchema2(t *testing.T) {
	ctx := context.Background()
	u := newUnit(t, 1)
	u.c.cfg.StorePayloads = true // schema 2 rounds stored every payload
	r, err := u.c.StartRound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ack, err := u.c.Process(ctx, u.update(t, "site-a", 1, r)); err != nil || ack.Status != federated.Accepted {
		t.Fatalf("%+v %v", ack, err)
	}
	cfg, path := u.c.cfg, u.c.path
	u.c.Close()
	setSchema := func(v string, dropSums bool) {
		t.Helper()
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bolt.Tx) error {
			if dropSums {
				if err := tx.DeleteBucket(store.BucketSums); err != nil {
					return err
				}
			}
			return tx.Bucket(store.BucketMeta).Put(store.KeySchema, []byte(v))
		})
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	setSchema("2", true)
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("open a schema 2 store: %v", err)
	}
	if rr, err := c.RoundRecord(r.Round); err != nil || rr.Accepted != 1 {
		t.Fatalf("round after migration: %+v %v", rr, err)
	}
	if err := c.CloseRound(ctx, r.Round); err != nil {
		t.Fatal(err)
	}
	if rr, _ := c.RoundRecord(r.Round); rr.State != StatePublished || rr.Stats["updates"] != 1 {
		t.Fatalf("round after migration: %+v", rr)
	}
	var schema string
	_ = c.view(func(tx *bolt.Tx) error { schema = string(tx.Bucket(store.BucketMeta).Get(store.KeySchema)); return nil })
	if schema != "3" || store.SchemaVersion != "3" {
		t.Fatalf("schema %q after migration (this build: %q)", schema, store.SchemaVersion)
	}
	c.Close()
	setSchema("4", false)
	if _, err := New(cfg); !errors.Is(err, ErrStore) || !strings.Contains(err.Error(), `schema "4", this build reads "3"`) {
		t.Fatalf("open a schema 4 store: %v", err)
	}
}
