package region

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator/ingest"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/natstest"
)

// TestFetchLoopBudget: the region's fetch hands on, in stream order, no
// more updates than fit in its budget until they are given back (one
// larger than the budget alone), and returns promptly when ctx ends
// while it waits for room.
func TestFetchLoopBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int
		budget int64
	}{
		{"three updates' worth", 64 << 10, 3 * 64 << 10},
		{"updates larger than the budget, alone", 128 << 10, 16 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, err := jetstream.New(natstest.Connect(t, natstest.StartNATS(t).ClientURL(), t.Name()))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			stream := federated.RegionUpdateStream("eu")
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{federated.UpdateSubjectPrefix + "s1"},
				MaxMsgSize: federated.MaxUpdateBytes}); err != nil {
				t.Fatal(err)
			}
			cons, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: consumerName, AckPolicy: jetstream.AckExplicitPolicy})
			if err != nil {
				t.Fatal(err)
			}
			const n = 12
			data := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, tc.size) }
			for i := range n {
				if _, err := js.Publish(ctx, federated.UpdateSubjectPrefix+"s1", data(i)); err != nil {
					t.Fatal(err)
				}
			}
			budget, err := ingest.NewBudget(tc.budget)
			if err != nil {
				t.Fatal(err)
			}
			g := &Aggregator{cfg: Config{Batch: 4, Seed: 1}, log: slog.New(slog.DiscardHandler)}
			fetched := make(chan jetstream.Msg, 2*g.cfg.Batch)
			fctx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan struct{})
			go func() {
				defer close(done)
				g.fetchLoop(fctx, cons, budget, fetched)
			}()
			fit := max(1, int(tc.budget)/tc.size)
			bound := max(tc.budget, int64(tc.size))
			// full: the budget's worth (or all that is left) handed on,
			// and the fetch waits for room
			full := func(left int) {
				t.Helper()
				want := int64(min(left, fit) * tc.size)
				deadline := time.After(30 * time.Second)
				for budget.Held() != want {
					if held := budget.Held(); held > bound || len(fetched) > fit {
						t.Fatalf("%d bytes, %d updates handed on, bound %d bytes", held, len(fetched), bound)
					}
					select {
					case <-deadline:
						t.Fatalf("%d bytes handed on, want %d", budget.Held(), want)
					case <-time.After(2 * time.Millisecond):
					}
				}
			}
			for i := range n / 2 {
				full(n - i)
				m := <-fetched
				md, err := m.Metadata()
				if err != nil || md.Sequence.Stream != uint64(i+1) || !bytes.Equal(m.Data(), data(i)) {
					t.Fatalf("update #%d: %v, not the one published #%d", i, err, i)
				}
				_ = m.Ack()
				budget.Release(msgBytes(m))
			}
			full(n - n/2)
			cancel()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the fetch still waits for room after ctx ended")
			}
			ingest.ReleaseLeft(budget, fetched, msgBytes)
			if held := budget.Held(); held != 0 {
				t.Errorf("%d bytes held after the fetch stopped and what it left was released", held)
			}
		})
	}
}
