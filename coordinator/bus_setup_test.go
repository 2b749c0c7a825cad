package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgesched/edgesched/internal/testutil/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestTransientBus: what setupBusRetry retries (a server not ready yet)
// and what it returns at once (a refusal).
func TestTransientBus(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("create state bucket: %w", context.DeadlineExceeded), true},
		{fmt.Errorf("create update stream: %w", nats.ErrTimeout), true},
		{nats.ErrNoResponders, true},
		{jetstream.ErrJetStreamNotEnabled, true},
		{&jetstream.APIError{Code: 503, Description: "JetStream system temporarily unavailable"}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamNameInUse, Description: "stream name already in use with a different configuration"}, false},
		{context.Canceled, false},
		{errors.New("nats server 2.9.0 is older than 2.10.0"), false},
	} {
		if got := transientBus(c.err); got != c.want {
			t.Errorf("transientBus(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestSetupBusRetry: against a real server without JetStream, setting up
// the bus is retried until the patience runs out (not refused at once,
// which had made a coordinator started while JetStream recovered exit),
// then the error says so; a cancelled context stops the retries at once.
func TestSetupBusRetry(t *testing.T) {
	srv := natstest.RunServer(t, &server.Options{Host: "127.0.0.1", Port: -1}) // no JetStream
	nc := natstest.Connect(t, srv.ClientURL(), "coordinator")
	u := newUnit(t, 1)
	const patience = 1500 * time.Millisecond
	start := time.Now()
	_, err := u.c.setupBusRetry(t.Context(), nc, patience)
	took := time.Since(start)
	if err == nil || !(errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled)) || !strings.Contains(err.Error(), "JetStream not ready after 1.5s") {
		t.Fatalf("setup without JetStream: %v", err)
	}
	if took < patience {
		t.Fatalf("gave up after %v, before the patience of %v: not retried", took, patience)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := u.c.setupBusRetry(ctx, nc, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v, want context.Canceled", err)
	}
}
