package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/natstest"
)

// fakeBackend answers the admin API from memory and records the calls
// that reached it.
type fakeBackend struct {
	mu    sync.Mutex
	calls []string
	sites int // how many sites Sites answers
	// block makes StartRound wait for its context (a promotion publishing
	// to a stuck server), after closing entered
	block   bool
	entered chan struct{}
}

func (f *fakeBackend) called(format string, a ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, a...))
}

func (f *fakeBackend) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeBackend) StartRound(ctx context.Context) (*store.Round, error) {
	f.called("StartRound")
	if f.block {
		close(f.entered)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &store.Round{Round: 1}, nil
}
func (f *fakeBackend) CurrentRound() (*store.Round, error) { return &store.Round{Round: 1}, nil }
func (f *fakeBackend) RoundRecord(n uint64) (*store.Round, error) {
	return &store.Round{Round: n}, nil
}
func (f *fakeBackend) Rounds(limit int) ([]store.Round, error) {
	f.called("Rounds(%d)", limit)
	return nil, nil
}
func (f *fakeBackend) Models(limit int) ([]store.Model, error) {
	f.called("Models(%d)", limit)
	if limit == 999 {
		return nil, fmt.Errorf("%w: the newest 998 models are more than 64 MiB", ErrTooLarge)
	}
	return nil, nil
}
func (f *fakeBackend) ModelRecord(v uint64) (*store.Model, error) {
	return &store.Model{Version: v}, nil
}
func (f *fakeBackend) Promote(_ context.Context, v uint64) (*store.Model, error) {
	f.called("Promote(%d)", v)
	return &store.Model{Version: v}, nil
}
func (f *fakeBackend) Rollback(_ context.Context, v uint64) (*store.Model, error) {
	f.called("Rollback(%d)", v)
	return &store.Model{Version: v}, nil
}
func (f *fakeBackend) SitesPage(after string, limit int) ([]SiteStatus, error) {
	f.called("SitesPage(%q, %d)", after, limit)
	var out []SiteStatus
	for i := range f.sites {
		if name := fmt.Sprintf("site-%05d", i); name > after && (limit == 0 || len(out) < limit) {
			out = append(out, SiteStatus{Site: store.Site{Site: name, HWM: 12345}, Registered: true})
		}
	}
	return out, nil
}
func (f *fakeBackend) RegionalRound(n uint64) (*RegionalRound, error) { return nil, nil }
func (f *fakeBackend) RegionStatuses() ([]RegionStatus, error)        { return nil, nil }
func (f *fakeBackend) Rejects() (map[string]uint64, error)            { return nil, nil }
func (f *fakeBackend) HA() HAStatus                                   { return HAStatus{} }
func (f *fakeBackend) BackupNow() (string, int64, error)              { return "", 0, nil }

// serveFake serves b on an embedded server whose max_payload is 64 KiB
// until ctx ends, and returns a client connection.
func serveFake(t *testing.T, ctx context.Context, b *fakeBackend) *nats.Conn {
	t.Helper()
	srv := natstest.RunServer(t, &server.Options{Host: "127.0.0.1", Port: -1, MaxPayload: 64 << 10})
	nc := natstest.Connect(t, srv.ClientURL(), "coordinator")
	svc, err := Serve(ctx, nc, b, errors.New("conflict"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	if err := nc.Flush(); err != nil { // the endpoints' subscriptions are the server's
		t.Fatal(err)
	}
	return natstest.Connect(t, srv.ClientURL(), "edgectl")
}

// call sends body to endpoint and returns the answer's error code and
// description ("" when it answered data).
func call(t *testing.T, nc *nats.Conn, endpoint, body string) (code, desc string) {
	t.Helper()
	msg, err := nc.Request(federated.AdminSubjectPrefix+"."+endpoint, []byte(body), 5*time.Second)
	if err != nil {
		t.Fatalf("%s %s: no answer: %v", endpoint, body, err)
	}
	return msg.Header.Get(micro.ErrorCodeHeader), msg.Header.Get(micro.ErrorHeader)
}

// TestRequestsValidated: a list limit beyond MaxListLimit or below 0, an
// unknown field (a body meant for something else: here a model notice,
// which a misdirected consumer would deliver) and a promotion or
// rollback naming no version are refused with 400 and a description
// that names the problem, and never reach the backend.
func TestRequestsValidated(t *testing.T) {
	b := &fakeBackend{}
	nc := serveFake(t, t.Context(), b)
	notice := `{"v":1,"version":3,"round":2,"float_model":"ab","float_object":"x","int8_model":"cd","int8_object":"y","published":"2026-01-01T00:00:00Z"}`
	for _, tc := range []struct{ endpoint, body, want string }{
		{EndpointRoundList, `{"limit":100000000}`, "limit 100000000"},
		{EndpointModelList, `{"limit":-1}`, "limit -1"},
		{EndpointModelRollback, notice, `unknown field "v"`},
		{EndpointRoundStatus, `{"rond":3}`, `unknown field "rond"`},
		{EndpointModelPromote, ``, "version is required"},
		{EndpointModelRollback, `{}`, "version is required"},
		{EndpointRoundList, `{"limit":5} {"limit":7}`, "trailing data"},
		{EndpointSites, `{"after":"Site_A"}`, `after "Site_A": not a site name`},
	} {
		code, desc := call(t, nc, tc.endpoint, tc.body)
		if code != "400" || !strings.Contains(desc, tc.want) {
			t.Errorf("%s %s: answer %q %q, want 400 naming %q", tc.endpoint, tc.body, code, desc, tc.want)
		}
	}
	if calls := b.Calls(); len(calls) > 0 {
		t.Errorf("refused requests reached the backend: %v", calls)
	}
	// what is valid still passes
	if code, desc := call(t, nc, EndpointRoundList, `{"limit":1000}`); code != "" {
		t.Fatalf("limit 1000: %s %s", code, desc)
	}
	if code, desc := call(t, nc, EndpointModelPromote, `{"version":4}`); code != "" {
		t.Fatalf("promote 4: %s %s", code, desc)
	}
	if got, want := b.Calls(), []string{"Rounds(1000)", "Promote(4)"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("backend calls %v, want %v", got, want)
	}
}

// TestAnswerOverMaxPayload: an answer larger than the server's
// max_payload (the sites of a large fleet) is answered with 413 naming
// the sizes, not left unanswered for the client to time out on.
func TestAnswerOverMaxPayload(t *testing.T) {
	b := &fakeBackend{sites: 2000} // about 200 KB of JSON, the server takes 64 KiB
	nc := serveFake(t, t.Context(), b)
	code, desc := call(t, nc, EndpointSites, "")
	if code != "413" || !strings.Contains(desc, "max_payload (65536 bytes)") || !strings.Contains(desc, "ask for fewer (limit)") {
		t.Fatalf("answer %q %q, want 413 naming max_payload and the limit", code, desc)
	}
	// a page of them fits, and the request's paging reaches the backend
	if code, desc := call(t, nc, EndpointSites, `{"after":"site-00099","limit":100}`); code != "" {
		t.Fatalf("a page of 100 sites: %s %s", code, desc)
	}
	if got, want := b.Calls(), []string{`SitesPage("", 0)`, `SitesPage("site-00099", 100)`}; !slices.Equal(got, want) {
		t.Fatalf("backend calls %v, want %v", got, want)
	}
	b.sites = 10
	if code, desc := call(t, nc, EndpointSites, ""); code != "" {
		t.Fatalf("small answer: %s %s", code, desc)
	}
	// a backend that refuses to make a list too large answers 413 too
	if code, desc := call(t, nc, EndpointModelList, `{"limit":999}`); code != "413" || !strings.Contains(desc, "more than 64 MiB") {
		t.Fatalf("listing refused by the backend: %q %q, want 413", code, desc)
	}
}

// TestRequestsEndWithServeContext: a request under way when Serve's
// context ends (the coordinator stopping) is cancelled and answered at
// once instead of holding the backend for up to two minutes, and one
// that comes later is answered 503.
func TestRequestsEndWithServeContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	b := &fakeBackend{block: true, entered: make(chan struct{})}
	nc := serveFake(t, ctx, b)
	type answer struct {
		msg *nats.Msg
		err error
	}
	done := make(chan answer, 1)
	go func() {
		msg, err := nc.Request(federated.AdminSubjectPrefix+"."+EndpointRoundStart, nil, 5*time.Second)
		done <- answer{msg, err}
	}()
	select {
	case <-b.entered:
	case a := <-done:
		t.Fatalf("round.start answered before reaching the backend: %v", a.err)
	}
	cancel()
	a := <-done
	if a.err != nil {
		t.Fatalf("the request under way was not answered: %v", a.err)
	}
	if code := a.msg.Header.Get(micro.ErrorCodeHeader); code != "500" || !strings.Contains(a.msg.Header.Get(micro.ErrorHeader), "canceled") {
		t.Fatalf("answer %q %q, want 500 context canceled", code, a.msg.Header.Get(micro.ErrorHeader))
	}
	if code, desc := call(t, nc, EndpointRoundStart, ""); code != "503" {
		t.Fatalf("after the end: %q %q, want 503", code, desc)
	}
}
