package flclient

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/backoff"
)

// stampingJS is a JetStream whose Publish always succeeds and notes when
// it was called (nothing else of the interface is used by publishLoop).
type stampingJS struct {
	jetstream.JetStream
	mu sync.Mutex
	at []time.Time
}

func (j *stampingJS) Publish(context.Context, string, []byte, ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.at = append(j.at, time.Now())
	return &jetstream.PubAck{Stream: federated.UpdateStream}, nil
}

func (j *stampingJS) stamps() []time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]time.Time(nil), j.at...)
}

// TestPublishBacksOffWhenTheOutboxWriteFails: the stream has an update
// but the transaction taking it out of the outbox fails (a full disk).
// The publisher must back off (capped, jittered, growing while the
// failures last; the backoff's seed makes its waits known here) before it
// publishes the entry again, and stop waiting when its context ends.
// Before the fix it republished at once, in a hot loop.
func TestPublishBacksOffWhenTheOutboxWriteFails(t *testing.T) {
	errFull := errors.New("write outbox: no space left on device")
	cases := []struct {
		name     string
		min, max time.Duration
		fails    int // removals that fail before one succeeds; -1: all
	}{
		{"the write recovers", 40 * time.Millisecond, 160 * time.Millisecond, 3},
		{"the write keeps failing", time.Hour, time.Hour, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.BackoffMin, cfg.BackoffMax, cfg.Seed, cfg.ReportInterval = tc.min, tc.max, 11, 0
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.enqueue(context.Background(), 1, 1, false, strings.Repeat("ab", 32), 1, 10, []float32{0.5, -0.25}, 0); err != nil {
				t.Fatal(err)
			}
			var removals atomic.Int64
			c.removeSent = func(seq uint64) error {
				if n := removals.Add(1); tc.fails < 0 || n <= int64(tc.fails) {
					return errFull
				}
				return c.dropSent(seq)
			}
			// publishLoop's backoff, replayed
			b := backoff.New(cfg.BackoffMin, cfg.BackoffMax, cfg.Seed^0x9b)
			js := &stampingJS{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); c.publishLoop(ctx, js) }()
			defer func() { cancel(); <-done }()

			if tc.fails < 0 {
				if w := b.Next(); w < time.Minute {
					t.Fatalf("seed gives a first wait of %v: pick another", w)
				}
				waitFor(t, c, "the failed removal", func(Status) bool { return removals.Load() >= 1 })
				cancel()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("publishLoop did not stop with its context while backing off")
				}
				if n := len(js.stamps()); n != 1 || removals.Load() != 1 {
					t.Fatalf("%d publishes and %d removals, want 1 and 1 (backing off for an hour)", n, removals.Load())
				}
				return
			}
			waitFor(t, c, "the outbox drained", func(Status) bool {
				_, msg := c.oldest()
				return msg == nil
			})
			at := js.stamps()
			if len(at) != tc.fails+1 {
				t.Fatalf("%d publishes, want %d (one per failed removal, then one that sticks)", len(at), tc.fails+1)
			}
			for i := 1; i < len(at); i++ {
				if gap, want := at[i].Sub(at[i-1]), b.Next(); gap < want {
					t.Errorf("publish %d came %v after the last, want at least the backoff's %v", i+1, gap, want)
				}
			}
			if s := mustStatus(t, c); s.Counters.Published != 1 {
				t.Errorf("%d counted published, want 1", s.Counters.Published)
			}
		})
	}
}
