package regional_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator/regional"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/internal/testutil/natstest"
)

// TestConsumeDuplicatesAboveMaxAge: a root whose de-duplication window is
// longer than its --update-max-age (a short max age, the default 2 min
// window) still creates the regional stream: the server refuses a
// stream whose Duplicates exceed its MaxAge, so the window is held to
// the age, as the update stream's is (bus.Options.StreamConfig). Before,
// Consume ended at once with "create regional stream", and with it the
// root's Run.
func TestConsumeDuplicatesAboveMaxAge(t *testing.T) {
	js, err := jetstream.New(fltest.Connect(t, fltest.StartNATS(t).ClientURL(), t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	s := regional.Stream{Duplicates: 2 * time.Minute, MaxAge: time.Minute}
	consume(t, js, s, 1, func() {
		if _, err := js.Publish(context.Background(), federated.RegionalSubjectPrefix+"eu", []byte("a1")); err != nil {
			t.Fatal(err)
		}
	})
	st, err := js.Stream(context.Background(), federated.RegionalStream)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := st.CachedInfo().Config; cfg.Duplicates != time.Minute || cfg.MaxAge != time.Minute {
		t.Fatalf("regional stream: duplicates %v, max age %v; want both 1m", cfg.Duplicates, cfg.MaxAge)
	}
	// without an age limit the window is as configured
	if got := (regional.Stream{Duplicates: 2 * time.Minute}).Config().Duplicates; got != 2*time.Minute {
		t.Fatalf("no max age: duplicates %v, want 2m", got)
	}
}

// flakyJS fails its first fails stream and consumer creations with a
// timeout, as a cluster electing a leader answers.
type flakyJS struct {
	jetstream.JetStream
	fails atomic.Int32
}

func (j *flakyJS) fail() error {
	if j.fails.Add(-1) >= 0 {
		return context.DeadlineExceeded
	}
	return nil
}

func (j *flakyJS) CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	if err := j.fail(); err != nil {
		return nil, err
	}
	return j.JetStream.CreateOrUpdateStream(ctx, cfg)
}

func (j *flakyJS) CreateOrUpdateConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	if err := j.fail(); err != nil {
		return nil, err
	}
	return j.JetStream.CreateOrUpdateConsumer(ctx, stream, cfg)
}

// TestConsumeSetupRetried: a transient failure creating the regional
// stream or its consumer (a timeout while the cluster elects a leader,
// a NATS server restarting) is retried with backoff, as the rest of the
// root's setup is (bus.SetupRetry), instead of ending Consume and with
// it the root's Run; a refusal (a bad configuration) still ends it at
// once, and so does ctx.
func TestConsumeSetupRetried(t *testing.T) {
	base, err := jetstream.New(fltest.Connect(t, fltest.StartNATS(t).ClientURL(), t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	for _, epoch := range []uint64{0, 4} {
		js := &flakyJS{JetStream: base}
		js.fails.Store(3) // the stream twice, then the consumer
		consume(t, js, regional.Stream{Epoch: epoch}, 1, func() {
			if _, err := base.Publish(context.Background(), federated.RegionalSubjectPrefix+"eu", []byte("a1")); err != nil {
				t.Fatal(err)
			}
		})
		if n := js.fails.Load(); n >= 0 {
			t.Fatalf("epoch %d: %d injected failures left", epoch, n+1)
		}
		if err := base.DeleteStream(context.Background(), federated.RegionalStream); err != nil {
			t.Fatal(err)
		}
	}
	// a refusal is not retried
	done := make(chan error, 1)
	go func() {
		done <- regional.Consume(context.Background(), base, regional.Stream{Replicas: 3}, &recorder{}, regional.Hooks{
			Fatal: func(error) bool { return true }, StoreError: func() {}, Warn: func(string, string, ...any) {}})
	}()
	select {
	case err := <-done:
		if err == nil || errors.Is(err, context.Canceled) {
			t.Fatalf("consume of a stream the server refuses ended with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("consume retries a refused stream")
	}
	// ctx ends the retries
	ctx, cancel := context.WithCancel(context.Background())
	js := &flakyJS{JetStream: base}
	js.fails.Store(1 << 30)
	go func() {
		done <- regional.Consume(ctx, js, regional.Stream{}, &recorder{}, regional.Hooks{
			Fatal: func(error) bool { return true }, StoreError: func() {}, Warn: func(string, string, ...any) {}})
	}()
	fltest.Eventually(t, 10*time.Second, "a few retries", func() (bool, string) {
		return js.fails.Load() < 1<<30-2, "none yet"
	})
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("consume stopped while retrying its setup with %v, want context.Canceled", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("consume goes on retrying its setup after ctx ended")
	}
}

// TestConsumeSetupDenied: a root whose user the server refuses the
// JetStream request that creates the regional stream sees only a
// timeout, which was retried for ever as a server not ready; Consume now
// ends with the permissions violation named (bus.Denied), after the first
// request's timeout (jetstream's default 5 s).
func TestConsumeSetupDenied(t *testing.T) {
	srv := natstest.RunServer(t, &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		Users: []*server.User{{Username: "root", Password: "pw", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.CREATE.>"}}}}}})
	js, err := jetstream.New(natstest.Connect(t, srv.ClientURL(), t.Name(), nats.UserInfo("root", "pw")))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background()) // no deadline, as a process's
	defer time.AfterFunc(2*time.Minute, cancel).Stop()
	defer cancel()
	err = regional.Consume(ctx, js, regional.Stream{}, &recorder{}, regional.Hooks{
		Fatal: func(error) bool { return true }, StoreError: func() {}, Warn: func(string, string, ...any) {}})
	if !errors.Is(err, nats.ErrPermissionViolation) || ctx.Err() != nil {
		t.Fatalf("Consume = %v (context: %v), want a permissions violation before the context ends", err, ctx.Err())
	}
	if !strings.Contains(err.Error(), "$JS.API.STREAM.CREATE."+federated.RegionalStream) {
		t.Fatalf("Consume = %v, want the refused subject named", err)
	}
}
