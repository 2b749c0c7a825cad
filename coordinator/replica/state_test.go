package replica_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator/replica"
	"github.com/edgesched/edgesched/federated"
)

// stateBucket is a KV bucket like the coordinator's state bucket.
func stateBucket(t *testing.T, js jetstream.JetStream) jetstream.KeyValue {
	t.Helper()
	kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "TEST_STATE", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// TestFenceStateRefusesDeposed: once a new active has fenced the state
// bucket's keys, every write of the deposed active is refused and
// deposes it, whether it wrote the key before (fencing rewrites the same
// bytes: the deposed active must not take them for its own write whose
// answer was lost) or not (a key it never wrote, or one that did not
// exist at the fence); the new active's writes go on. Readers see the
// values as they were written (a key without value stays without).
func TestFenceStateRefusesDeposed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before func(ctx context.Context, kv jetstream.KeyValue, a *replica.Active) error // before the fence
	}{
		{"written by the deposed active", func(ctx context.Context, kv jetstream.KeyValue, a *replica.Active) error {
			return a.PutState(ctx, kv, "model", []byte("notice v1"))
		}},
		{"written by a coordinator without high availability", func(ctx context.Context, kv jetstream.KeyValue, _ *replica.Active) error {
			_, err := kv.Put(ctx, "model", []byte("notice v1"))
			return err
		}},
		{"no value at the fence", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, b, log := setup(t)
			ctx := context.Background()
			leaseRevisions(t, b, 2)
			kv := stateBucket(t, js)
			var aDeposed, bDeposed atomic.Bool
			a := replica.NewActive("a", 1, b, func() { aDeposed.Store(true) }, log)
			nb := replica.NewActive("b", 2, b, func() { bDeposed.Store(true) }, log)
			if tc.before != nil {
				if err := tc.before(ctx, kv, a); err != nil {
					t.Fatal(err)
				}
			}
			var want []byte
			if e, err := kv.Get(ctx, "model"); err == nil {
				want = e.Value()
			}
			if err := nb.FenceState(ctx, kv, "model"); err != nil {
				t.Fatalf("fence: %v", err)
			}
			// readers see what was there
			e, err := kv.Get(ctx, "model")
			switch {
			case want == nil && !errors.Is(err, jetstream.ErrKeyNotFound):
				t.Fatalf("fenced key without value reads %v, want ErrKeyNotFound", err)
			case want != nil && (err != nil || string(e.Value()) != string(want)):
				t.Fatalf("fenced key reads %v, want %q", err, want)
			}
			if err := a.PutState(ctx, kv, "model", []byte("notice v2 from a")); !errors.Is(err, replica.ErrDeposed) || !aDeposed.Load() {
				t.Fatalf("deposed active's write after the fence: %v (deposed %v), want ErrDeposed", err, aDeposed.Load())
			}
			if err := nb.PutState(ctx, kv, "model", []byte("notice v2 from b")); err != nil || bDeposed.Load() {
				t.Fatalf("new active's write: %v (deposed %v)", err, bDeposed.Load())
			}
			if e, err := kv.Get(ctx, "model"); err != nil || string(e.Value()) != "notice v2 from b" {
				t.Fatalf("key holds %v, want the new active's value", err)
			}
		})
	}
}

// lossyJS applies a state bucket write but loses its answer while lose
// is set, once.
type lossyJS struct {
	jetstream.JetStream
	lose atomic.Bool
}

func (j *lossyJS) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := j.JetStream.PublishMsg(ctx, m, opts...)
	if err == nil && j.lose.CompareAndSwap(true, false) {
		return nil, context.DeadlineExceeded
	}
	return ack, err
}

// TestPutStateLostAnswer: a write of the state bucket whose answer was
// lost is recognised as the active's own (its epoch) when it tries again,
// whether with the same value or a newer one: it is not deposed, and the
// key holds the value last written.
func TestPutStateLostAnswer(t *testing.T) {
	for _, retry := range []string{"notice v2", "notice v3"} {
		t.Run(retry, func(t *testing.T) {
			js, b, log := setup(t)
			ctx := context.Background()
			kv := stateBucket(t, js)
			lj := &lossyJS{JetStream: b.JS}
			ab := *b
			ab.JS = lj
			a := replica.NewActive("a", 1, &ab, func() { t.Error("deposed") }, log)
			if err := a.FenceState(ctx, kv, federated.KeyModel); err != nil {
				t.Fatal(err)
			}
			if err := a.PutState(ctx, kv, federated.KeyModel, []byte("notice v1")); err != nil {
				t.Fatal(err)
			}
			lj.lose.Store(true)
			if err := a.PutState(ctx, kv, federated.KeyModel, []byte("notice v2")); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("write with its answer lost: %v", err)
			}
			if err := a.PutState(ctx, kv, federated.KeyModel, []byte(retry)); err != nil {
				t.Fatalf("write again: %v", err)
			}
			if err := a.PutState(ctx, kv, federated.KeyModel, []byte("notice v4")); err != nil {
				t.Fatalf("next write: %v", err)
			}
			if e, err := kv.Get(ctx, federated.KeyModel); err != nil || string(e.Value()) != "notice v4" {
				t.Fatalf("key holds %v, want notice v4", err)
			}
		})
	}
}
