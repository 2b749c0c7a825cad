package region

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/internal/testutil/natstest"
)

// TestRunStreamAgeLimit: the region's update stream keeps its sites'
// updates for at most StreamMaxAge. The aggregator acks what it judged
// but cannot purge it (its NATS permissions: stream create, update and
// info only), and the stream had no limit: the region's server kept every
// update ever sent, until its disk filled. A stream an earlier version
// created without a limit gets it.
func TestRunStreamAgeLimit(t *testing.T) {
	srv := natstest.StartNATS(t)
	nc := natstest.Connect(t, srv.ClientURL(), t.Name())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stream := federated.RegionUpdateStream("eu")
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{federated.UpdateSubjectPrefix + "s1"},
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute, MaxMsgSize: federated.MaxUpdateBytes}); err != nil {
		t.Fatal(err)
	}
	reg, _ := testSites(t, "s1")
	ended := runAggregator(t, newAggregator(t, reg), nc)
	var got jetstream.StreamConfig
	fltest.Eventually(t, 10*time.Second, "the region's stream limited by age", func() (bool, string) {
		ended()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return false, err.Error()
		}
		got = s.CachedInfo().Config
		return got.MaxAge == StreamMaxAge, fmt.Sprintf("max age %v, want %v", got.MaxAge, StreamMaxAge)
	})
	if got.Duplicates != 2*time.Minute {
		t.Fatalf("duplicates window %v, want 2m", got.Duplicates)
	}
}

// TestRunSetupRetried: the region's server not ready when the aggregator
// starts (its JetStream not yet up: both restarted by a node's reboot)
// is waited for with backoff, rather than ending Run, and with it the
// process (which its supervisor then starts again at growing intervals).
func TestRunSetupRetried(t *testing.T) {
	dir := t.TempDir()
	first := natstest.RunServer(t, &server.Options{Host: "127.0.0.1", Port: -1}) // (no JetStream yet)
	port := first.Addr().(*net.TCPAddr).Port
	nc := natstest.Connect(t, first.ClientURL(), t.Name())
	reg, _ := testSites(t, "s1")
	ended := runAggregator(t, newAggregator(t, reg), nc)
	// the first attempt is refused (no JetStream), then the server
	// restarts with it
	fltest.Eventually(t, 10*time.Second, "a refused attempt", func() (bool, string) {
		ended()
		return first.NumSubscriptions() > 0 && nc.Stats().OutMsgs > 0, "none yet"
	})
	first.Shutdown()
	srv := natstest.RunServer(t, &server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir})
	js, err := jetstream.New(natstest.Connect(t, srv.ClientURL(), "probe"))
	if err != nil {
		t.Fatal(err)
	}
	fltest.Eventually(t, 30*time.Second, "the region's stream and consumer", func() (bool, string) {
		ended()
		_, err := js.Consumer(context.Background(), federated.RegionUpdateStream("eu"), consumerName)
		return err == nil, fmt.Sprint(err)
	})
}

// TestRunSetupDenied: a user the region's server refuses the JetStream
// request that creates the stream (its permissions) sees only a timeout;
// the setup retried it for ever, as if the server were not ready. Run now
// ends with the permissions violation named (bus.Denied), well before its
// context, after the first request's timeout (jetstream's default 5 s).
func TestRunSetupDenied(t *testing.T) {
	srv := natstest.RunServer(t, &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		Users: []*server.User{{Username: "region", Password: "pw", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.CREATE.>"}}}}}})
	nc := natstest.Connect(t, srv.ClientURL(), t.Name(), nats.UserInfo("region", "pw"))
	reg, _ := testSites(t, "s1")
	// no deadline (a process's context has none), so each request takes
	// jetstream's default timeout; the test's limit cancels it
	ctx, cancel := context.WithCancel(context.Background())
	defer time.AfterFunc(2*time.Minute, cancel).Stop()
	defer cancel()
	err := newAggregator(t, reg).Run(ctx, nc, nc)
	if !errors.Is(err, nats.ErrPermissionViolation) || ctx.Err() != nil {
		t.Fatalf("Run = %v (context: %v), want a permissions violation before the context ends", err, ctx.Err())
	}
	if !strings.Contains(err.Error(), "$JS.API.STREAM.CREATE."+federated.RegionUpdateStream("eu")) {
		t.Fatalf("Run = %v, want the refused subject named", err)
	}
}
