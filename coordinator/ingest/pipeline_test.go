package ingest_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator/bus"
	"github.com/edgesched/edgesched/coordinator/ingest"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/natstest"
)

// TestRunConsumerGone: a pipeline whose consumer is deleted (with high
// availability, by a later active) stops with bus.ErrConsumerGone
// instead of fetching from nothing for ever while its replica keeps the
// lease.
func TestRunConsumerGone(t *testing.T) {
	js, err := jetstream.New(natstest.Connect(t, natstest.StartNATS(t).ClientURL(), t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, (bus.Options{DuplicateWindow: time.Minute, Replicas: 1}).StreamConfig()); err != nil {
		t.Fatal(err)
	}
	const name = "coordinator-e7"
	cons, err := js.CreateConsumer(ctx, federated.UpdateStream, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
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
	deadline := time.After(10 * time.Second)
	for judged.Load() == 0 {
		select {
		case err := <-done:
			t.Fatalf("run ended before judging: %v", err)
		case <-deadline:
			t.Fatal("nothing judged")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := js.DeleteConsumer(ctx, federated.UpdateStream, name); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, bus.ErrConsumerGone) {
			t.Fatalf("run ended with %v, want bus.ErrConsumerGone", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run still fetches from its deleted consumer")
	}
}
