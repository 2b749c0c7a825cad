package auth_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"

	"github.com/edgesched/edgesched/internal/testutil/natstest"
)

// initFleet runs 'edgectl auth init' in a new directory.
func initFleet(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fleet")
	if _, _, err := run(t, "auth", "init", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

func TestAuthInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fleet")
	out, _, err := run(t, "auth", "init", "--dir", dir, "--admin", "alice,bob")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"coordinator  coordinator  nkey U", "admin        alice", "admin        bob", "model key    model-1  ed25519:"} {
		if !strings.Contains(out, want) {
			t.Errorf("init output lacks %q:\n%s", want, out)
		}
	}
	d := natsauth.Dir{Path: dir}
	for _, p := range []string{d.CoordinatorSeed(), d.AdminSeed("alice"), d.ModelKeyFile("model-1")} {
		if m := mode(t, p); m != 0o600 {
			t.Errorf("%s: mode %#o, want 0600", p, m)
		}
	}
	if _, err := natsauth.ReadSeedFile(d.CoordinatorSeed()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "auth", "init", "--dir", dir); !errors.Is(err, natsauth.ErrExists) {
		t.Fatalf("init twice: %v", err)
	}
	if _, _, err := run(t, "auth", "init", "--dir", filepath.Join(t.TempDir(), "x"), "--admin", "Bad_Name"); !errors.Is(err, natsauth.ErrIdentity) {
		t.Fatalf("bad admin name: %v", err)
	}
}

func TestAuthSiteCreate(t *testing.T) {
	dir := initFleet(t)
	out, _, err := run(t, "auth", "site", "create", "store-1", "--dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"site store-1", `"edgesched.update.store-1"`, `"_INBOX.site.store-1.>"`, "nats-server --signal reload", "restart edge-coordinator"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	d := natsauth.Dir{Path: dir}
	sec := d.SiteSecrets("store-1")
	for _, p := range []string{filepath.Join(sec, natsauth.SeedFileName), filepath.Join(sec, "store-1.key")} {
		if m := mode(t, p); m != 0o600 {
			t.Errorf("%s: mode %#o, want 0600", p, m)
		}
	}
	reg, err := federated.LoadRegistry(d.File(natsauth.SitesDir))
	if err != nil || len(reg.Sites()) != 1 || reg.Sites()[0] != "store-1" {
		t.Fatalf("coordinator's site directory: %v %v", reg.Sites(), err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"again", []string{"store-1"}, "already exists"},
		{"bad name", []string{"Store_1"}, "DNS label"},
		{"no name", nil, "accepts 1 arg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, append([]string{"auth", "site", "create", "--dir", dir}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	if _, _, err := run(t, "auth", "site", "create", "x", "--dir", filepath.Join(t.TempDir(), "none")); !errors.Is(err, natsauth.ErrFleet) {
		t.Fatalf("no fleet: %v", err)
	}
}

// TestAuthSiteCreateRegion: --region makes the region's identity with its
// first site (seed 0600) and widens its user to every site of the region;
// a second site of the region reuses the identity.
func TestAuthSiteCreateRegion(t *testing.T) {
	dir := initFleet(t)
	d := natsauth.Dir{Path: dir}
	for _, tc := range []struct {
		site    string
		newSeed bool
		want    []string
	}{
		{"store-1", true, []string{"region eu", d.RegionSeed("eu"), `"edgesched.regional.eu"`, `"edgesched.update.store-1"`, `"_INBOX.region.eu.>"`}},
		{"store-2", false, []string{"region eu", `"edgesched.update.store-1"`, `"edgesched.update.store-2"`, `"edgesched.ack.store-2"`}},
	} {
		out, _, err := run(t, "auth", "site", "create", tc.site, "--region", "eu", "--dir", dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", tc.site, w, out)
			}
		}
		if got := strings.Contains(out, "ship to the region's aggregator"); got != tc.newSeed {
			t.Errorf("%s: a new region seed shown %v, want %v:\n%s", tc.site, got, tc.newSeed, out)
		}
	}
	if m := mode(t, d.RegionSeed("eu")); m != 0o600 {
		t.Errorf("region seed: mode %#o, want 0600", m)
	}
	f, err := d.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := f.RegionSites("eu"); len(got) != 2 || len(f.Regions) != 1 {
		t.Fatalf("regions %+v, eu's sites %v: want one region of 2 sites", f.Regions, got)
	}
	if _, _, err := run(t, "auth", "site", "create", "store-3", "--region", "EU!", "--dir", dir); !errors.Is(err, natsauth.ErrIdentity) {
		t.Fatalf("bad region name: %v", err)
	}
}

func TestAuthSiteList(t *testing.T) {
	dir := initFleet(t)
	for _, s := range []string{"store-2", "store-1"} {
		if _, _, err := run(t, "auth", "site", "create", s, "--dir", dir); err != nil {
			t.Fatal(err)
		}
	}
	out, _, err := run(t, "auth", "site", "list", "--dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// header + 2 sites, sorted by name
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "store-1") || !strings.Contains(lines[1], "active") || !strings.HasPrefix(lines[2], "store-2") {
		t.Fatalf("list:\n%s", out)
	}
	out, _, err = run(t, "auth", "site", "list", "--dir", dir, "-o", "json")
	var sites []natsauth.Site
	if err != nil || json.Unmarshal([]byte(out), &sites) != nil || len(sites) != 2 || sites[0].NKey == "" {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if _, _, err := run(t, "auth", "site", "list", "--dir", dir, "-o", "xml"); err == nil || !strings.Contains(err.Error(), "--output") {
		t.Fatalf("bad output: %v", err)
	}
}

func TestAuthSiteRevoke(t *testing.T) {
	dir := initFleet(t)
	if _, _, err := run(t, "auth", "site", "create", "store-1", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	d := natsauth.Dir{Path: dir}
	f, _ := d.Load()
	nkey := f.Site("store-1").NKey
	out, _, err := run(t, "auth", "site", "revoke", "store-1", "--dir", dir)
	if err != nil || !strings.Contains(out, "site store-1 revoked") {
		t.Fatalf("revoke: %v\n%s", err, out)
	}
	auth, _ := os.ReadFile(d.File(natsauth.AuthConfFile))
	if strings.Contains(string(auth), nkey) {
		t.Error("the revoked site's NKey is still a NATS user")
	}
	if _, err := os.Stat(d.File(filepath.Join(natsauth.SitesDir, "store-1.pub"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("update key still in the coordinator's directory: %v", err)
	}
	out, _, _ = run(t, "auth", "site", "list", "--dir", dir)
	if !strings.Contains(out, "revoked") {
		t.Errorf("list after revoke:\n%s", out)
	}
	if _, _, err := run(t, "auth", "site", "revoke", "nope", "--dir", dir); err == nil || !strings.Contains(err.Error(), `no site "nope"`) {
		t.Fatalf("revoke unknown: %v", err)
	}
}

func TestAuthModelKeyRotate(t *testing.T) {
	dir := initFleet(t)
	out, _, err := run(t, "auth", "model-key", "rotate", "--dir", dir)
	if err != nil || !strings.Contains(out, "model key model-2") || !strings.Contains(out, "model-1") {
		t.Fatalf("rotate: %v\n%s", err, out)
	}
	d := natsauth.Dir{Path: dir}
	k, err := quant.LoadKeyring(d.File(natsauth.ModelKeysDir))
	if err != nil || len(k.IDs()) != 2 {
		t.Fatalf("trust directory: %v %v", k, err)
	}
	if _, err := quant.ReadSigner(d.ModelKeyFile("model-2")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "auth", "model-key", "rotate", "--dir", dir, "--name", "model-2"); !errors.Is(err, natsauth.ErrExists) {
		t.Fatalf("rotate to an existing name: %v", err)
	}
}

// TestAuthModelKeyRetire: an artifact signed by model-1 verifies against
// the trust directory until model-1 is retired, then 'model verify'
// refuses it naming the retired key; model-2's artifacts still verify.
func TestAuthModelKeyRetire(t *testing.T) {
	dir := initFleet(t)
	d := natsauth.Dir{Path: dir}
	trust := d.File(natsauth.ModelKeysDir)
	art1, art2 := filepath.Join(t.TempDir(), "v1.esa"), filepath.Join(t.TempDir(), "v2.esa")
	if _, _, err := run(t, "model", "sign", "edge", "--key", d.ModelKeyFile("model-1"), "--out", art1, "--version", "1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "auth", "model-key", "retire", "model-1", "--dir", dir); err == nil || !strings.Contains(err.Error(), "signing key") {
		t.Fatalf("retiring the signing key: %v", err)
	}
	if _, _, err := run(t, "auth", "model-key", "rotate", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "model", "sign", "edge", "--key", d.ModelKeyFile("model-2"), "--out", art2, "--version", "2"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "model", "verify", art1, "--model-keys", trust); err != nil {
		t.Fatalf("model-1's artifact during the overlap: %v", err)
	}
	out, _, err := run(t, "auth", "model-key", "retire", "model-1", "--dir", dir)
	if err != nil || !strings.Contains(out, "retired") {
		t.Fatalf("retire: %v\n%s", err, out)
	}
	if _, _, err := run(t, "model", "verify", art1, "--model-keys", trust); !errors.Is(err, quant.ErrRetiredKey) {
		t.Fatalf("model-1's artifact after retirement: %v, want ErrRetiredKey", err)
	}
	if _, _, err := run(t, "model", "verify", art2, "--model-keys", trust); err != nil {
		t.Fatalf("model-2's artifact: %v", err)
	}
	if _, err := os.Stat(d.ModelKeyFile("model-1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("retired private key kept: %v", err)
	}
}

func TestAuthTLS(t *testing.T) {
	out := filepath.Join(t.TempDir(), "tls")
	stdout, _, err := run(t, "auth", "tls", "--out", out, "--host", "127.0.0.1", "--host", "nats.example", "--client", "store-1")
	if err != nil || !strings.Contains(stdout, "client  "+filepath.Join(out, "store-1.pem")) {
		t.Fatalf("tls: %v\n%s", err, stdout)
	}
	if m := mode(t, filepath.Join(out, "server-key.pem")); m != 0o600 {
		t.Errorf("server key mode %#o", m)
	}
	if _, _, err := run(t, "auth", "tls", "--out", out); err == nil || !strings.Contains(err.Error(), "host") {
		t.Fatalf("no host: %v", err)
	}
	// a missing required flag is a usage error (exit 2); it was a failure
	if _, _, err := run(t, "auth", "tls", "--out", out); !cli.IsUsage(err) || !strings.Contains(err.Error(), "--host: required") {
		t.Fatalf("no host: %v (usage error %v), want a usage error naming --host", err, cli.IsUsage(err))
	}
}

func TestAuthConfig(t *testing.T) {
	dir := initFleet(t)
	tlsDir := filepath.Join(t.TempDir(), "tls")
	if _, _, err := run(t, "auth", "tls", "--out", tlsDir, "--host", "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "auth", "config", "--dir", dir); cli.ExitCode(err) != cli.ExitUsage || !strings.Contains(err.Error(), "--tls-cert and --tls-key: required") {
		t.Fatalf("config without TLS: %v", err)
	}
	out, _, err := run(t, "auth", "config", "--dir", dir, "--listen", "127.0.0.1:-1", "--store-dir", t.TempDir(),
		"--tls-cert", filepath.Join(tlsDir, "server.pem"), "--tls-key", filepath.Join(tlsDir, "server-key.pem"),
		"--tls-ca", filepath.Join(tlsDir, "ca.pem"), "--tls-verify", "--print")
	if err != nil || !strings.Contains(out, "verify: true") || !strings.Contains(out, "include auth.conf") {
		t.Fatalf("config: %v\n%s", err, out)
	}
	if _, err := server.ProcessConfigFile(natsauth.Dir{Path: dir}.File(natsauth.ServerConfFile)); err != nil {
		t.Fatalf("nats-server cannot read it: %v", err)
	}
}

// TestAuthConfigFlags: config checks its flags before any work, each
// refusal a usage error (exit 2) naming the flags as typed. Without TLS
// flags it was a failure (exit 1) naming ServerOptions' fields ("natsauth:
// bad server options: TLS: required: ... (set AllowPlaintext ...)"),
// found after loading the fleet directory.
func TestAuthConfigFlags(t *testing.T) {
	fleet := initFleet(t)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no TLS", nil, "--tls-cert and --tls-key: required: sites reach the server over the WAN (--insecure-plaintext serves without TLS, for loopback tests only)"},
		{"key without a certificate", []string{"--tls-key", "k.pem"}, "--tls-cert: required with --tls-key"},
		{"certificate without a key", []string{"--tls-cert", "c.pem", "--tls-ca", "ca.pem"}, "--tls-key: required with --tls-cert --tls-ca"},
		{"verify without a CA", []string{"--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-verify"}, "--tls-verify needs --tls-ca"},
		{"plaintext with TLS", []string{"--insecure-plaintext", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, "--insecure-plaintext serves without TLS: not with --tls-cert --tls-key"},
		{"payload too small", []string{"--insecure-plaintext", "--max-payload", "10"}, "--max-payload: 10, want between 64 KiB and 64 MiB"},
		{"listen without a port", []string{"--insecure-plaintext", "--listen", "nats.example"}, `--listen: "nats.example"`},
		{"empty store dir", []string{"--insecure-plaintext", "--store-dir", ""}, "--store-dir: required"},
		{"server name with a space", []string{"--insecure-plaintext", "--server-name", "edge hub"}, `--server-name: "edge hub": want a non-empty word`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// a fleet directory, and one that does not exist: the flags
			// are refused first either way, and nothing is written
			missing := filepath.Join(t.TempDir(), "no-fleet")
			for _, dir := range []string{fleet, missing} {
				_, _, err := run(t, append([]string{"auth", "config", "--dir", dir}, tc.args...)...)
				if cli.ExitCode(err) != cli.ExitUsage || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("--dir %s: %v (exit %d), want a usage error (exit 2) with %q", dir, err, cli.ExitCode(err), tc.want)
				}
				if strings.Contains(err.Error(), "natsauth") {
					t.Errorf("the error names natsauth's options, not the flags: %v", err)
				}
			}
			if _, err := os.Stat(natsauth.Dir{Path: fleet}.File(natsauth.ServerConfFile)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused config wrote the server configuration: %v", err)
			}
			if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused config made the fleet directory: %v", err)
			}
		})
	}
	// --insecure-plaintext alone still writes (loopback tests)
	if out, _, err := run(t, "auth", "config", "--dir", fleet, "--insecure-plaintext", "--store-dir", t.TempDir()); err != nil {
		t.Fatalf("--insecure-plaintext: %v\n%s", err, out)
	}
}

// TestAdminOverAuth: the whole operator flow on the command line: a fleet
// made with 'edgectl auth', a real nats-server from 'edgectl auth config',
// a coordinator on its NKey, and 'edgectl sites' with the operator's NKey
// and the CA. With a site's NKey instead, the admin API is out of reach.
func TestAdminOverAuth(t *testing.T) {
	dir := initFleet(t)
	d := natsauth.Dir{Path: dir}
	if _, _, err := run(t, "auth", "site", "create", "store-1", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	tlsDir := filepath.Join(t.TempDir(), "tls")
	if _, _, err := run(t, "auth", "tls", "--out", tlsDir, "--host", "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(tlsDir, "ca.pem")
	if _, _, err := run(t, "auth", "config", "--dir", dir, "--listen", "127.0.0.1:-1", "--store-dir", t.TempDir(),
		"--tls-cert", filepath.Join(tlsDir, "server.pem"), "--tls-key", filepath.Join(tlsDir, "server-key.pem")); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(d.File(natsauth.ServerConfFile))
	if err != nil {
		t.Fatal(err)
	}
	opts.NoSigs = true
	if opts.JetStream && opts.JetStreamMaxStore == 0 {
		opts.JetStreamMaxStore = natstest.MaxStore // not a share of the free disk
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(srv.Shutdown)

	reg, err := federated.LoadRegistry(d.File(natsauth.SitesDir))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := quant.ReadSigner(d.ModelKeyFile("model-1"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := coordinator.DefaultConfig()
	cfg.DataDir, cfg.Sites, cfg.Signer = t.TempDir(), reg, signer
	cfg.Calibrate = func(context.Context, *nn.Model) ([]float32, error) {
		rows := make([]float32, 200*policy.NumFeatures)
		rng := rand.New(rand.NewPCG(5, 5))
		for i := range rows {
			rows[i] = float32(rng.NormFloat64())
		}
		return rows, nil
	}
	c, err := coordinator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	net, _ := nn.NewNet(policy.NumFeatures, 8, 8, 8, rand.New(rand.NewPCG(1, 1)))
	if err := c.Bootstrap(context.Background(), &nn.Model{Schema: policy.NewSchema(), Net: net}); err != nil {
		t.Fatal(err)
	}
	cc := natsauth.ClientConfig{NKeySeedFile: d.CoordinatorSeed(), CAFile: ca, InboxPrefix: natsauth.CoordinatorInboxPrefix}
	copts, err := cc.Options()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.ClientURL(), copts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, nc) }()
	defer func() { cancel(); <-done; c.Close() }()

	var out string
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _, err = run(t, "sites", "--server", srv.ClientURL(), "--nkey", d.AdminSeed("admin"), "--tls-ca", ca, "--timeout", "2s")
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || !strings.Contains(out, "store-1") {
		t.Fatalf("edgectl sites as the operator: %v\n%s", err, out)
	}
	siteSeed := filepath.Join(d.SiteSecrets("store-1"), natsauth.SeedFileName)
	_, _, err = run(t, "sites", "--server", srv.ClientURL(), "--nkey", siteSeed, "--tls-ca", ca, "--inbox-prefix", natsauth.SiteInboxPrefix("store-1"), "--timeout", "1s")
	if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), `"edgesched.admin.sites"`) {
		t.Fatalf("a site's identity on the admin API: %v, want a permissions violation naming the subject", err)
	}
	t.Logf("as a site: %v", err)
	if _, _, err := run(t, "sites", "--server", srv.ClientURL(), "--tls-ca", ca, "--nkey", "", "--timeout", "1s"); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("anonymous: %v", err)
	}
}
