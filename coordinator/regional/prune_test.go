package regional_test

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/regional"
)

// TestPrune: the verdicts of rounds before the cutoff go, accepted
// (round+region) and refused (round+region+0+digest) alike, for every
// region; the cutoff's round and later stay. A store without the bucket
// (no regional aggregate ever judged) is left as it is.
func TestPrune(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "c.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error { return regional.Prune(tx, 5) }); err != nil {
		t.Fatalf("prune without the bucket: %v", err)
	}
	keyOf := func(round uint64, region string, digest uint64) []byte {
		k := append(binary.BigEndian.AppendUint64(nil, round), region...)
		if digest != 0 {
			k = binary.BigEndian.AppendUint64(append(k, 0), digest)
		}
		return k
	}
	name := func(k []byte) string {
		s := fmt.Sprintf("%d/%s", binary.BigEndian.Uint64(k), k[8:min(len(k), 10)])
		if len(k) > 10 {
			s += "/refused"
		}
		return s
	}
	var want []string
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(regional.Bucket)
		if err != nil {
			return err
		}
		for round := uint64(1); round <= 6; round++ {
			for _, region := range []string{"eu", "us"} {
				for _, k := range [][]byte{keyOf(round, region, 0), keyOf(round, region, 0xabc1), keyOf(round, region, 0xdef3)} {
					if err := b.Put(k, []byte("verdict")); err != nil {
						return err
					}
					if round >= 4 {
						want = append(want, name(k))
					}
				}
			}
		}
		return regional.Prune(tx, 4)
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(regional.Bucket).ForEach(func(k, _ []byte) error { got = append(got, name(k)); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("after pruning before round 4: %v, want %v", got, want)
	}
}
