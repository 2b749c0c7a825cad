package natsauth_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/coordinator/region"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/quant"
)

// regionFleet: region eu of site-a and site-b, region us of site-x, all
// made with CreateRegionalSite ('edgectl auth site create --region').
var regionFleet = map[string][]string{"eu": {"site-a", "site-b"}, "us": {"site-x"}}

// TestRegionalRoundWithAuth runs a hierarchical round with
// authentication on: the root's server and region eu's server read the
// same generated configuration (NKeys, permissions, TLS); the root
// coordinator (--regions: eu), eu's aggregator and eu's two sites each
// connect with their own identity. Round 1 is published from eu's one
// aggregate, and no connection sees a permission violation. Then eu's
// identity tries what belongs to us (and to the root) and the server
// refuses each, naming the subject.
func TestRegionalRoundWithAuth(t *testing.T) {
	e := newFleetEnv(t, false, []string{"coordinator", "ops", "site-a", "site-b", "site-x", "eu", "us"}, func(d natsauth.Dir) error {
		for _, g := range []string{"eu", "us"} {
			for _, s := range regionFleet[g] {
				if _, err := d.CreateRegionalSite(s, g); err != nil {
					return err
				}
			}
		}
		return nil
	})
	hub := e.startServer(t, true) // region eu's server
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// the root counts eu's sites (round 1 closes when both are counted),
	// eu's aggregates verify with eu's key
	euKey, euPub, err := quant.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	euSites := &federated.Registry{}
	for _, s := range regionFleet["eu"] {
		if err := euSites.Add(s, e.siteKey(t, s).Public()); err != nil {
			t.Fatal(err)
		}
	}
	regions := &federated.Regions{}
	if err := regions.Add("eu", euPub, regionFleet["eu"]...); err != nil {
		t.Fatal(err)
	}
	e.startCoordinatorWith(t, euSites, func(c *coordinator.Config) { c.Regions = regions })
	deadline := time.Now().Add(60 * time.Second) // (the round takes about 2 s)

	// eu's aggregator: its identity on both servers
	cfg := region.DefaultConfig()
	cfg.Region, cfg.DataDir, cfg.Sites, cfg.Signer, cfg.PollInterval = "eu", t.TempDir(), euSites, euKey, 20*time.Millisecond
	g, err := region.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	local, localErrs := e.connectTo(t, hub.ClientURL(), "eu")
	root, rootErrs := e.connectTo(t, e.url, "eu")
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx, local, root) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("region eu: %v", err)
		}
		g.Close()
	})

	// eu's sites send to eu's server once the aggregator collects for
	// round 1 (it read the announcement and asked round.regional on the
	// root's server under its own identity)
	for round, _, _ := g.Current(); round != 1; round, _, _ = g.Current() {
		if time.Now().After(deadline) {
			t.Fatalf("region eu does not collect for round 1: errors %q %q", localErrs.all(), rootErrs.all())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, s := range regionFleet["eu"] {
		nc, _ := e.connectTo(t, hub.ClientURL(), s)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		msg := e.signedUpdate(t, s, e.siteKey(t, s), 1)
		for {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			_, err := js.Publish(pctx, federated.UpdateSubjectPrefix+s, msg, jetstream.WithMsgID(federated.MsgID(s, 1)))
			pcancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: publish to its region's server: %v", s, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for {
		r, err := e.c.RoundRecord(1)
		if err == nil && r.State == coordinator.StatePublished {
			// both of eu's sites, counted from its aggregate
			if r.Accepted != len(regionFleet["eu"]) {
				t.Fatalf("round 1 accepted %d updates, want %d (eu's sites)", r.Accepted, len(regionFleet["eu"]))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("round 1 not published: %+v %v; region's errors %q %q, coordinator's %q", r, err, localErrs.all(), rootErrs.all(), e.coordErrs.all())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for name, l := range map[string]*errLog{"region eu on its server": localErrs, "region eu on the root's": rootErrs, "coordinator": e.coordErrs} {
		for _, msg := range l.all() {
			if strings.Contains(msg, "Permissions Violation") {
				t.Errorf("%s: %s", name, msg)
			}
		}
	}

	// us's stream on us's server (its own identity may make it)
	usHub := e.startServer(t, true)
	usConn, _ := e.connectTo(t, usHub.ClientURL(), "us")
	usJS, err := jetstream.New(usConn)
	if err != nil {
		t.Fatal(err)
	}
	usStream := federated.RegionUpdateStream("us")
	if _, err := usJS.CreateStream(ctx, jetstream.StreamConfig{Name: usStream, Subjects: []string{federated.UpdateSubjectPrefix + "site-x"}}); err != nil {
		t.Fatalf("region us makes its own stream: %v", err)
	}

	// region eu's identity, on the root's server, on us's server and on
	// its own, trying what is not its own
	for _, tc := range []struct {
		name, server, kind, subject string
		sub                         bool
	}{
		{"publish an aggregate as us", e.url, "Publish", federated.RegionalSubjectPrefix + "us", false},
		{"relay an update of us's site", e.url, "Publish", federated.UpdateSubjectPrefix + "site-x", false},
		{"ack us's site", usHub.ClientURL(), "Publish", federated.AckSubjectPrefix + "site-x", false},
		{"a consumer of us's stream", usHub.ClientURL(), "Publish", "$JS.API.CONSUMER.CREATE." + usStream + "." + federated.RegionConsumer, false},
		{"a durable consumer of us's stream", usHub.ClientURL(), "Publish", "$JS.API.CONSUMER.DURABLE.CREATE." + usStream + ".mine", false},
		{"a direct get of us's stream", usHub.ClientURL(), "Publish", "$JS.API.DIRECT.GET." + usStream, false},
		{"a message get of us's stream", usHub.ClientURL(), "Publish", "$JS.API.STREAM.MSG.GET." + usStream, false},
		{"a consumer of the root's update stream", e.url, "Publish", "$JS.API.CONSUMER.CREATE." + federated.UpdateStream + "." + federated.RegionConsumer, false},
		{"us's stream's configuration", usHub.ClientURL(), "Publish", "$JS.API.STREAM.UPDATE." + usStream, false},
		{"another admin endpoint", e.url, "Publish", federated.AdminSubjectPrefix + ".round.start", false},
		{"write the state bucket", e.url, "Publish", "$KV." + federated.StateBucket + "." + federated.KeyRound, false},
		{"read updates on the wire", usHub.ClientURL(), "Subscription", federated.UpdateSubjectPrefix + ">", true},
		{"read us's inbox", e.url, "Subscription", natsauth.RegionInboxPrefix("us") + ".>", true},
		{"read the regional stream's subjects", e.url, "Subscription", federated.RegionalSubjectPrefix + "*", true},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			nc, log := e.connectTo(t, tc.server, "eu")
			if tc.sub {
				if _, err := nc.Subscribe(tc.subject, func(*nats.Msg) {}); err != nil {
					t.Fatal(err)
				}
			} else if err := nc.Publish(tc.subject, []byte("{}")); err != nil {
				t.Fatal(err)
			}
			_ = nc.Flush()
			log.wait(t, violation(tc.kind, tc.subject))
		})
	}
	// its own stream may not take us's site's subject: the server refuses
	// the overlap with us's stream
	t.Run("refused: a stream of its own over us's site", func(t *testing.T) {
		nc, _ := e.connectTo(t, usHub.ClientURL(), "eu")
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: federated.RegionUpdateStream("eu"), Subjects: []string{federated.UpdateSubjectPrefix + "site-x"}})
		if err == nil || !strings.Contains(err.Error(), "overlap") {
			t.Fatalf("got %v, want the server's subjects-overlap refusal", err)
		}
	})
}
