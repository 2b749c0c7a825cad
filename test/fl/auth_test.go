package fl

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/quant"
)

// TestAuthTLSFleetCompletesRounds is the positive end-to-end flow with
// the production security on: a fleet directory made by natsauth (the
// code behind 'edgectl auth'), a real nats-server started from the
// configuration it generates (NKey users with per-subject permissions,
// mutual TLS with a CA), a coordinator and 20 site clients each
// connecting with its own NKey, client certificate and inbox prefix. The
// sites complete two synchronous rounds (every update accepted, every
// site on version 3) and no connection ever hits a permission violation:
// the permissions are enough for the real protocol, not only tight.
// Under heavy load (load 14) it timed out twice: a site whose fetch of
// the round's base model took longer than its 2 s PublishTimeout skipped
// the synchronous round for good, and the round waited for it until its
// one-hour deadline (agent/flclient now tries again:
// TestFetchFailuresAreRetried).
func TestAuthTLSFleetCompletesRounds(t *testing.T) {
	const n = 20
	var sites []string
	for i := range n {
		sites = append(sites, fmt.Sprintf("site-%02d", i))
	}
	d := fltest.FleetDir(t, sites...)
	srv, pki := fltest.StartAuthServer(t, d, append([]string{"coordinator"}, sites...)...)

	var errMu sync.Mutex
	var connErrs []string
	dial := func(name string, cc natsauth.ClientConfig) *nats.Conn {
		t.Helper()
		cc.CAFile, cc.CertFile, cc.KeyFile = pki.CA, pki.ClientCerts[name], pki.ClientKeys[name]
		copts, err := cc.Options()
		if err != nil {
			t.Fatal(err)
		}
		copts = append(copts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			errMu.Lock()
			defer errMu.Unlock()
			connErrs = append(connErrs, name+": "+err.Error())
		}))
		return fltest.Connect(t, srv.ClientURL(), name, copts...)
	}

	fl, err := d.Load()
	if err != nil {
		t.Fatal(err)
	}
	registry, err := federated.LoadRegistry(d.File(natsauth.SitesDir))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := quant.ReadSigner(d.ModelKeyFile(fl.Signing))
	if err != nil {
		t.Fatal(err)
	}
	trust, err := quant.LoadKeyring(d.File(natsauth.ModelKeysDir))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fltest.CoordinatorConfig(t.TempDir(), registry, signer)
	cfg.AutoRounds, cfg.Rounds, cfg.MinUpdates = true, 2, n
	c, err := coordinator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Bootstrap(context.Background(), fltest.SmallModel(t, 1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	cnc := dial("coordinator", natsauth.ClientConfig{NKeySeedFile: d.CoordinatorSeed(), InboxPrefix: natsauth.CoordinatorInboxPrefix})
	wg.Go(func() {
		if err := c.Run(ctx, cnc); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("coordinator: %v", err)
		}
	})

	target := fltest.SmallModel(t, 99).Net.Flat()
	var clients []*flclient.Client
	for _, s := range sites {
		key, err := quant.ReadSigner(filepath.Join(d.SiteSecrets(s), s+".key"))
		if err != nil {
			t.Fatal(err)
		}
		scfg := flclient.DefaultConfig()
		scfg.Site, scfg.Signer, scfg.ModelKeys, scfg.DataDir = s, key, trust, filepath.Join(t.TempDir(), s)
		scfg.Trainer = &flclient.SyntheticTrainer{Target: target, Rate: 0.5, Noise: 0.001, Samples: 100}
		scfg.BackoffMin, scfg.BackoffMax, scfg.PublishTimeout, scfg.StatePoll = 10*time.Millisecond, 200*time.Millisecond, 2*time.Second, time.Second
		cl, err := flclient.New(scfg)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		clients = append(clients, cl)
		nc := dial(s, natsauth.ClientConfig{NKeySeedFile: filepath.Join(d.SiteSecrets(s), natsauth.SeedFileName), InboxPrefix: natsauth.SiteInboxPrefix(s)})
		wg.Go(func() { _ = cl.Run(ctx, nc) })
	}
	// (alone: 5-7 s; the bound only catches a fleet that stopped, and a
	// site whose fetch timed out tries again, so a loaded machine delays
	// the rounds without stopping them)
	fltest.Eventually(t, 3*time.Minute, "two rounds published and every site on version 3", func() (bool, string) {
		rs, err := c.Rounds(0)
		if err != nil || len(rs) < 2 || rs[0].State != coordinator.StatePublished {
			return false, fmt.Sprintf("%d rounds, %v", len(rs), err)
		}
		for _, cl := range clients {
			st, err := cl.Status()
			if err != nil || st.Installed == nil || st.Installed.Version != 3 {
				return false, fmt.Sprintf("%s: %+v %v", st.Site, st.Installed, err)
			}
		}
		return true, ""
	})
	rs, _ := c.Rounds(0)
	for _, r := range rs {
		if r.Accepted != n {
			t.Errorf("round %d: %d updates accepted, want %d", r.Round, r.Accepted, n)
		}
	}
	fetchRetries := 0
	for _, cl := range clients {
		st, _ := cl.Status()
		// A fetch that timed out (a loaded machine, PublishTimeout 2 s) is
		// counted as a "fetch" refusal and tried again until the model
		// installs (every site is on version 3, above); a fetch the
		// permissions refused would also be a permissions violation in
		// connErrs. Any other refusal is a failure.
		refused := st.Counters.RefusedModels - st.Counters.RefusedModelReasons[flclient.RefuseFetch]
		fetchRetries += st.Counters.RefusedModelReasons[flclient.RefuseFetch]
		if st.Counters.Accepted != 2 || refused != 0 {
			t.Errorf("%s: counters %+v", st.Site, st.Counters)
		}
	}
	if fetchRetries > 0 {
		t.Logf("%d model fetches timed out and were tried again", fetchRetries)
	}
	errMu.Lock()
	defer errMu.Unlock()
	if len(connErrs) > 0 {
		t.Fatalf("connection errors under the fleet's permissions: %q", connErrs)
	}
}
