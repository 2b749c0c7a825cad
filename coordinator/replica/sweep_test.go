package replica_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator/replica"
)

var discard = slog.New(slog.DiscardHandler)

// hookObj calls its hooks, those that are set, around the object store's
// calls: a hook's error is the call's (afterPut's after the object is
// stored: its answer lost).
type hookObj struct {
	jetstream.ObjectStore
	afterPut     func(name string) error
	beforeList   func() error
	beforeDelete func(name string) error
}

func (o *hookObj) PutBytes(ctx context.Context, name string, data []byte) (*jetstream.ObjectInfo, error) {
	info, err := o.ObjectStore.PutBytes(ctx, name, data)
	if err == nil && o.afterPut != nil {
		err = o.afterPut(name)
	}
	return info, err
}

func (o *hookObj) List(ctx context.Context, opts ...jetstream.ListObjectsOpt) ([]*jetstream.ObjectInfo, error) {
	if o.beforeList != nil {
		if err := o.beforeList(); err != nil {
			return nil, err
		}
	}
	return o.ObjectStore.List(ctx, opts...)
}

func (o *hookObj) Delete(ctx context.Context, name string) error {
	if o.beforeDelete != nil {
		if err := o.beforeDelete(name); err != nil {
			return err
		}
	}
	return o.ObjectStore.Delete(ctx, name)
}

// withObj is b with its object store replaced by o.
func withObj(b *replica.Buckets, o jetstream.ObjectStore) *replica.Buckets {
	ob := *b
	ob.Obj = o
	return &ob
}

// putObjects stores an object of each name, as an attempt that never
// reached the pointer leaves it.
func putObjects(t *testing.T, b *replica.Buckets, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := b.Obj.PutBytes(context.Background(), n, []byte("leftover")); err != nil {
			t.Fatal(err)
		}
	}
}

// fencedActive is the active of epoch that claimed the pointer.
func fencedActive(t *testing.T, js jetstream.JetStream, b *replica.Buckets, epoch uint64) *replica.Active {
	t.Helper()
	a := replica.NewActive(fmt.Sprintf("r%d", epoch), epoch, b, func() { t.Errorf("epoch %d deposed", epoch) }, discard)
	if _, err := a.Fence(context.Background(), js, false); err != nil {
		t.Fatal(err)
	}
	return a
}

// ship takes a's checkpoint of generation gen (its bytes name it).
func ship(ctx context.Context, a *replica.Active, gen uint64) error {
	return a.Ship(ctx, gen, fmt.Appendf(nil, "db-gen%d", gen), replica.Floors{}, time.Now())
}

// wantObjects fails unless the store holds exactly want and the pointer's
// object.
func wantObjects(t *testing.T, b *replica.Buckets, why string, want ...string) {
	t.Helper()
	want = append(slices.Clone(want), pointer(t, context.Background(), b).Object)
	slices.Sort(want)
	if got := objects(t, b); !slices.Equal(got, want) {
		t.Fatalf("%s: objects %v, want %v", why, got, want)
	}
}

// TestSweepLeftoversAfterCrash: an active that crashes after storing a
// checkpoint object whose answer it lost (so it never names it anywhere)
// leaves the object behind; the next active's first checkpoint removes it,
// and an active's own leftover of an earlier generation goes with its
// next checkpoint (one of the same generation stays until then: it is
// not older than the checkpoint the pointer names). Without the sweep
// every such crash left an object in the store for ever.
func TestSweepLeftoversAfterCrash(t *testing.T) {
	js, b, _ := setup(t)
	ctx := context.Background()
	var lose atomic.Bool
	hb := withObj(b, &hookObj{ObjectStore: b.Obj, afterPut: func(string) error {
		if lose.CompareAndSwap(true, false) {
			return context.DeadlineExceeded
		}
		return nil
	}})
	a := fencedActive(t, js, hb, 1)
	if err := ship(ctx, a, 1); err != nil {
		t.Fatal(err)
	}
	lose.Store(true)
	if err := ship(ctx, a, 2); err == nil {
		t.Fatal("ship with the object's answer lost: no error")
	}
	// a crashes; the next active restores its last checkpoint
	nb := fencedActive(t, js, hb, 2)
	if got, err := restored(t, nb); err != nil || string(got) != "db-gen1" {
		t.Fatalf("restore: %q, %v; want db-gen1", got, err)
	}
	if err := ship(ctx, nb, 1); err != nil {
		t.Fatal(err)
	}
	wantObjects(t, b, "the next active's first checkpoint")
	if s := nb.TakeSweep(); s != (replica.Sweep{Removed: 1}) {
		t.Errorf("sweep %+v, want the earlier epoch's leftover removed", s)
	}
	lose.Store(true)
	if err := ship(ctx, nb, 2); err == nil {
		t.Fatal("ship with the object's answer lost: no error")
	}
	lost := slices.DeleteFunc(objects(t, b), func(n string) bool { return !strings.HasPrefix(n, "e2-g2-") })
	if err := ship(ctx, nb, 2); err != nil {
		t.Fatal(err)
	}
	wantObjects(t, b, "a retry of the same generation", lost...)
	if err := ship(ctx, nb, 3); err != nil {
		t.Fatal(err)
	}
	wantObjects(t, b, "the next generation")
	if s := nb.TakeSweep(); s != (replica.Sweep{Removed: 1}) {
		t.Errorf("sweep %+v, want this epoch's earlier generation's leftover removed", s)
	}
}

// TestSweepWhichObjects: after a checkpoint of epoch 5 at generation 4 the
// sweep removes the objects of earlier epochs (of either name format) and
// of earlier generations of epoch 5, and leaves a later epoch's (a
// successor's), epoch 5's of this generation or a later one, and every
// name that does not parse as a checkpoint object's.
func TestSweepWhichObjects(t *testing.T) {
	js, b, _ := setup(t)
	ctx := context.Background()
	const nonce = "00000000000000ff"
	removed := []string{"e4-g9-" + nonce + ".db", "e1-g1.db", "e5-g3-" + nonce + ".db", "e5-g0-0123456789abcdef.db"}
	kept := []string{
		"e9-g1-" + nonce + ".db", "e6-g1.db", // later epochs
		"e5-g4-" + nonce + ".db", "e5-g7-" + nonce + ".db", // this generation's other attempt, a later one
		"notes.txt", "e04-g1-" + nonce + ".db", "e4-g01.db", "e4-g1-00000000000000FF.db", "e4-g1-ff.db",
		"e0-g1.db", "e4-g1.db.tmp", "E4-g1.db", "e4-g-1.db", "e4-g1-" + nonce + "-x.db", "e-4-g1.db", "e4g1.db",
	}
	a := fencedActive(t, js, b, 5)
	putObjects(t, b, append(slices.Clone(removed), kept...)...)
	if err := ship(ctx, a, 4); err != nil {
		t.Fatal(err)
	}
	wantObjects(t, b, "after the sweep", kept...)
	if s := a.TakeSweep(); s != (replica.Sweep{Removed: len(removed)}) {
		t.Errorf("sweep %+v, want %d removed", s, len(removed))
	}
	if s := a.TakeSweep(); s != (replica.Sweep{}) {
		t.Errorf("second TakeSweep %+v, want nothing", s)
	}
}

// TestSweepStopsWhenPointerMoves: a later active may claim the pointer
// between this active's checkpoint and its sweep, and checkpoint at once,
// its object's name older than every leftover's (its epoch started over
// with a lease bucket created again). The sweep reads the pointer before
// each removal and stops: the object the pointer names, and the rest,
// stay.
func TestSweepStopsWhenPointerMoves(t *testing.T) {
	js, b, _ := setup(t)
	ctx := context.Background()
	leftovers := []string{"e3-g1-00000000000000aa.db", "e4-g1-00000000000000bb.db"}
	var once atomic.Bool
	ho := &hookObj{ObjectStore: b.Obj}
	ho.beforeList = func() error {
		if once.CompareAndSwap(false, true) {
			if err := ship(ctx, fencedActive(t, js, b, 2), 1); err != nil {
				return err
			}
		}
		return nil
	}
	deleted := 0
	ho.beforeDelete = func(string) error { deleted++; return nil }
	a := fencedActive(t, js, withObj(b, ho), 5)
	putObjects(t, b, leftovers...)
	if err := ship(ctx, a, 1); err != nil {
		t.Fatal(err)
	}
	p := pointer(t, ctx, b)
	if p.Epoch != 2 || !strings.HasPrefix(p.Object, "e2-g1-") {
		t.Fatalf("pointer %+v, want the later active's checkpoint", p)
	}
	wantObjects(t, b, "the pointer moved before the sweep", leftovers...)
	if s := a.TakeSweep(); s != (replica.Sweep{}) || deleted != 0 {
		t.Errorf("sweep %+v, %d removals; want none", s, deleted)
	}
}

// TestSweepLimit: a sweep removes at most SweepLimit leftovers, the
// oldest first; the next checkpoint's sweep removes the rest.
func TestSweepLimit(t *testing.T) {
	js, b, _ := setup(t)
	ctx := context.Background()
	var leftovers []string
	for g := range replica.SweepLimit + 5 {
		leftovers = append(leftovers, fmt.Sprintf("e1-g%d-%016x.db", g+1, g))
	}
	a := fencedActive(t, js, b, 2)
	putObjects(t, b, leftovers...)
	if err := ship(ctx, a, 1); err != nil {
		t.Fatal(err)
	}
	wantObjects(t, b, "the first sweep", leftovers[replica.SweepLimit:]...)
	if s := a.TakeSweep(); s.Removed != replica.SweepLimit {
		t.Errorf("first sweep %+v, want %d removed", s, replica.SweepLimit)
	}
	if err := ship(ctx, a, 2); err != nil {
		t.Fatal(err)
	}
	wantObjects(t, b, "the second sweep")
	if s := a.TakeSweep(); s.Removed != 5 {
		t.Errorf("second sweep %+v, want 5 removed", s)
	}
}

// TestSweepFailures: a sweep's failures (a listing, a removal) and its
// context's end never fail the checkpoint: the pointer names it, a
// failure is counted, and what was not removed stays for the next sweep.
func TestSweepFailures(t *testing.T) {
	leftovers := []string{"e1-g1-0000000000000001.db", "e1-g2-0000000000000002.db", "e1-g3-0000000000000003.db"}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name   string
		list   error
		delete map[string]error // by leftover; context.Canceled: ctx ends
		kept   []string
		want   replica.Sweep
	}{
		{"the listing fails", boom, nil, leftovers, replica.Sweep{Failed: 1}},
		{"a removal fails", nil, map[string]error{leftovers[1]: boom}, leftovers[1:2], replica.Sweep{Removed: 2, Failed: 1}},
		{"the context ends", nil, map[string]error{leftovers[1]: context.Canceled}, leftovers[1:], replica.Sweep{Removed: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, b, _ := setup(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ho := &hookObj{ObjectStore: b.Obj}
			a := fencedActive(t, js, withObj(b, ho), 2)
			putObjects(t, b, leftovers...)
			ho.beforeList = func() error { return tc.list }
			ho.beforeDelete = func(name string) error {
				err := tc.delete[name]
				if errors.Is(err, context.Canceled) {
					cancel()
				}
				return err
			}
			if err := ship(ctx, a, 1); err != nil {
				t.Fatalf("checkpoint: %v, want it taken whatever the sweep", err)
			}
			wantObjects(t, b, "after the sweep", tc.kept...)
			if s := a.TakeSweep(); s != tc.want {
				t.Errorf("sweep %+v, want %+v", s, tc.want)
			}
		})
	}
}
