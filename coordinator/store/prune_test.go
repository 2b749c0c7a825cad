package store

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgesched/edgesched/federated"
	bolt "go.etcd.io/bbolt"
)

// TestPruneRounds: the records of rounds before the cutoff go; the noised
// ones among them (published with a DP epsilon) are counted first, and so
// is one that does not decode (an overstated privacy loss, never an
// understated one), so NoisedRounds is the same before and after.
func TestPruneRounds(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "c.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// rounds 1-6: 1, 2, 4 and 6 noised, 3 failed, 5 published without
	// noise; round 2's record damaged (its noise is counted anyway)
	noised := map[uint64]bool{1: true, 2: true, 4: true, 6: true}
	var before, after uint64
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{BucketMeta, BucketRounds} {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		for n := uint64(1); n <= 6; n++ {
			now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
			r := &Round{Round: n, Mode: federated.Sync, State: StatePublished, Result: n + 1, BaseModel: strings.Repeat("ab", 32), BaseVersion: n,
				Opened: now, Deadline: now.Add(time.Minute), MinUpdates: 1}
			if n == 3 {
				r.State, r.Result = StateFailed, 0
			}
			if noised[n] {
				r.Stats = map[string]float64{"dp_epsilon": 0.5}
			}
			if err := PutRound(tx, r); err != nil {
				return err
			}
		}
		if err := tx.Bucket(BucketRounds).Put(u64(2), []byte("damaged")); err != nil {
			return err
		}
		before = NoisedRounds(tx) // round 2 unreadable: 3 counted
		if err := PruneRounds(tx, 4); err != nil {
			return err
		}
		after = NoisedRounds(tx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if before != 3 || after != 4 {
		t.Fatalf("noised rounds %d before pruning rounds 1-3 and %d after, want 3 (the damaged record left out) and 4 (counted when pruned)", before, after)
	}
	if err := db.View(func(tx *bolt.Tx) error {
		for n := uint64(1); n <= 6; n++ {
			if kept := tx.Bucket(BucketRounds).Get(u64(n)) != nil; kept != (n >= 4) {
				t.Errorf("round %d kept %v, want %v", n, kept, n >= 4)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestPruneRoundsBounded: one call drops at most pruneRoundsMax records,
// the oldest first (a store that kept every round, upgraded, catches up
// over later rounds rather than in one transaction).
func TestPruneRoundsBounded(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "c.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const n = pruneRoundsMax + pruneRoundsMax/2
	left := func(tx *bolt.Tx) (count int, first uint64) {
		c := tx.Bucket(BucketRounds).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if count == 0 {
				first = getU64Key(k)
			}
			count++
		}
		return count, first
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{BucketMeta, BucketRounds} {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		for r := uint64(1); r <= n; r++ {
			if err := tx.Bucket(BucketRounds).Put(u64(r), []byte("undecodable: counted as noised")); err != nil {
				return err
			}
		}
		for i, want := range []struct {
			count int
			first uint64
			dp    uint64
		}{{n - pruneRoundsMax, pruneRoundsMax + 1, pruneRoundsMax}, {1, n, n - 1}} {
			if err := PruneRounds(tx, n); err != nil {
				return err
			}
			if count, first := left(tx); count != want.count || first != want.first || NoisedRounds(tx) != want.dp {
				t.Errorf("call %d: %d records left from round %d, %d counted noised; want %d from %d, %d", i+1, count, first, NoisedRounds(tx), want.count, want.first, want.dp)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
