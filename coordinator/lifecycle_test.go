package coordinator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/admin"
	"github.com/edgesched/edgesched/coordinator/release"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/boltkv"
)

// deadline moves the unit's clock past the current round's deadline and
// ticks.
func (u *unit) deadline(t *testing.T) {
	t.Helper()
	u.clock.Add(10 * time.Minute)
	if err := u.c.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// accept has site's update of round r (sequence seq) accepted.
func (u *unit) accept(t *testing.T, site string, seq uint64, r *Round) {
	t.Helper()
	if ack, err := u.c.Process(context.Background(), u.update(t, site, seq, r)); err != nil || ack.Status != federated.Accepted {
		t.Fatalf("%s seq %d: %+v %v", site, seq, ack, err)
	}
}

// TestFailedRoundsUpdatesPruned: the stored updates and running sums of
// a round are dropped once it is more than KeepUpdates rounds old,
// whether it or the round KeepUpdates after it failed. They used to be
// dropped only by the round exactly KeepUpdates later, and only when that
// one published: a fleet whose rounds often miss their quorum kept the
// updates (in a round that stores payloads, every payload) of the others
// for ever.
func TestFailedRoundsUpdatesPruned(t *testing.T) {
	ctx := context.Background()
	u := newUnitOf(t, nil, []string{"site-a", "site-b"}, func(c *Config) { c.MinUpdates, c.KeepUpdates = 2, 1 })
	// round 1: one update of two, fails at its deadline
	r1, err := u.c.StartRound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u.accept(t, "site-a", 1, r1)
	u.deadline(t)
	// round 2: nothing, fails
	if _, err := u.c.StartRound(ctx); err != nil {
		t.Fatal(err)
	}
	u.deadline(t)
	// round 3: both sites, publishes
	r3, err := u.c.StartRound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u.accept(t, "site-a", 2, r3)
	u.accept(t, "site-b", 1, r3)
	for n, want := range map[uint64]string{1: StateFailed, 2: StateFailed, 3: StatePublished} {
		if r, err := u.c.RoundRecord(n); err != nil || r.State != want {
			t.Fatalf("round %d: %+v %v, want %s", n, r, err, want)
		}
	}
	var left []uint64
	var sums int
	if err := u.c.view(func(tx *bolt.Tx) error {
		sums = tx.Bucket(store.BucketSums).Stats().KeyN
		return tx.Bucket(store.BucketUpdates).ForEach(func(k, _ []byte) error {
			left = append(left, boltkv.FromU64(k))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0] != 3 || sums > 1 {
		t.Fatalf("update buckets of rounds %v and %d sums records left, want round 3's only (KeepUpdates 1)", left, sums)
	}
}

// TestRollbackNotUndoneByTheRound: a rollback while a round trained from
// the version rolled back from is collecting fails that round
// (superseded). Its model used to be stored and published as the version
// after the rollback's, so the weights an operator had just rolled away
// from came back within one round.
func TestRollbackNotUndoneByTheRound(t *testing.T) {
	ctx := context.Background()
	u := newUnit(t, 1)
	u.publishedRound(t) // version 2
	r2, err := u.c.StartRound(ctx)
	if err != nil || r2.BaseVersion != 2 {
		t.Fatalf("round 2: %+v %v", r2, err)
	}
	u.accept(t, "site-a", 2, r2)
	rec, err := u.c.Rollback(ctx, 1)
	if rec == nil || rec.Version != 3 || (err != nil && err.Error() != "coordinator: not connected") {
		t.Fatalf("rollback: %+v %v", rec, err)
	}
	u.deadline(t)
	got, err := u.c.RoundRecord(r2.Round)
	if err != nil || got.State != StateFailed || got.Reason != FailReasonSuperseded {
		t.Fatalf("round 2 after the rollback: %+v %v, want failed (superseded)", got, err)
	}
	newest, err := u.c.ModelRecord(0)
	if err != nil || newest.Version != 3 {
		t.Fatalf("newest model %+v %v, want the rollback's version 3", newest, err)
	}
	// the next round trains from the rollback
	r3, err := u.c.StartRound(ctx)
	if err != nil || r3.BaseVersion != 3 {
		t.Fatalf("round 3: %+v %v, want base version 3", r3, err)
	}
}

// TestAsyncQuorumIsTheBuffer: an async round closes when its buffer is
// full; a MinUpdates above the buffer (the sync rounds' quorum) used to
// fail every such round for want of a quorum it could never reach.
func TestAsyncQuorumIsTheBuffer(t *testing.T) {
	ctx := context.Background()
	u := newUnitOf(t, nil, []string{"site-a", "site-b", "site-c"}, func(c *Config) {
		c.Mode, c.Buffer, c.MinUpdates = federated.Async, 2, 3
	})
	r, err := u.c.StartRound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u.accept(t, "site-a", 1, r)
	u.accept(t, "site-b", 1, r)
	got, err := u.c.RoundRecord(r.Round)
	if err != nil || got.State != StatePublished {
		t.Fatalf("async round with a full buffer: %+v %v, want published", got, err)
	}
}

// TestCompleteRoundClosesOnTick: an async round whose buffer is full
// but whose close did not follow the update that filled it (a write error
// of the close; here a failpoint stops Process between the two) closes
// on the next tick, where it used to wait for another update that might
// never come; meanwhile it refuses more updates (round_closed), where it
// took them past its buffer.
func TestCompleteRoundClosesOnTick(t *testing.T) {
	ctx := context.Background()
	stop := errors.New("stopped after the update was committed")
	armed := false
	u := newUnitOf(t, nil, []string{"site-a", "site-b", "site-c"}, func(c *Config) {
		// the median keeps the updates themselves (no running sum
		// whose size would refuse a third)
		c.Mode, c.Buffer, c.Aggregator.Rule = federated.Async, 2, federated.RuleMedian
		c.Failpoint = func(name string) {
			if armed && name == FailUpdateCommitted {
				panic(stop)
			}
		}
	})
	r, err := u.c.StartRound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u.accept(t, "site-a", 1, r)
	armed = true
	func() {
		defer func() {
			if p := recover(); p != stop {
				panic(p)
			}
		}()
		_, _ = u.c.Process(ctx, u.update(t, "site-b", 1, r))
		t.Fatal("the failpoint did not fire")
	}()
	armed = false
	got, err := u.c.RoundRecord(r.Round)
	if err != nil || got.State != StateCollecting || got.Accepted != 2 {
		t.Fatalf("round after the interrupted close: %+v %v, want collecting with 2 accepted", got, err)
	}
	// until the tick closes it, the complete round takes no more (it took
	// one past its buffer)
	if ack, err := u.c.Process(ctx, u.update(t, "site-c", 1, r)); err != nil || ack.Status != federated.Rejected || ack.Reason != federated.ReasonRoundClosed {
		t.Fatalf("site-c's update to the complete round: %+v %v, want rejected %s", ack, err, federated.ReasonRoundClosed)
	}
	if err := u.c.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err = u.c.RoundRecord(r.Round); err != nil || got.State != StatePublished {
		t.Fatalf("complete round after a tick: %+v %v, want published", got, err)
	}
}

// TestQuorumAboveSitesRefused: a sync quorum larger than the registered
// sites could never be met: the configuration is refused, naming it,
// instead of every round failing.
func TestQuorumAboveSitesRefused(t *testing.T) {
	reg := &federated.Registry{}
	for i, s := range []string{"site-a", "site-b"} {
		if err := reg.Add(s, testKey(t, byte(i+1)).Public()); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Sites, cfg.Signer, cfg.Calibrate = t.TempDir(), reg, testKey(t, 9), normalCalibration
	cfg.MinUpdates = 3
	if err := cfg.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "MinUpdates") {
		t.Fatalf("quorum 3 of 2 sites: %v, want ErrConfig naming MinUpdates", err)
	}
	cfg.MinUpdates = 2
	if err := cfg.Validate(); err != nil {
		t.Fatalf("quorum 2 of 2 sites: %v", err)
	}
}

// TestModelCacheBounded: the decoded float models are kept for at most
// release.MaxCachedModels versions. Every version a round trained from (and every
// one a region asked about through round.regional, or a rollback read)
// used to stay in memory for the life of the process.
func TestModelCacheBounded(t *testing.T) {
	ctx := context.Background()
	u := newUnit(t, 1)
	for seq := uint64(1); seq <= 6; seq++ { // versions 2 to 7
		r, err := u.c.StartRound(ctx)
		if err != nil {
			t.Fatal(err)
		}
		u.accept(t, "site-a", seq, r)
		u.deadline(t)
	}
	for v := uint64(1); v <= 7; v++ {
		if _, err := u.c.FloatModel(v); err != nil {
			t.Fatal(err)
		}
	}
	u.c.mu.Lock()
	cached := u.c.models.Cached()
	u.c.mu.Unlock()
	if len(cached) > release.MaxCachedModels || !slices.Contains(cached, 7) {
		t.Fatalf("versions %v cached, want at most %d with the newest, 7", cached, release.MaxCachedModels)
	}
}

// TestListingBounded: a listing whose records exceed maxListBytes (rounds
// of a large fleet each list every expected site) is refused with
// admin.ErrTooLarge, naming how to get an answer, before it is decoded
// and held in memory whole.
func TestListingBounded(t *testing.T) {
	ctx := context.Background()
	u := newUnit(t, 1)
	for range 3 {
		if _, err := u.c.StartRound(ctx); err != nil {
			t.Fatal(err)
		}
		u.deadline(t) // fails: no update
	}
	one, err := u.c.Rounds(1)
	if err != nil || len(one) != 1 {
		t.Fatalf("one round: %d %v", len(one), err)
	}
	raw, err := store.EncodeRecord(&one[0])
	if err != nil {
		t.Fatal(err)
	}
	defer func(old int) { maxListBytes = old }(maxListBytes)
	maxListBytes = 2*len(raw) + len(raw)/2
	if rs, err := u.c.Rounds(2); err != nil || len(rs) != 2 {
		t.Fatalf("two rounds within the bound: %d %v", len(rs), err)
	}
	if _, err := u.c.Rounds(0); !errors.Is(err, admin.ErrTooLarge) || !strings.Contains(err.Error(), "ask for fewer") {
		t.Fatalf("three rounds over the bound: %v, want admin.ErrTooLarge", err)
	}
}
