package natstest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// readyTimeout is how long a started server may take to accept
// connections.
const readyTimeout = 10 * time.Second

// StartNATS runs an embedded JetStream server on a random loopback port
// (Port -1) with its store in t.TempDir(), until the test's cleanup.
func StartNATS(t testing.TB) *server.Server {
	t.Helper()
	return RunServer(t, &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir()})
}

// MaxStore is the JetStream file storage limit of the test servers
// (RunServer sets it when opts leave it 0). Left 0, nats-server takes a
// share of the disk free at start, so on a machine with a few GiB free a
// stream of the coordinator's default size (4 GiB) cannot be created
// ("insufficient storage resources available") and tests fail for want
// of disk they never write to.
const MaxStore = 1 << 40

// RunServer starts an embedded nats-server from opts (NoSigs is set: a
// test's signals are not the server's; a JetStream server without a
// storage limit gets MaxStore), waits until it accepts connections and
// shuts it down at the test's cleanup.
func RunServer(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	opts.NoSigs = true
	if opts.JetStream && opts.JetStreamMaxStore == 0 {
		opts.JetStreamMaxStore = MaxStore
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("nats server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		t.Fatalf("nats server not ready within %v", readyTimeout)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// Connect connects to url as name, reconnecting forever every 50 ms
// (tests take servers and links down and expect clients back), with the
// options in extra applied after those; the connection closes at the
// test's cleanup.
func Connect(t testing.TB, url, name string, extra ...nats.Option) *nats.Conn {
	t.Helper()
	opts := append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}, extra...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect %s to %s: %v", name, url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// ConsumerNames lists the consumers of a JetStream stream, sorted.
func ConsumerNames(t testing.TB, js jetstream.JetStream, stream string) []string {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range s.ConsumerNames(context.Background()).Name() {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
