package bus

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/natstest"
)

// consumerNames lists the consumers of the update stream.
func consumerNames(t *testing.T, js jetstream.JetStream) []string {
	return natstest.ConsumerNames(t, js, federated.UpdateStream)
}

// updateStream starts a NATS server with the update stream.
func updateStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(natstest.Connect(t, natstest.StartNATS(t).ClientURL(), t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), (Options{DuplicateWindow: time.Minute, Replicas: 1}).StreamConfig()); err != nil {
		t.Fatal(err)
	}
	return js
}

// TestOpenEpochConsumerLeavesLater: an active opening its consumer
// deletes the non-HA durable and the earlier epochs' consumers, and
// leaves a later epoch's (a paused earlier active that wakes up deleted
// the later active's consumer, whose ingest then failed for good) and
// consumers that are not a coordinator's.
func TestOpenEpochConsumerLeavesLater(t *testing.T) {
	js := updateStream(t)
	ctx := context.Background()
	b := &Bus{JS: js}
	log := slog.New(slog.DiscardHandler)
	for _, name := range []string{ConsumerName, "coordinator-e3", "coordinator-e9", "coordinator-ex", "audit"} {
		if _, err := js.CreateConsumer(ctx, federated.UpdateStream, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		epoch uint64
		want  []string
	}{
		{5, []string{"audit", "coordinator-e5", "coordinator-e9", "coordinator-ex"}}, // a paused earlier active
		{9, []string{"audit", "coordinator-e9", "coordinator-ex"}},                   // (its own again)
		{12, []string{"audit", "coordinator-e12", "coordinator-ex"}},
	} {
		if _, err := b.OpenEpochConsumer(ctx, tc.epoch, 0, log); err != nil {
			t.Fatal(err)
		}
		if got := consumerNames(t, js); !slices.Equal(got, tc.want) {
			t.Errorf("consumers after epoch %d opened its own: %v, want %v", tc.epoch, got, tc.want)
		}
	}
}

// TestGone: Gone tells a deleted consumer (ErrConsumerGone) from one
// that exists.
func TestGone(t *testing.T) {
	js := updateStream(t)
	ctx := context.Background()
	cons, err := js.CreateConsumer(ctx, federated.UpdateStream, jetstream.ConsumerConfig{Durable: "coordinator-e4", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	if err := Gone(ctx, cons); err != nil {
		t.Fatalf("consumer that exists: %v", err)
	}
	if err := js.DeleteConsumer(ctx, federated.UpdateStream, "coordinator-e4"); err != nil {
		t.Fatal(err)
	}
	if err := Gone(ctx, cons); !errors.Is(err, ErrConsumerGone) {
		t.Fatalf("deleted consumer: %v, want ErrConsumerGone", err)
	}
}
