package replica_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator/replica"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
)

// fakeClock is a replica.Clock that moves only when told (Advance); it
// fires the channels of After whose time has come.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{c.now.Add(d), ch})
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

// leaseKV answers the first renewal (it is applied) delay late on the
// fake clock, or never (delay 0: the server hangs); every later renewal
// hangs until its context ends.
type leaseKV struct {
	jetstream.KeyValue
	clk     *fakeClock
	delay   time.Duration
	calls   atomic.Int32
	hanging atomic.Int32
}

func (k *leaseKV) Update(ctx context.Context, key string, v []byte, rev uint64) (uint64, error) {
	if k.calls.Add(1) == 1 && k.delay > 0 {
		r, err := k.KeyValue.Update(ctx, key, v, rev)
		k.clk.Advance(k.delay)
		return r, err
	}
	k.hanging.Add(1)
	defer k.hanging.Add(-1)
	<-ctx.Done()
	return 0, ctx.Err()
}

// TestRenewStepsDownInTime: the active steps down three quarters of the
// TTL after the last renewal that succeeded was *sent* (the server
// stored it no earlier, so expires it no earlier than a TTL after): not
// after its answer arrived (an answer a fifth of the TTL late moved the
// step-down that much closer to the expiry), and while a renewal is still
// in flight (a hung renewal no longer holds the step-down back until it
// times out).
func TestRenewStepsDownInTime(t *testing.T) {
	const ttl = time.Hour // real time: the renewals' own timeouts never end
	for _, tc := range []struct {
		name  string
		delay time.Duration // the first renewal's answer (0: it hangs)
		// the step-down, after the lease was taken (its Create sent)
		want time.Duration
	}{
		{"renewals hang", 0, ttl * 3 / 4},
		{"first renewal answered late", ttl / 5, ttl/4 + ttl*3/4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, b, log := setup(t)
			ctx := context.Background()
			clk := newFakeClock()
			since := clk.Now()
			epoch, err := b.Lease.Create(ctx, replica.LeaseKey, []byte("a"))
			if err != nil {
				t.Fatal(err)
			}
			kv := &leaseKV{KeyValue: b.Lease, clk: clk, delay: tc.delay}
			var held atomic.Uint64
			held.Store(epoch)
			type deposal struct {
				at       time.Time
				inFlight int32
			}
			deposed := make(chan deposal, 1)
			done := make(chan struct{})
			rctx, cancel := context.WithCancel(ctx)
			defer func() { cancel(); <-done }()
			go func() {
				defer close(done)
				replica.Renew(rctx, kv, replica.LeaseKey, &held, []byte("a"), ttl, since, clk, func() {
					deposed <- deposal{clk.Now(), kv.hanging.Load()}
				}, log)
			}()
			// (Renew reads the clock at each turn: a move it has not seen
			// yet is seen at its next, so the test need not wait for it)
			clk.Advance(ttl / 4) // the first renewal
			fltest.Eventually(t, 5*time.Second, "the first renewal's outcome", func() (bool, string) {
				return kv.hanging.Load() == 1 || held.Load() != epoch, fmt.Sprint(kv.calls.Load(), " calls")
			})
			if tc.delay > 0 {
				// the next renewal, which hangs
				clk.Advance(since.Add(ttl / 2).Sub(clk.Now()))
				fltest.Eventually(t, 5*time.Second, "the second renewal sent", func() (bool, string) { return kv.hanging.Load() == 1, "" })
			}
			clk.Advance(since.Add(tc.want).Sub(clk.Now()) - time.Nanosecond)
			select {
			case d := <-deposed:
				t.Fatalf("stepped down %v after the lease was taken, want %v", d.at.Sub(since), tc.want)
			default:
			}
			clk.Advance(time.Nanosecond)
			select {
			case d := <-deposed:
				if d.at.Sub(since) != tc.want || d.inFlight != 1 {
					t.Fatalf("stepped down %v after the lease was taken (%d renewals in flight), want %v with the hung one in flight", d.at.Sub(since), d.inFlight, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no step-down %v after the lease was taken", tc.want)
			}
			<-done // Renew returned (its renewal in flight ended)
		})
	}
}

// slowCreate answers a Create delay late on the fake clock.
type slowCreate struct {
	jetstream.KeyValue
	clk   *fakeClock
	delay time.Duration
}

func (k *slowCreate) Create(ctx context.Context, key string, v []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	r, err := k.KeyValue.Create(ctx, key, v, opts...)
	k.clk.Advance(k.delay)
	return r, err
}

// TestAcquireCountsFromSend: the lease is counted from just before its
// Create was sent, however late the answer came.
func TestAcquireCountsFromSend(t *testing.T) {
	for _, delay := range []time.Duration{0, time.Second} {
		_, b, log := setup(t)
		clk := newFakeClock()
		sent := clk.Now()
		kv := &slowCreate{KeyValue: b.Lease, clk: clk, delay: delay}
		epoch, since, err := replica.Acquire(context.Background(), kv, replica.LeaseKey, []byte("a"), 4*time.Second, rand.New(rand.NewPCG(1, 1)), clk, log)
		if err != nil || epoch == 0 || !since.Equal(sent) {
			t.Errorf("answer %v late: epoch %d since %v, %v; want since %v (the send)", delay, epoch, since, err, sent)
		}
	}
}

// TestOpenBucketsKeepsLeaseTTL: the lease bucket's TTL is the --lease-ttl
// of the replica that created it; a replica with another one adopts the
// bucket's (Buckets.TTL) instead of rewriting it under the active, which
// times its renewals and its step-down by the TTL it started with.
func TestOpenBucketsKeepsLeaseTTL(t *testing.T) {
	js, err := jetstream.New(fltest.Connect(t, fltest.StartNATS(t).ClientURL(), t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	for i, tc := range []struct{ ttl, want time.Duration }{
		{4 * time.Second, 4 * time.Second}, // creates the bucket
		{2 * time.Second, 4 * time.Second}, // shorter: refused, adopted
		{8 * time.Second, 4 * time.Second},
		{4 * time.Second, 4 * time.Second},
	} {
		b, err := replica.OpenBuckets(ctx, js, tc.ttl, 1, 1, log)
		if err != nil {
			t.Fatal(err)
		}
		st, err := b.Lease.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if b.TTL != tc.want || st.TTL() != tc.want {
			t.Errorf("replica %d with lease TTL %v: Buckets.TTL %v, the bucket's %v; want %v", i, tc.ttl, b.TTL, st.TTL(), tc.want)
		}
	}
}
