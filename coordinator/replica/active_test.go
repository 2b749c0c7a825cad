package replica_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator/replica"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
)

// setup is a JetStream context on an embedded server of its own with
// the buckets of high availability open.
func setup(t *testing.T) (jetstream.JetStream, *replica.Buckets, *slog.Logger) {
	t.Helper()
	js, err := jetstream.New(fltest.Connect(t, fltest.StartNATS(t).ClientURL(), t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	b, err := replica.OpenBuckets(context.Background(), js, 4*time.Second, 1, 1, log)
	if err != nil {
		t.Fatal(err)
	}
	return js, b, log
}

func pointer(t *testing.T, ctx context.Context, b *replica.Buckets) replica.Checkpoint {
	t.Helper()
	e, err := b.HA.Get(ctx, replica.CheckpointKey)
	if err != nil {
		t.Fatal(err)
	}
	p, err := replica.DecodeCheckpoint(e.Value())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestShipFloors: each checkpoint records the floors of both streams the
// root consumes; a floor never goes down (a consumer just created, or
// not yet, reports less than what the previous checkpoint holds); a new
// active reads them back from the pointer it claims, and a deposed
// active's checkpoint is refused.
func TestShipFloors(t *testing.T) {
	js, b, log := setup(t)
	ctx := context.Background()
	deposed := 0
	a := replica.NewActive("a", 1, b, func() { deposed++ }, log)
	if took, err := a.Fence(ctx, js, true); err != nil || took {
		t.Fatalf("first fence: took %v, %v; want a first active", took, err)
	}
	for i, tc := range []struct {
		ship replica.Floors
		want replica.Floors // in the pointer
	}{
		{replica.Floors{Update: 5, Regional: 3}, replica.Floors{Update: 5, Regional: 3}},
		{replica.Floors{Update: 4, Regional: 0}, replica.Floors{Update: 5, Regional: 3}}, // never down
		{replica.Floors{Update: 9, Regional: 7}, replica.Floors{Update: 9, Regional: 7}},
	} {
		if err := a.Ship(ctx, uint64(i+1), []byte("db"), tc.ship, time.Now()); err != nil {
			t.Fatalf("ship %d: %v", i+1, err)
		}
		p := pointer(t, ctx, b)
		if got := (replica.Floors{Update: p.Floor, Regional: p.Regional}); got != tc.want || a.Floor() != tc.want.Update || a.RegionalFloor() != tc.want.Regional {
			t.Fatalf("ship %d of %+v: pointer %+v, active %d/%d; want %+v", i+1, tc.ship, got, a.Floor(), a.RegionalFloor(), tc.want)
		}
	}
	next := replica.NewActive("b", 2, b, func() {}, log)
	if took, err := next.Fence(ctx, js, true); err != nil || !took {
		t.Fatalf("takeover fence: took %v, %v", took, err)
	}
	if next.Floor() != 9 || next.RegionalFloor() != 7 {
		t.Fatalf("new active's floors %d/%d, want 9/7 (the last checkpoint's)", next.Floor(), next.RegionalFloor())
	}
	if err := a.Ship(ctx, 4, []byte("db"), replica.Floors{Update: 10, Regional: 8}, time.Now()); !errors.Is(err, replica.ErrDeposed) || deposed != 1 {
		t.Fatalf("deposed active's checkpoint: %v (deposed %d); want ErrDeposed", err, deposed)
	}
}

// TestFenceRegionalCatchUp: a new active of a root with regions holds
// back closing at a deadline (CatchingUp) until it has judged the
// regional stream up to where it ended at the takeover; a root without
// regions does not wait for that stream; an earlier version's pointer
// (no regional floor) starts the regional stream from its beginning.
func TestFenceRegionalCatchUp(t *testing.T) {
	js, b, log := setup(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: federated.RegionalStream, Subjects: []string{federated.RegionalSubjectPrefix + "*"}}); err != nil {
		t.Fatal(err)
	}
	const aggregates = 6 // in the regional stream at the takeover
	for i := range aggregates {
		if _, err := js.Publish(ctx, federated.RegionalSubjectPrefix+"eu", fmt.Appendf(nil, "aggregate %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// an earlier version's pointer: a checkpoint without "regional"
	old := `{"epoch":1,"replica":"a","object":"e1-g3.db","floor":12,"bytes":2,"taken":"2026-12-02T14:00:00Z"}`
	if _, err := b.HA.Put(ctx, replica.CheckpointKey, []byte(old)); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		regions bool
		judged  uint64 // regional sequence judged after the fence
		want    bool   // still catching up
	}{
		{true, 0, true},
		{true, aggregates - 1, true},
		{true, aggregates, false},
		{false, 0, false},
	} {
		a := replica.NewActive("b", uint64(10+i), b, func() {}, log)
		if _, err := a.Fence(ctx, js, tc.regions); err != nil {
			t.Fatal(err)
		}
		if a.RegionalFloor() != 0 || a.Floor() != 12 {
			t.Fatalf("floors from the earlier version's pointer: %d/%d, want 12/0", a.Floor(), a.RegionalFloor())
		}
		if tc.judged > 0 {
			a.RegionalJudged(tc.judged)
		}
		if got := a.CatchingUp(); got != tc.want {
			t.Errorf("regions %v, judged %d of %d: catching up %v, want %v", tc.regions, tc.judged, aggregates, got, tc.want)
		}
	}
}

// streamless fails every stream lookup of the named stream with a
// timeout (its leader lost with a server, not yet elected again).
type streamless struct {
	jetstream.JetStream
	name string
}

func (j streamless) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	if name == j.name {
		return nil, context.DeadlineExceeded
	}
	return j.JetStream.Stream(ctx, name)
}

// TestFenceCatchUpStreamUnreadable: a new active that cannot read where
// a stream it consumes ends (a takeover after the NATS server leading
// that stream was lost: the lookup times out while the stream elects a
// leader) holds back closing a round at its deadline for CatchUpLimit,
// as if the stream held more than it has judged, rather than not at all:
// an update (or regional aggregate) the deposed active accepted in time
// would otherwise be refused as late. A stream that does not exist has
// nothing to catch up on.
func TestFenceCatchUpStreamUnreadable(t *testing.T) {
	js, b, log := setup(t)
	ctx := context.Background()
	for _, name := range []string{federated.UpdateStream, federated.RegionalStream} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}}); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := js.Publish(ctx, name+".x", []byte("m")); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, name := range []string{federated.UpdateStream, federated.RegionalStream} {
		a := replica.NewActive("b", uint64(i+1), b, func() {}, log)
		if _, err := a.Fence(ctx, streamless{js, name}, true); err != nil {
			t.Fatalf("fence with %s unreadable: %v", name, err)
		}
		a.Judged(3)
		a.RegionalJudged(3)
		if !a.CatchingUp() {
			t.Errorf("%s unreadable at the fence: not catching up; want the deadline held for CatchUpLimit", name)
		}
	}
	if err := js.DeleteStream(ctx, federated.RegionalStream); err != nil {
		t.Fatal(err)
	}
	a := replica.NewActive("b", 3, b, func() {}, log)
	if _, err := a.Fence(ctx, js, true); err != nil {
		t.Fatal(err)
	}
	if a.Judged(3); a.CatchingUp() {
		t.Error("no regional stream, update stream judged to its end: still catching up")
	}
}
