package natsauth_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/esu"
)

// env is a real nats-server started from the configuration natsauth
// generates for a fleet (sites a and b active, c revoked), with TLS, and
// a real coordinator connected with its own identity.
type env struct {
	d    natsauth.Dir
	f    *natsauth.Fleet
	pki  *natsauth.PKIFiles
	srv  *server.Server
	url  string
	conf string
	c    *coordinator.Coordinator
	// coordErrs are the coordinator connection's asynchronous errors: a
	// permission the coordinator lacks shows here.
	coordErrs *errLog
}

// errLog collects a connection's asynchronous errors.
type errLog struct {
	mu   sync.Mutex
	errs []string
}

func (l *errLog) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err.Error())
}

func (l *errLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.errs...)
}

// wait polls until an error containing want arrives (or fails the test).
func (l *errLog) wait(t *testing.T, want string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, e := range l.all() {
			if strings.Contains(strings.ToLower(e), strings.ToLower(want)) {
				return e
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no error containing %q; got %q", want, l.all())
	return ""
}

func newEnv(t *testing.T, verifyClients bool) *env {
	t.Helper()
	return newFleetEnv(t, verifyClients, []string{"coordinator", "ops", "site-a", "site-b", "site-c"}, func(d natsauth.Dir) error {
		for _, s := range []string{"site-a", "site-b", "site-c"} {
			if _, err := d.CreateSite(s); err != nil {
				return err
			}
		}
		_, err := d.RevokeSite("site-c")
		return err
	})
}

// newFleetEnv is newEnv for the fleet populate makes (after Init), with
// client certificates for clients.
func newFleetEnv(t *testing.T, verifyClients bool, clients []string, populate func(natsauth.Dir) error) *env {
	t.Helper()
	e := &env{d: natsauth.Dir{Path: filepath.Join(t.TempDir(), "fleet")}}
	if _, err := e.d.Init(natsauth.InitOptions{Admins: []string{"ops"}}); err != nil {
		t.Fatal(err)
	}
	if err := populate(e.d); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.f, err = e.d.Load(); err != nil {
		t.Fatal(err)
	}
	if e.pki, err = natsauth.DevPKI(filepath.Join(t.TempDir(), "pki"), natsauth.DevPKIOptions{Hosts: []string{"127.0.0.1", "localhost"},
		Clients: clients}); err != nil {
		t.Fatal(err)
	}
	o := natsauth.DefaultServerOptions()
	o.Listen, o.StoreDir = "127.0.0.1:-1", t.TempDir()
	o.TLS = &natsauth.TLSFiles{Cert: e.pki.ServerCert, Key: e.pki.ServerKey, CA: e.pki.CA, VerifyClients: verifyClients}
	if e.conf, err = e.d.WriteServerConfig(o); err != nil {
		t.Fatal(err)
	}
	e.srv = e.startServer(t, false)
	e.url = e.srv.ClientURL()
	return e
}

// startServer starts a server from the generated configuration (every
// server of the fleet reads the same one); another has a JetStream store
// of its own (and cannot reload its configuration).
func (e *env) startServer(t *testing.T, another bool) *server.Server {
	t.Helper()
	opts, err := server.ProcessConfigFile(e.conf)
	if err != nil {
		t.Fatal(err)
	}
	opts.NoSigs = true
	if another {
		opts.StoreDir = t.TempDir()
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// client is the connection configuration of an identity, as its
// component would build it from the fleet directory's files.
func (e *env) client(name string) natsauth.ClientConfig {
	cc := natsauth.ClientConfig{CAFile: e.pki.CA, CertFile: e.pki.ClientCerts[name], KeyFile: e.pki.ClientKeys[name]}
	switch name {
	case "coordinator":
		cc.NKeySeedFile, cc.InboxPrefix = e.d.CoordinatorSeed(), natsauth.CoordinatorInboxPrefix
	case "ops":
		cc.NKeySeedFile, cc.InboxPrefix = e.d.AdminSeed(name), natsauth.AdminInboxPrefix
	case "eu", "us": // the regions of regions_test.go
		cc.NKeySeedFile, cc.InboxPrefix = e.d.RegionSeed(name), natsauth.RegionInboxPrefix(name)
	default:
		cc.NKeySeedFile, cc.InboxPrefix = filepath.Join(e.d.SiteSecrets(name), natsauth.SeedFileName), natsauth.SiteInboxPrefix(name)
	}
	return cc
}

func (e *env) dial(cc natsauth.ClientConfig, extra ...nats.Option) (*nats.Conn, *errLog, error) {
	return e.dialURL(e.url, cc, extra...)
}

func (e *env) dialURL(url string, cc natsauth.ClientConfig, extra ...nats.Option) (*nats.Conn, *errLog, error) {
	opts, err := cc.Options()
	if err != nil {
		return nil, nil, err
	}
	log := &errLog{}
	opts = append(opts, nats.ErrorHandler(log.handler), nats.Timeout(3*time.Second))
	nc, err := nats.Connect(url, append(opts, extra...)...)
	return nc, log, err
}

func (e *env) connect(t *testing.T, name string) (*nats.Conn, *errLog) {
	t.Helper()
	return e.connectTo(t, e.url, name)
}

// connectTo connects as name to the server at url.
func (e *env) connectTo(t *testing.T, url, name string) (*nats.Conn, *errLog) {
	t.Helper()
	nc, log, err := e.dialURL(url, e.client(name))
	if err != nil {
		t.Fatalf("connect as %s: %v", name, err)
	}
	t.Cleanup(nc.Close)
	return nc, log
}

// startCoordinator runs a real coordinator with the fleet's coordinator
// identity, model key and site directory, and opens round 1.
func (e *env) startCoordinator(t *testing.T) {
	t.Helper()
	sites, err := federated.LoadRegistry(e.d.File(natsauth.SitesDir))
	if err != nil {
		t.Fatal(err)
	}
	e.startCoordinatorWith(t, sites, nil)
}

// startCoordinatorWith is startCoordinator for sites, edit (when set)
// editing the configuration.
func (e *env) startCoordinatorWith(t *testing.T, sites *federated.Registry, edit func(*coordinator.Config)) {
	t.Helper()
	signer, err := quant.ReadSigner(e.d.ModelKeyFile(e.f.Signing))
	if err != nil {
		t.Fatal(err)
	}
	cfg := coordinator.DefaultConfig()
	cfg.DataDir, cfg.Sites, cfg.Signer = t.TempDir(), sites, signer
	cfg.Calibrate = func(context.Context, *nn.Model) ([]float32, error) {
		rng := rand.New(rand.NewPCG(4, 4))
		rows := make([]float32, 500*policy.NumFeatures)
		for i := range rows {
			rows[i] = float32(rng.NormFloat64())
		}
		return rows, nil
	}
	cfg.RoundDuration, cfg.PollInterval = time.Hour, 20*time.Millisecond
	cfg.Local = federated.LocalTraining{Iterations: 1, Episodes: 1, LR: 1e-3}
	// the server's storage limit comes from its configuration file (a
	// share of the free disk) and reloads with it: a test-sized stream
	cfg.UpdateMaxBytes = 256 << 20
	if edit != nil {
		edit(&cfg)
	}
	c, err := coordinator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	net, err := nn.NewNet(policy.NumFeatures, 8, 8, 8, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Bootstrap(context.Background(), &nn.Model{Schema: policy.NewSchema(), Net: net}); err != nil {
		t.Fatal(err)
	}
	nc, log := e.connect(t, "coordinator")
	e.coordErrs = log
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, nc) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("coordinator: %v", err)
		}
		c.Close()
	})
	e.c = c
	// wait for the bus (bucket and model notice), then open round 1 and
	// wait for its announcement
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	waitKey := func(key string) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			kv, err := js.KeyValue(ctx, federated.StateBucket)
			if err == nil {
				if _, err = kv.Get(ctx, key); err == nil {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("state key %s: %v", key, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitKey(federated.KeyModel)
	if _, err := c.StartRound(ctx); err != nil {
		t.Fatalf("start round: %v", err)
	}
	waitKey(federated.KeyRound)
}

// violation is the server's refusal as the client reports it.
func violation(kind, subject string) string {
	return fmt.Sprintf("Permissions Violation for %s to %q", kind, subject)
}

// violationPrefix matches a refusal of any subject starting with prefix.
func violationPrefix(kind, prefix string) string {
	return fmt.Sprintf("Permissions Violation for %s to \"%s", kind, prefix)
}

// signedUpdate is an update of site for the current round, signed with
// key (the site's own, or another's to impersonate), with seq.
func (e *env) signedUpdate(t *testing.T, site string, key *quant.Signer, seq uint64) []byte {
	t.Helper()
	r, err := e.c.RoundRecord(1)
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.c.FloatModel(r.BaseVersion)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := esu.Encode(&esu.Update{Base: r.BaseModel, Values: make([]float32, m.Net.NumParams())}, esu.DefaultOptions(seq))
	if err != nil {
		t.Fatal(err)
	}
	b, err := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: site, Seq: seq, Round: r.Round, BaseModel: r.BaseModel,
		BaseVersion: r.BaseVersion, Samples: 10, Created: time.Now().UTC()}, payload, key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (e *env) siteKey(t *testing.T, site string) *quant.Signer {
	t.Helper()
	s, err := quant.ReadSigner(filepath.Join(e.d.SiteSecrets(site), site+".key"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAuthorisationRefusals tries every action the fleet's permissions
// forbid, each as its own case, against the real server with the
// generated configuration and TLS, and asserts the server's refusal
// naming the subject. Positive controls first show the same identities
// can do what they must (so the refusals are not a server refusing
// everything), and the coordinator runs throughout under its own
// permissions without a single violation.
func TestAuthorisationRefusals(t *testing.T) {
	e := newEnv(t, false)
	e.startCoordinator(t)
	ctx := context.Background()

	siteA, logA := e.connect(t, "site-a")
	jsA, err := jetstream.New(siteA)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("positive: a site reads the state, fetches model metadata and gets acks for its own updates", func(t *testing.T) {
		kv, err := jsA.KeyValue(ctx, federated.StateBucket)
		if err != nil {
			t.Fatal(err)
		}
		var notice *federated.ModelNotice
		deadline := time.Now().Add(10 * time.Second)
		for notice == nil && time.Now().Before(deadline) {
			if en, err := kv.Get(ctx, federated.KeyModel); err == nil {
				notice, err = federated.DecodeModelNotice(en.Value())
				if err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		if notice == nil {
			t.Fatal("no model notice readable")
		}
		if _, err := kv.Get(ctx, federated.KeyRound); err != nil {
			t.Fatalf("read the round: %v", err)
		}
		obs, err := jsA.ObjectStore(ctx, federated.ModelBucket)
		if err != nil {
			t.Fatal(err)
		}
		info, err := obs.GetInfo(ctx, notice.Int8Object)
		if err != nil || info.Size == 0 {
			t.Fatalf("model metadata: %+v %v", info, err)
		}
		acks, err := siteA.SubscribeSync(federated.AckSubjectPrefix + "site-a")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := jsA.Publish(ctx, federated.UpdateSubjectPrefix+"site-a", e.signedUpdate(t, "site-a", e.siteKey(t, "site-a"), 1)); err != nil {
			t.Fatalf("publish own update: %v", err)
		}
		m, err := acks.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("own ack: %v", err)
		}
		a, err := federated.DecodeAck(m.Data)
		if err != nil || a.Status != federated.Accepted {
			t.Fatalf("ack %+v %v, want accepted", a, err)
		}
	})

	kvA, err := jsA.KeyValue(ctx, federated.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	obsA, err := jsA.ObjectStore(ctx, federated.ModelBucket)
	if err != nil {
		t.Fatal(err)
	}
	timeout := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 300*time.Millisecond) }
	subscribe := func(nc *nats.Conn, subj string) func() error {
		return func() error { _, err := nc.SubscribeSync(subj); return err }
	}
	publish := func(nc *nats.Conn, subj string) func() error {
		return func() error { return nc.Publish(subj, []byte("{}")) }
	}
	request := func(nc *nats.Conn, subj string) func() error {
		return func() error { _, err := nc.Request(subj, []byte("{}"), 300*time.Millisecond); return err }
	}
	admin, logAdmin := e.connect(t, "ops")
	coordPeer, logCoord := e.connect(t, "coordinator") // a second connection with the coordinator's identity

	cases := []struct {
		name string
		log  *errLog
		act  func() error
		want string
	}{
		{"site publishes as another site (JetStream)", logA, func() error {
			c, cancel := timeout()
			defer cancel()
			_, err := jsA.Publish(c, federated.UpdateSubjectPrefix+"site-b", e.signedUpdate(t, "site-a", e.siteKey(t, "site-a"), 2))
			return err
		}, violation("Publish", "edgesched.update.site-b")},
		{"site publishes as another site (core)", logA, publish(siteA, "edgesched.update.site-b"), violation("Publish", "edgesched.update.site-b")},
		{"site publishes another site's status", logA, publish(siteA, "edgesched.status.site-b"), violation("Publish", "edgesched.status.site-b")},
		{"site forges another site's ack", logA, publish(siteA, "edgesched.ack.site-b"), violation("Publish", "edgesched.ack.site-b")},
		{"site subscribes to the update subjects", logA, subscribe(siteA, "edgesched.update.>"), violation("Subscription", "edgesched.update.>")},
		{"site subscribes to its own update subject", logA, subscribe(siteA, "edgesched.update.site-a"), violation("Subscription", "edgesched.update.site-a")},
		{"site reads the update stream with a consumer", logA, func() error {
			c, cancel := timeout()
			defer cancel()
			_, err := jsA.CreateOrUpdateConsumer(c, federated.UpdateStream, jetstream.ConsumerConfig{Durable: "spy"})
			return err
		}, violation("Publish", "$JS.API.CONSUMER.CREATE.EDGESCHED_UPDATES.spy")},
		{"site pulls from the coordinator's consumer", logA, request(siteA, "$JS.API.CONSUMER.MSG.NEXT.EDGESCHED_UPDATES.coordinator"),
			violation("Publish", "$JS.API.CONSUMER.MSG.NEXT.EDGESCHED_UPDATES.coordinator")},
		{"site reads an update by sequence", logA, request(siteA, "$JS.API.STREAM.MSG.GET.EDGESCHED_UPDATES"), violation("Publish", "$JS.API.STREAM.MSG.GET.EDGESCHED_UPDATES")},
		{"site reads an update by direct get", logA, request(siteA, "$JS.API.DIRECT.GET.EDGESCHED_UPDATES"), violation("Publish", "$JS.API.DIRECT.GET.EDGESCHED_UPDATES")},
		{"site subscribes to another site's acks", logA, subscribe(siteA, "edgesched.ack.site-b"), violation("Subscription", "edgesched.ack.site-b")},
		{"site subscribes to every ack", logA, subscribe(siteA, "edgesched.ack.*"), violation("Subscription", "edgesched.ack.*")},
		{"site subscribes to another site's inbox", logA, subscribe(siteA, "_INBOX.site.site-b.>"), violation("Subscription", "_INBOX.site.site-b.>")},
		{"site subscribes to every inbox", logA, subscribe(siteA, "_INBOX.>"), violation("Subscription", "_INBOX.>")},
		{"site subscribes to the coordinator's inbox", logA, subscribe(siteA, "_INBOX.coordinator.>"), violation("Subscription", "_INBOX.coordinator.>")},
		{"site writes the round", logA, func() error {
			c, cancel := timeout()
			defer cancel()
			_, err := kvA.Put(c, federated.KeyRound, []byte(`{"v":1}`))
			return err
		}, violation("Publish", "$KV.EDGESCHED_STATE.round")},
		{"site deletes the model notice", logA, func() error {
			c, cancel := timeout()
			defer cancel()
			return kvA.Delete(c, federated.KeyModel)
		}, violation("Publish", "$KV.EDGESCHED_STATE.model")},
		{"site purges the state bucket", logA, request(siteA, "$JS.API.STREAM.PURGE.KV_EDGESCHED_STATE"), violation("Publish", "$JS.API.STREAM.PURGE.KV_EDGESCHED_STATE")},
		{"site publishes a model", logA, func() error {
			c, cancel := timeout()
			defer cancel()
			_, err := obsA.PutBytes(c, "v000099.int8.esa", []byte("not a model"))
			return err
		}, violationPrefix("Publish", "$O.EDGESCHED_MODELS.C.")},
		{"site overwrites model metadata", logA, publish(siteA, "$O.EDGESCHED_MODELS.M.djAwMDAwMS5pbnQ4LmVzYQ=="), violationPrefix("Publish", "$O.EDGESCHED_MODELS.M.")},
		{"site deletes the update stream", logA, request(siteA, "$JS.API.STREAM.DELETE.EDGESCHED_UPDATES"), violation("Publish", "$JS.API.STREAM.DELETE.EDGESCHED_UPDATES")},
		{"site creates a push consumer on the state bucket (delivery-subject attack)", logA, func() error {
			c, cancel := timeout()
			defer cancel()
			_, err := jsA.CreateOrUpdateConsumer(c, "KV_"+federated.StateBucket, jetstream.ConsumerConfig{Name: "x", DeliverSubject: "edgesched.admin.model.rollback"})
			return err
		}, violationPrefix("Publish", "$JS.API.CONSUMER.CREATE.KV_EDGESCHED_STATE.")},
		{"site calls the admin API", logA, request(siteA, "edgesched.admin.model.rollback"), violation("Publish", "edgesched.admin.model.rollback")},
		{"site serves the admin API", logA, subscribe(siteA, "edgesched.admin.>"), violation("Subscription", "edgesched.admin.>")},
		{"admin publishes an update", logAdmin, publish(admin, "edgesched.update.site-a"), violation("Publish", "edgesched.update.site-a")},
		{"admin writes the model notice", logAdmin, publish(admin, "$KV.EDGESCHED_STATE.model"), violation("Publish", "$KV.EDGESCHED_STATE.model")},
		{"admin reads a site's inbox", logAdmin, subscribe(admin, "_INBOX.site.site-a.>"), violation("Subscription", "_INBOX.site.site-a.>")},
		{"coordinator identity publishes an update", logCoord, publish(coordPeer, "edgesched.update.site-a"), violation("Publish", "edgesched.update.site-a")},
		{"coordinator identity reads a site's inbox", logCoord, subscribe(coordPeer, "_INBOX.site.site-a.>"), violation("Subscription", "_INBOX.site.site-a.>")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.act()
			got := tc.log.wait(t, tc.want)
			t.Logf("refused: %s (call returned %v)", got, err)
		})
	}

	t.Run("the server still holds the updates and models intact", func(t *testing.T) {
		js, err := jetstream.New(admin)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{federated.UpdateStream, "KV_" + federated.StateBucket, "OBJ_" + federated.ModelBucket} {
			if _, err := js.Stream(ctx, s); err != nil {
				t.Errorf("stream %s: %v", s, err)
			}
		}
		st, _ := js.Stream(ctx, federated.UpdateStream)
		info, _ := st.Info(ctx)
		// one update ever stored: site-a's own (the positive control);
		// nothing else got in (the coordinator removes what it judged, so
		// the stream's last sequence counts, not its messages)
		if info.State.LastSeq != 1 {
			t.Errorf("update stream stored %d messages, want 1", info.State.LastSeq)
		}
	})
	if errs := e.coordErrs.all(); len(errs) > 0 {
		t.Errorf("the coordinator hit errors under its permissions: %q", errs)
	}
}

// TestUpdateImpersonation: what permissions cannot see, signatures and
// the subject binding refuse. A site signing an update in another site's
// name is refused as bad_signature; a site relaying another site's
// genuine update on its own subject is refused as wrong_subject without
// touching the real site's record, whose own later copy is then accepted.
func TestUpdateImpersonation(t *testing.T) {
	e := newEnv(t, false)
	e.startCoordinator(t)
	ctx := context.Background()
	siteA, _ := e.connect(t, "site-a")
	siteB, _ := e.connect(t, "site-b")
	jsA, _ := jetstream.New(siteA)
	jsB, _ := jetstream.New(siteB)
	keyA, keyB := e.siteKey(t, "site-a"), e.siteKey(t, "site-b")
	rejected := func(reason string) uint64 {
		r, err := e.c.Rejects()
		if err != nil {
			t.Fatal(err)
		}
		return r[reason]
	}
	waitReject := func(t *testing.T, reason string, n uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for rejected(reason) < n {
			if time.Now().After(deadline) {
				r, _ := e.c.Rejects()
				t.Fatalf("no %s rejection: %v", reason, r)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Run("site signs an update in another site's name", func(t *testing.T) {
		if _, err := jsA.Publish(ctx, "edgesched.update.site-a", e.signedUpdate(t, "site-b", keyA, 1)); err != nil {
			t.Fatal(err)
		}
		waitReject(t, federated.ReasonSignature, 1)
	})
	genuine := e.signedUpdate(t, "site-b", keyB, 1)
	t.Run("site relays another site's genuine update", func(t *testing.T) {
		if _, err := jsA.Publish(ctx, "edgesched.update.site-a", genuine); err != nil {
			t.Fatal(err)
		}
		waitReject(t, federated.ReasonSubject, 1)
		sites, err := e.c.Sites()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sites {
			if s.Site.Site == "site-b" && s.HWM != 0 {
				t.Fatalf("site-b's record moved: %+v", s.Site)
			}
		}
	})
	t.Run("the real site's own copy is still accepted", func(t *testing.T) {
		acks, err := siteB.SubscribeSync(federated.AckSubjectPrefix + "site-b")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := jsB.Publish(ctx, "edgesched.update.site-b", genuine); err != nil {
			t.Fatal(err)
		}
		m, err := acks.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if a, err := federated.DecodeAck(m.Data); err != nil || a.Status != federated.Accepted {
			t.Fatalf("ack %+v %v, want accepted", a, err)
		}
	})
}

// TestConnectionRefusals: identities the server does not know, or that do
// not speak TLS as configured, cannot connect at all.
func TestConnectionRefusals(t *testing.T) {
	e := newEnv(t, true) // mutual TLS
	other, err := natsauth.DevPKI(filepath.Join(t.TempDir(), "other"), natsauth.DevPKIOptions{Hosts: []string{"127.0.0.1"}, Clients: []string{"site-a"}})
	if err != nil {
		t.Fatal(err)
	}
	stranger := filepath.Join(t.TempDir(), "stranger.nk")
	kp, err := natsauth.NewUserKey(nil)
	if err == nil {
		err = natsauth.WriteSeedFile(stranger, kp)
	}
	if err != nil {
		t.Fatal(err)
	}
	leaky := filepath.Join(t.TempDir(), "leaky.nk")
	raw, _ := os.ReadFile(e.client("site-a").NKeySeedFile)
	if err := os.WriteFile(leaky, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if nc, _, err := e.dial(e.client("site-a")); err != nil {
		t.Fatalf("positive control: site-a cannot connect: %v", err)
	} else {
		nc.Close()
	}
	cases := []struct {
		name string
		cc   func() natsauth.ClientConfig
		want string
	}{
		{"unauthenticated client", func() natsauth.ClientConfig {
			c := e.client("site-a")
			c.NKeySeedFile = ""
			return c
		}, "Authorization Violation"},
		{"wrong nkey", func() natsauth.ClientConfig {
			c := e.client("site-a")
			c.NKeySeedFile = stranger
			return c
		}, "Authorization Violation"},
		{"revoked site", func() natsauth.ClientConfig { return e.client("site-c") }, "Authorization Violation"},
		{"client without the fleet's CA", func() natsauth.ClientConfig {
			return natsauth.ClientConfig{NKeySeedFile: e.client("site-a").NKeySeedFile}
		}, "certificate signed by unknown authority"},
		// the server ends the handshake; what the client reads first (the
		// alert or a broken pipe) varies, both say tls
		{"no client certificate (mutual TLS)", func() natsauth.ClientConfig {
			c := e.client("site-a")
			c.CertFile, c.KeyFile = "", ""
			return c
		}, "tls"},
		{"client certificate from another CA", func() natsauth.ClientConfig {
			c := e.client("site-a")
			c.CertFile, c.KeyFile = other.ClientCerts["site-a"], other.ClientKeys["site-a"]
			return c
		}, "tls"},
		{"server certificate from another CA", func() natsauth.ClientConfig {
			c := e.client("site-a")
			c.CAFile = other.CA
			return c
		}, "certificate"},
		{"seed file readable by others", func() natsauth.ClientConfig {
			c := e.client("site-a")
			c.NKeySeedFile = leaky
			return c
		}, "readable by its owner only"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc, _, err := e.dial(tc.cc(), nats.NoReconnect())
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.want)) {
				t.Fatalf("refused with %v, want %q", err, tc.want)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// TestRevokeWhileConnected: revoking a connected site and reloading the
// server's configuration closes its connection, and it cannot come back.
func TestRevokeWhileConnected(t *testing.T) {
	e := newEnv(t, false)
	closed := make(chan struct{})
	nc, log, err := e.dial(e.client("site-b"), nats.MaxReconnects(3), nats.ReconnectWait(50*time.Millisecond),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := e.d.RevokeSite("site-b"); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatalf("revoked site still connected (status %v)", nc.Status())
	}
	log.wait(t, "authorization violation")
}

// TestPlaintextRefused: a client speaking plain NATS to the fleet's server
// (no TLS) is told TLS is required and gets nothing else.
func TestPlaintextRefused(t *testing.T) {
	e := newEnv(t, false)
	conn, err := net.DialTimeout("tcp", e.srv.Addr().String(), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	info, err := r.ReadString('\n')
	if err != nil || !strings.Contains(info, `"tls_required":true`) {
		t.Fatalf("server INFO %q %v: want tls_required", info, err)
	}
	if _, err := conn.Write([]byte("CONNECT {\"verbose\":false}\r\nSUB edgesched.update.> 1\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	// the server answers nothing (no PONG, no message) and hangs up: the
	// TLS handshake it waits for never came
	var got strings.Builder
	var end error
	for end == nil {
		var line string
		line, end = r.ReadString('\n')
		got.WriteString(line)
	}
	if s := got.String(); strings.Contains(s, "PONG") || strings.Contains(s, "+OK") || errors.Is(end, os.ErrDeadlineExceeded) {
		t.Fatalf("plaintext session got %q, ended by %v; want the connection closed unanswered", s, end)
	}
	t.Logf("plaintext session: %q, then %v", got.String(), end)
}
