package replica_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator/replica"
)

// staleKV answers Get with the entry it holds (a follower of the bucket's
// stream answering a direct get from behind the leader), when it holds
// one.
type staleKV struct {
	jetstream.KeyValue
	stale jetstream.KeyValueEntry
}

func (k *staleKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if k.stale != nil {
		return k.stale, nil
	}
	return k.KeyValue.Get(ctx, key)
}

// TestCASPutStaleRead: a compare-and-set refused because someone else
// wrote the key (another replica took the lease once it expired) is
// refused, even when the read that looks for a lost write of its own is
// answered from behind (KV gets are direct gets, which any replica of
// the stream answers): the entry read is confirmed by a compare-and-set
// on its revision, never adopted as it is. Adopted, a stale read of the
// active's own earlier renewal (the lease's value is the same at every
// renewal) counted as a renewal: the deposed active kept acting as the
// active for up to three quarters of a TTL longer while the other
// replica held the lease. A write of its own whose answer was lost is
// still recognised.
func TestCASPutStaleRead(t *testing.T) {
	_, b, _ := setup(t)
	ctx := context.Background()
	ours := func(v []byte) bool { return string(v) == "a" }
	rev, err := b.Lease.Create(ctx, replica.LeaseKey, []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	// a renewal applied, its answer lost: recognised
	applied, err := b.Lease.Update(ctx, replica.LeaseKey, []byte("a"), rev)
	if err != nil {
		t.Fatal(err)
	}
	nrev, err := replica.CASPut(ctx, b.Lease, replica.LeaseKey, []byte("a"), rev, ours)
	if err != nil || nrev < applied {
		t.Fatalf("after a lost answer: revision %d, %v; want %d or later", nrev, err, applied)
	}
	// another replica holds the key; a read from behind shows ours
	old, err := b.Lease.Get(ctx, replica.LeaseKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lease.Put(ctx, replica.LeaseKey, []byte("b")); err != nil {
		t.Fatal(err)
	}
	kv := &staleKV{KeyValue: b.Lease, stale: old}
	got, err := replica.CASPut(ctx, kv, replica.LeaseKey, []byte("a"), rev, ours)
	if !replica.IsConflict(err) {
		t.Fatalf("compare-and-set over another replica's write, read from behind: revision %d, %v; want a conflict", got, err)
	}
	if e, err := b.Lease.Get(ctx, replica.LeaseKey); err != nil || string(e.Value()) != "b" {
		t.Fatalf("key after the refused write: %v, want the other replica's value", err)
	}
}

// TestFenceStaleRead: a new active's claim reads the checkpoint pointer
// from the HA bucket's leader. A KV get is a direct get, which the
// server the replica is connected to answers first: one catching up
// behind the leader (a takeover after a server was lost) showed an
// earlier pointer, whose revision every claim was refused on, and Fence
// asked again at once, without a pause, until the follower caught up
// (here: never, and the takeover did not complete). The claim copies the
// newest checkpoint.
func TestFenceStaleRead(t *testing.T) {
	js, b, log := setup(t)
	ctx := context.Background()
	leaseRevisions(t, b, 3)
	first := replica.NewActive("a", 1, b, func() {}, log)
	if _, err := first.Fence(ctx, js, false); err != nil {
		t.Fatal(err)
	}
	if err := first.Ship(ctx, 1, []byte("db1"), replica.Floors{Update: 4}, time.Now()); err != nil {
		t.Fatal(err)
	}
	old, err := b.HA.Get(ctx, replica.CheckpointKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Ship(ctx, 2, []byte("db2"), replica.Floors{Update: 7}, time.Now()); err != nil {
		t.Fatal(err)
	}
	behind := *b
	behind.HA = &staleKV{KeyValue: b.HA, stale: old}
	next := replica.NewActive("b", 2, &behind, func() {}, log)
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	took, err := next.Fence(fctx, js, false)
	if err != nil || !took {
		t.Fatalf("fence with a pointer read from behind: took %v, %v", took, err)
	}
	if p := pointer(t, ctx, b); p.Epoch != 2 || p.Floor != 7 || next.Floor() != 7 {
		t.Fatalf("claimed pointer %+v, new active's floor %d; want epoch 2 with the newest checkpoint's floor 7", p, next.Floor())
	}
	if data, err := restored(t, next); err != nil || string(data) != "db2" {
		t.Fatalf("restored %q, %v; want the newest checkpoint", data, err)
	}
}

// TestFenceDeletedPointer: a checkpoint pointer deleted by hand (nats kv
// del: a delete marker is its last message) is claimed as none: the
// claim is a compare-and-set on the marker's revision (a KV get answers
// not found, and a claim on revision 0 was refused, at once and for
// ever).
func TestFenceDeletedPointer(t *testing.T) {
	js, b, log := setup(t)
	ctx := context.Background()
	first := replica.NewActive("a", 1, b, func() {}, log)
	if _, err := first.Fence(ctx, js, false); err != nil {
		t.Fatal(err)
	}
	if err := b.HA.Delete(ctx, replica.CheckpointKey); err != nil {
		t.Fatal(err)
	}
	leaseRevisions(t, b, 2)
	next := replica.NewActive("b", 2, b, func() {}, log)
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := next.Fence(fctx, js, false); err != nil {
		t.Fatalf("fence over a deleted pointer: %v", err)
	}
	if p := pointer(t, ctx, b); p.Epoch != 2 || p.Object != "" {
		t.Fatalf("claimed pointer %+v, want epoch 2 without a checkpoint", p)
	}
}
