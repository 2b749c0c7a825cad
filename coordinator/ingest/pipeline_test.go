package ingest_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator/bus"
	"github.com/edgesched/edgesched/coordinator/ingest"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/natstest"
)

// updateConsumer starts a JetStream server (opts nil: natstest's
// defaults), creates the update stream on it and a durable consumer
// named name of it (a message not acked is delivered again after 10 s).
func updateConsumer(t *testing.T, opts *server.Options, name string) (jetstream.JetStream, jetstream.Consumer) {
	t.Helper()
	srv := natstest.StartNATS(t)
	if opts != nil {
		opts.Host, opts.Port, opts.JetStream, opts.StoreDir = "127.0.0.1", -1, true, t.TempDir()
		srv = natstest.RunServer(t, opts)
	}
	js, err := jetstream.New(natstest.Connect(t, srv.ClientURL(), t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, (bus.Options{DuplicateWindow: time.Minute, Replicas: 1}).StreamConfig()); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateConsumer(ctx, federated.UpdateStream, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return js, cons
}

// waitFor polls cond every few milliseconds until it holds, failing the
// test after a deadline (or when run ended first, when it is not nil).
func waitFor(t *testing.T, what string, run <-chan error, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	start := time.Now()
	for !cond() {
		select {
		case err := <-run:
			t.Fatalf("run ended (%v) before %s", err, what)
		case <-deadline:
			t.Fatalf("no %s within 30s (started %v)", what, start.Format(time.StampMilli))
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// endsWith waits up to within for what's end on c, failing the test
// unless it ends with want (nil: no error).
func endsWith(t *testing.T, what string, c <-chan error, want error, within time.Duration) {
	t.Helper()
	select {
	case err := <-c:
		if !errors.Is(err, want) {
			t.Fatalf("%s ended with %v, want %v", what, err, want)
		}
	case <-time.After(within):
		t.Fatalf("%s still going %v after it should have ended", what, within)
	}
}

// TestRunConsumerGone: a pipeline whose consumer is deleted (with high
// availability, by a later active) stops with bus.ErrConsumerGone
// instead of fetching from nothing for ever while its replica keeps the
// lease.
func TestRunConsumerGone(t *testing.T) {
	const name = "coordinator-e7"
	js, cons := updateConsumer(t, nil, name)
	ctx := context.Background()
	var judged atomic.Int32
	p := ingest.Pipeline{Batch: 8, Verifiers: 1, Seed: 1,
		Verify: func(*ingest.Incoming) {},
		Judge: func(_ context.Context, group []*ingest.Incoming) (int, error) {
			for _, in := range group {
				_ = in.StreamMsg.Ack()
			}
			judged.Add(int32(len(group)))
			return len(group), nil
		},
		StoreError: func() {}, Warn: func(string, string, ...any) {}}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx, cons) }()
	if _, err := js.Publish(ctx, federated.UpdateSubjectPrefix+"site-a", []byte("update")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "verdict", done, func() bool { return judged.Load() > 0 })
	if err := js.DeleteConsumer(ctx, federated.UpdateStream, name); err != nil {
		t.Fatal(err)
	}
	endsWith(t, "run on a deleted consumer", done, bus.ErrConsumerGone, 15*time.Second)
}

// message is the i-th test update of size bytes: its index, then a
// pattern of it.
func message(i, size int) []byte {
	b := bytes.Repeat([]byte{byte(i)}, size)
	binary.BigEndian.PutUint32(b, uint32(i))
	return b
}

// TestRunInflightBytes: while the judge is slow (each group waits for
// the test), a flood of large messages never holds more than the larger
// of MaxInflightBytes and one message between fetch and verdict, neither
// as the pipeline counts them (InflightBytes) nor as seen from outside
// (bytes verified and not yet judged), and every message is still judged
// once, whole, in stream order, and acked; the budget is all given back
// when Run returns.
func TestRunInflightBytes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		size, n    int
		budget     int64
		maxPayload int32 // the server's (0: its default, 1 MiB)
	}{
		{"four messages' worth", 64 << 10, 40, 4 * 64 << 10, 0},
		{"a budget that is not a multiple", 48 << 10, 30, 100 << 10, 0},
		{"messages larger than the budget pass alone", 200 << 10, 6, 64 << 10, 0},
		// (a pull request of 16 MiB, as ingest made before, never
		// delivers it: the consumer stalled behind it for ever. One
		// message: on a loaded machine one this large may take longer to
		// arrive than the pull request waits, and come again after
		// AckWait, behind the next)
		{"a message larger than 16 MiB", 17 << 20, 1, 1 << 20, 32 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts *server.Options
			if tc.maxPayload > 0 {
				opts = &server.Options{MaxPayload: tc.maxPayload}
			}
			js, cons := updateConsumer(t, opts, "coordinator")
			ctx := context.Background()
			// (not jetstream's default 5 s: a loaded machine may take
			// longer to store 17 MiB)
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Minute)
			defer pcancel()
			for i := range tc.n {
				if _, err := js.Publish(pctx, federated.UpdateSubjectPrefix+"site-a", message(i, tc.size)); err != nil {
					t.Fatal(err)
				}
			}
			bound := max(tc.budget, int64(tc.size))
			var (
				mu                  sync.Mutex
				outside, maxOutside int64 // verified, not yet judged
				judged              []*ingest.Incoming
			)
			gate := make(chan struct{})
			p := ingest.Pipeline{Batch: 8, Verifiers: 2, Seed: 1, MaxInflightBytes: tc.budget,
				Verify: func(in *ingest.Incoming) {
					mu.Lock()
					defer mu.Unlock()
					outside += int64(len(in.Data))
					maxOutside = max(maxOutside, outside)
				},
				Judge: func(ctx context.Context, group []*ingest.Incoming) (int, error) {
					select {
					case <-ctx.Done():
						return 0, ctx.Err()
					case <-gate:
					}
					mu.Lock()
					defer mu.Unlock()
					for _, in := range group {
						outside -= int64(len(in.Data))
						if err := in.StreamMsg.Ack(); err != nil {
							return 0, err
						}
					}
					judged = append(judged, group...)
					return len(group), nil
				},
				StoreError: func() {}, Warn: func(key, msg string, args ...any) { t.Log(key, msg, args) }}
			rctx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- p.Run(rctx, cons) }()
			fit := max(1, int(tc.budget)/tc.size) // messages the budget holds
			count := func() int {
				mu.Lock()
				defer mu.Unlock()
				return len(judged)
			}
			for settled := 0; settled < tc.n; settled = count() {
				// the judge waits: the pipeline fills up to its budget
				// (or with what is left), then holds, and so does the
				// fetch
				want := int64(min(tc.n-settled, fit) * tc.size)
				waitFor(t, fmt.Sprintf("%d bytes in flight with %d judged", want, settled), done, func() bool {
					if held := p.InflightBytes(); held > bound {
						t.Fatalf("%d bytes in flight, bound %d", held, bound)
					}
					return p.InflightBytes() == want
				})
				gate <- struct{}{}
				waitFor(t, "a verdict", done, func() bool { return count() > settled })
			}
			cancel()
			endsWith(t, "run", done, context.Canceled, 30*time.Second)
			if held := p.InflightBytes(); held != 0 {
				t.Errorf("%d bytes still held after Run", held)
			}
			if maxOutside > bound {
				t.Errorf("up to %d bytes verified and not judged, bound %d", maxOutside, bound)
			}
			if len(judged) != tc.n {
				t.Fatalf("%d judged, want %d", len(judged), tc.n)
			}
			for i, in := range judged {
				if in.StreamSeq != uint64(i+1) || !bytes.Equal(in.Data, message(i, tc.size)) {
					t.Fatalf("judged #%d: stream sequence %d, %d bytes: not the message published #%d", i, in.StreamSeq, len(in.Data), i)
				}
			}
			waitFor(t, "acks on the stream", nil, func() bool {
				info, err := cons.Info(ctx)
				return err == nil && info.NumAckPending == 0 && info.NumPending == 0 && info.AckFloor.Stream == uint64(tc.n)
			})
		})
	}
}

// TestRunCancelWaitingForBudget: a pipeline whose fetch waits for room
// in its budget (the judge holds a group until ctx ends) returns
// promptly when ctx ends, and gives back every byte it held.
func TestRunCancelWaitingForBudget(t *testing.T) {
	js, cons := updateConsumer(t, nil, "coordinator")
	ctx := context.Background()
	const size, n = 32 << 10, 20
	for i := range n {
		if _, err := js.Publish(ctx, federated.UpdateSubjectPrefix+"site-a", message(i, size)); err != nil {
			t.Fatal(err)
		}
	}
	p := ingest.Pipeline{Batch: 4, Verifiers: 1, Seed: 1, MaxInflightBytes: 3 * size,
		Verify: func(*ingest.Incoming) {},
		Judge: func(ctx context.Context, _ []*ingest.Incoming) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		},
		StoreError: func() {}, Warn: func(string, string, ...any) {}}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx, cons) }()
	waitFor(t, "a full budget", done, func() bool { return p.InflightBytes() == 3*size })
	cancel()
	endsWith(t, "run waiting for its budget", done, context.Canceled, 5*time.Second)
	if held := p.InflightBytes(); held != 0 {
		t.Errorf("%d bytes still held after Run", held)
	}
}

// TestRunRefusesNegativeBudget: a negative MaxInflightBytes is refused
// before anything is fetched.
func TestRunRefusesNegativeBudget(t *testing.T) {
	p := ingest.Pipeline{Batch: 1, MaxInflightBytes: -1}
	if err := p.Run(context.Background(), nil); !errors.Is(err, ingest.ErrBudget) {
		t.Fatalf("run: %v, want ErrBudget", err)
	}
}
