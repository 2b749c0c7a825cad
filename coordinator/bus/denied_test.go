package bus

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/edgesched/edgesched/internal/testutil/natstest"
)

// TestDenied: a timeout counts as refused only when the connection's last
// error is a permissions violation on a JetStream API subject naming the
// request's stream; a violation on another stream's API subject (a
// purge by another part of the process, say) or on a plain subject, or
// an error that is not a timeout, does not.
func TestDenied(t *testing.T) {
	srv := natstest.RunServer(t, &server.Options{Host: "127.0.0.1", Port: -1,
		Users: []*server.User{{Username: "u", Password: "pw", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.PURGE.>", "$JS.API.CONSUMER.DURABLE.CREATE.>", "forbidden.>"}}}}}})
	refused := make(chan error, 4)
	nc := natstest.Connect(t, srv.ClientURL(), t.Name(), nats.UserInfo("u", "pw"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { refused <- err }))
	timeout := context.DeadlineExceeded
	refuse := func(subject string) {
		t.Helper()
		if err := nc.Publish(subject, nil); err != nil {
			t.Fatal(err)
		}
		select { // (the handler runs after LastError is set)
		case err := <-refused:
			if !errors.Is(err, nats.ErrPermissionViolation) {
				t.Fatalf("publish to %s: %v, want a permissions violation", subject, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the server did not refuse %s", subject)
		}
	}
	if err := Denied(nc, timeout, "OTHER"); err != nil {
		t.Fatalf("no violation yet: %v", err)
	}
	refuse("$JS.API.STREAM.PURGE.OTHER")
	for _, tc := range []struct {
		name   string
		err    error
		stream string
		denied bool
	}{
		{"the violation's stream", timeout, "OTHER", true},
		{"a nats timeout", nats.ErrTimeout, "OTHER", true},
		{"another stream", timeout, "MINE", false},
		{"a stream named as a prefix of it", timeout, "OTH", false},
		{"not a timeout", errors.New("stream name already in use"), "OTHER", false},
	} {
		err := Denied(nc, tc.err, tc.stream)
		if (err != nil) != tc.denied || tc.denied && (!errors.Is(err, nats.ErrPermissionViolation) || !errors.Is(err, tc.err)) {
			t.Errorf("%s: Denied = %v, want denied %v (wrapping both errors)", tc.name, err, tc.denied)
		}
	}
	refuse("$JS.API.CONSUMER.DURABLE.CREATE.MINE.c1")
	if err := Denied(nc, timeout, "MINE"); !errors.Is(err, nats.ErrPermissionViolation) {
		t.Errorf("a consumer of the stream refused: Denied = %v, want the violation", err)
	}
	for _, subject := range []string{"forbidden.MINE", "forbidden.API.MINE"} {
		refuse(subject)
		if err := Denied(nc, timeout, "MINE"); err != nil {
			t.Errorf("%s refused: Denied = %v, want nil (not a JetStream API subject)", subject, err)
		}
	}
}
