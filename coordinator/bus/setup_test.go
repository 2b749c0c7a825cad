package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/internal/testutil/natstest"
)

// TestTransient: what SetupRetry retries (a server not ready yet) and
// what it returns at once (a refusal).
func TestTransient(t *testing.T) {
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
		if got := Transient(c.err); got != c.want {
			t.Errorf("Transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestSetupRetry: against a real server without JetStream, setting up
// the bus is retried until the patience runs out (not refused at once,
// which had made a coordinator started while JetStream recovered exit),
// then the error says so; a cancelled context stops the retries at once.
func TestSetupRetry(t *testing.T) {
	srv := natstest.RunServer(t, &server.Options{Host: "127.0.0.1", Port: -1}) // no JetStream
	nc := natstest.Connect(t, srv.ClientURL(), "coordinator")
	o := Options{DuplicateWindow: 2 * time.Minute, Replicas: 1, Warn: func(string, string, ...any) {}}
	const patience = 1500 * time.Millisecond
	start := time.Now()
	_, err := SetupRetry(t.Context(), nc, o, patience)
	took := time.Since(start)
	if err == nil || !(errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled)) || !strings.Contains(err.Error(), "JetStream not ready after 1.5s") {
		t.Fatalf("setup without JetStream: %v", err)
	}
	if took < patience {
		t.Fatalf("gave up after %v, before the patience of %v: not retried", took, patience)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := SetupRetry(ctx, nc, o, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v, want context.Canceled", err)
	}
}

// TestSetupStorageHint: a server whose JetStream storage is smaller than
// the update stream asks for refuses it; the error keeps the server's
// and says which limit to change (a machine with a few GiB of free disk
// and nats-server's default storage limit ran into it).
func TestSetupStorageHint(t *testing.T) {
	srv := natstest.RunServer(t, &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), JetStreamMaxStore: 1 << 30})
	nc := natstest.Connect(t, srv.ClientURL(), "coordinator")
	o := Options{DuplicateWindow: 2 * time.Minute, Replicas: 1, MaxBytes: 4 << 30, Warn: func(string, string, ...any) {}}
	_, err := Setup(t.Context(), nc, o)
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != errCodeStorageExceeded || !strings.Contains(err.Error(), "--update-max-bytes") || !strings.Contains(err.Error(), "4294967296 bytes") {
		t.Fatalf("a 4 GiB stream on 1 GiB of storage: %v", err)
	}
	if Transient(err) {
		t.Error("the refusal is retried as transient")
	}
	o.MaxBytes = 256 << 20
	if _, err := Setup(t.Context(), nc, o); err != nil {
		t.Fatalf("a 256 MiB stream on 1 GiB of storage: %v", err)
	}
}
