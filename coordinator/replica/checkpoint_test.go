package replica_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator/replica"
)

// lossyKV applies an Update but loses its answer (a timeout) while lose
// is set, once.
type lossyKV struct {
	jetstream.KeyValue
	lose atomic.Bool
}

func (k *lossyKV) Update(ctx context.Context, key string, v []byte, rev uint64) (uint64, error) {
	r, err := k.KeyValue.Update(ctx, key, v, rev)
	if err == nil && k.lose.CompareAndSwap(true, false) {
		return 0, context.DeadlineExceeded
	}
	return r, err
}

// objects lists the checkpoint objects in the store.
func objects(t *testing.T, b *replica.Buckets) []string {
	t.Helper()
	infos, err := b.Obj.List(context.Background())
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range infos {
		names = append(names, i.Name)
	}
	slices.Sort(names)
	return names
}

// restored restores a's checkpoint and returns its bytes.
func restored(t *testing.T, a *replica.Active) ([]byte, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "coordinator.db")
	if err := a.RestoreTo(context.Background(), path); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

// leaseRevisions writes the lease bucket until its revisions reach n:
// epochs are lease revisions, and one the lease bucket has not reached is
// no later active's (TestFenceRefusesLaterEpoch).
func leaseRevisions(t *testing.T, b *replica.Buckets, n int) {
	t.Helper()
	for range n {
		if _, err := b.Lease.Put(context.Background(), "history", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
}

// TestShipNeverDropsClaimedCheckpoint: a checkpoint whose pointer update
// was applied though its answer was lost is what a new active claims
// (Fence copies the pointer) and restores. The deposed active retrying
// the same store generation stores another object, is refused, and
// removes only that object: the checkpoint the pointer names stays and
// restores (with one name per generation the retry overwrote it and then
// deleted it, and every later restore failed).
func TestShipNeverDropsClaimedCheckpoint(t *testing.T) {
	js, b, log := setup(t)
	ctx := context.Background()
	leaseRevisions(t, b, 2)
	lk := &lossyKV{KeyValue: b.HA}
	ab := *b
	ab.HA = lk
	deposed := 0
	a := replica.NewActive("a", 1, &ab, func() { deposed++ }, log)
	if _, err := a.Fence(ctx, js, false); err != nil {
		t.Fatal(err)
	}
	if err := a.Ship(ctx, 1, []byte("db-gen1"), replica.Floors{Update: 3}, time.Now()); err != nil {
		t.Fatal(err)
	}
	lk.lose.Store(true)
	if err := a.Ship(ctx, 2, []byte("db-gen2"), replica.Floors{Update: 7}, time.Now()); err == nil {
		t.Fatal("ship with its answer lost: no error")
	}
	claimed := pointer(t, ctx, b).Object // applied: generation 2
	// takeover
	nb := replica.NewActive("b", 2, b, func() {}, log)
	if _, err := nb.Fence(ctx, js, false); err != nil {
		t.Fatal(err)
	}
	// the deposed active retries the same generation
	err := a.Ship(ctx, 2, []byte("db-gen2"), replica.Floors{Update: 7}, time.Now())
	if !errors.Is(err, replica.ErrDeposed) || deposed != 1 {
		t.Fatalf("deposed active's retry: %v (deposed %d), want ErrDeposed", err, deposed)
	}
	got, err := restored(t, nb)
	if err != nil || string(got) != "db-gen2" {
		t.Fatalf("new active restores %s: %q, %v; want db-gen2", claimed, got, err)
	}
	if objs := objects(t, b); !slices.Equal(objs, []string{claimed}) {
		t.Errorf("objects %v, want only the claimed %s (the refused attempt's removed)", objs, claimed)
	}
}

// TestShipLostAnswerThenSuccess: an active whose pointer update was
// applied though its answer was lost builds on it at its next checkpoint
// and then removes the objects no pointer names any more: the store
// holds the newest checkpoint only.
func TestShipLostAnswerThenSuccess(t *testing.T) {
	js, b, log := setup(t)
	ctx := context.Background()
	lk := &lossyKV{KeyValue: b.HA}
	ab := *b
	ab.HA = lk
	a := replica.NewActive("a", 1, &ab, func() { t.Error("deposed") }, log)
	if _, err := a.Fence(ctx, js, false); err != nil {
		t.Fatal(err)
	}
	for gen, lose := range []bool{false, true, false, false} {
		lk.lose.Store(lose)
		err := a.Ship(ctx, uint64(gen+1), []byte("db"), replica.Floors{Update: uint64(gen)}, time.Now())
		if (err != nil) != lose {
			t.Fatalf("ship %d (answer lost %v): %v", gen+1, lose, err)
		}
	}
	p := pointer(t, ctx, b)
	if objs := objects(t, b); !slices.Equal(objs, []string{p.Object}) {
		t.Errorf("objects %v, want only the pointer's %s", objs, p.Object)
	}
	if p.Digest == "" || p.Bytes != 2 {
		t.Errorf("pointer %+v: want the object's size and digest", p)
	}
}

// TestFenceRefusesLaterEpoch: an active paused between taking the lease
// and its claim may find the pointer claimed by a later epoch: it must
// not take it (that would depose the legitimate active at its next
// checkpoint); it is deposed instead. An epoch above every revision the
// lease bucket has is not a later active's (the lease bucket was deleted
// and created again, starting its revisions over): it is claimed.
func TestFenceRefusesLaterEpoch(t *testing.T) {
	for _, tc := range []struct {
		name          string
		leaseRevs     int    // revisions the lease bucket has reached
		holder, older uint64 // epochs: the pointer's, the one that fences after
		refused       bool
	}{
		{"a later active's pointer", 12, 10, 5, true},
		{"an earlier active's pointer", 12, 5, 10, false},
		{"an epoch of a lease bucket since deleted", 3, 1000, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, b, log := setup(t)
			ctx := context.Background()
			leaseRevisions(t, b, tc.leaseRevs)
			holder := replica.NewActive("b", tc.holder, b, func() {}, log)
			if _, err := holder.Fence(ctx, js, false); err != nil {
				t.Fatal(err)
			}
			if err := holder.Ship(ctx, 1, []byte("db"), replica.Floors{}, time.Now()); err != nil {
				t.Fatal(err)
			}
			deposed := 0
			a := replica.NewActive("a", tc.older, b, func() { deposed++ }, log)
			took, err := a.Fence(ctx, js, false)
			p := pointer(t, ctx, b)
			if tc.refused {
				if !errors.Is(err, replica.ErrDeposed) || deposed != 1 || p.Epoch != tc.holder {
					t.Fatalf("fence of epoch %d: %v (deposed %d), pointer epoch %d; want ErrDeposed and the pointer left at %d", tc.older, err, deposed, p.Epoch, tc.holder)
				}
				if err := holder.Ship(ctx, 2, []byte("db2"), replica.Floors{}, time.Now()); err != nil {
					t.Fatalf("the later active's next checkpoint: %v", err)
				}
				return
			}
			if err != nil || !took || deposed != 0 || p.Epoch != tc.older {
				t.Fatalf("fence of epoch %d: took %v, %v (deposed %d), pointer epoch %d", tc.older, took, err, deposed, p.Epoch)
			}
		})
	}
}
