package natsauth

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/edgesched/edgesched/quant"
)

// testDir is a fleet directory with sites a, b and c (c revoked); its key
// material comes from crypto/rand (keys are never seeded).
func testDir(t *testing.T) Dir {
	t.Helper()
	d := Dir{Path: filepath.Join(t.TempDir(), "fleet"), Now: func() time.Time { return time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC) }}
	if _, err := d.Init(InitOptions{Admins: []string{"ops"}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"site-a", "site-b", "site-c"} {
		if _, err := d.CreateSite(s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.RevokeSite("site-c"); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRenderedConfigParses: the generated configuration is read by the
// real nats-server parser into exactly the users and permissions the Go
// functions define: coordinator, admin, two active sites (the revoked
// third has no user), TLS with client verification, JetStream, payload cap.
func TestRenderedConfigParses(t *testing.T) {
	d := testDir(t)
	pki, err := DevPKI(filepath.Join(t.TempDir(), "pki"), DevPKIOptions{Hosts: []string{"127.0.0.1", "nats.example"}, Clients: []string{"site-a"}})
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultServerOptions()
	o.Listen, o.StoreDir = "127.0.0.1:-1", t.TempDir()
	o.TLS = &TLSFiles{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA, VerifyClients: true}
	path, err := d.WriteServerConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats-server cannot read the generated configuration: %v", err)
	}
	f, err := d.Load()
	if err != nil {
		t.Fatal(err)
	}
	if !opts.JetStream || opts.StoreDir != o.StoreDir || opts.MaxPayload != int32(o.MaxPayload) || opts.ServerName != o.Name {
		t.Errorf("server options: jetstream %v store %q payload %d name %q", opts.JetStream, opts.StoreDir, opts.MaxPayload, opts.ServerName)
	}
	if opts.TLSConfig == nil || opts.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Errorf("TLS not configured with client verification: %+v", opts.TLSConfig)
	}
	users := map[string]*server.NkeyUser{}
	for _, u := range opts.Nkeys {
		users[u.Nkey] = u
	}
	// coordinator + 1 admin + sites a and b = 4 users (2 + 2)
	if len(users) != 4 {
		t.Fatalf("%d NKey users, want 4 (coordinator, ops, site-a, site-b)", len(users))
	}
	want := map[string]Permissions{f.Coordinator.NKey: CoordinatorPermissions(), f.Admins[0].NKey: AdminPermissions()}
	for _, s := range []string{"site-a", "site-b"} {
		p, err := SitePermissions(s)
		if err != nil {
			t.Fatal(err)
		}
		want[f.Site(s).NKey] = p
	}
	if _, ok := users[f.Site("site-c").NKey]; ok {
		t.Error("revoked site-c still has a user")
	}
	for nk, p := range want {
		u := users[nk]
		if u == nil || u.Permissions == nil || u.Permissions.Publish == nil || u.Permissions.Subscribe == nil {
			t.Fatalf("user %s missing or without permissions", nk)
		}
		if !slices.Equal(u.Permissions.Publish.Allow, p.Publish) || !slices.Equal(u.Permissions.Subscribe.Allow, p.Subscribe) {
			t.Errorf("user %s: parsed publish %v subscribe %v\nwant %v %v", nk, u.Permissions.Publish.Allow, u.Permissions.Subscribe.Allow, p.Publish, p.Subscribe)
		}
		if (u.Permissions.Response != nil) != p.AllowResponses {
			t.Errorf("user %s: allow_responses %v, want %v", nk, u.Permissions.Response != nil, p.AllowResponses)
		}
	}
}

func TestSitePermissionsShape(t *testing.T) {
	p, err := SitePermissions("store-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append(p.Publish, p.Subscribe...) {
		// nothing a site may touch names another site, a consumer or a write
		for _, bad := range []string{"CONSUMER", "$O.EDGESCHED_MODELS.C", "PURGE", "DELETE", "edgesched.admin", "EDGESCHED_UPDATES", "_INBOX.>"} {
			if strings.Contains(s, bad) {
				t.Errorf("site permission %q contains %q", s, bad)
			}
		}
	}
	if p.AllowResponses {
		t.Error("a site answers no requests")
	}
	for _, bad := range []string{"", "Store-1", "a.b", "a*", ">"} {
		if _, err := SitePermissions(bad); !errors.Is(err, ErrIdentity) {
			t.Errorf("SitePermissions(%q): %v", bad, err)
		}
	}
}

func TestServerOptionsValidate(t *testing.T) {
	tlsOK := &TLSFiles{Cert: "c.pem", Key: "k.pem"}
	cases := []struct {
		name string
		mod  func(*ServerOptions)
		want string
	}{
		{"plaintext", func(o *ServerOptions) { o.TLS = nil }, "TLS: required"},
		{"no store", func(o *ServerOptions) { o.StoreDir = "" }, "StoreDir"},
		{"payload", func(o *ServerOptions) { o.MaxPayload = 1 }, "MaxPayload"},
		{"listen", func(o *ServerOptions) { o.Listen = "4222" }, "Listen"},
		{"name", func(o *ServerOptions) { o.Name = "a b" }, "Name"},
		{"verify without CA", func(o *ServerOptions) { o.TLS = &TLSFiles{Cert: "c", Key: "k", VerifyClients: true} }, "CA"},
		{"cert without key", func(o *ServerOptions) { o.TLS = &TLSFiles{Cert: "c"} }, "Cert and Key"},
		{"include path", func(o *ServerOptions) { o.AuthInclude = "../auth.conf" }, "AuthInclude"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultServerOptions()
			o.TLS = tlsOK
			tc.mod(&o)
			err := o.Validate()
			if !errors.Is(err, ErrServerConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrServerConfig naming %s", err, tc.want)
			}
		})
	}
	o := DefaultServerOptions()
	o.TLS = tlsOK
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	o.TLS, o.AllowPlaintext = nil, true
	if err := o.Validate(); err != nil {
		t.Fatalf("plaintext allowed explicitly: %v", err)
	}
}

// TestDirLifecycle: init, create, revoke, rotate and retire keep the
// derived files in line with the registry, with private files 0600.
func TestDirLifecycle(t *testing.T) {
	d := testDir(t)
	f, err := d.Load()
	if err != nil {
		t.Fatal(err)
	}
	if f.Coordinator == nil || len(f.Admins) != 1 || len(f.Sites) != 3 || len(f.ActiveSites()) != 2 || f.Signing != "model-1" {
		t.Fatalf("registry %+v", f)
	}
	for _, p := range []string{d.CoordinatorSeed(), d.AdminSeed("ops"), filepath.Join(d.SiteSecrets("site-a"), SeedFileName),
		filepath.Join(d.SiteSecrets("site-a"), "site-a.key"), d.ModelKeyFile("model-1")} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", p, st, err)
		}
	}
	// coordinator's site directory: a and b; c moved to the revoked directory
	for site, dir := range map[string]string{"site-a": SitesDir, "site-b": SitesDir, "site-c": RevokedDir} {
		if _, err := quant.ReadPublicKey(d.File(filepath.Join(dir, site+".pub"))); err != nil {
			t.Errorf("%s in %s: %v", site, dir, err)
		}
	}
	if _, err := os.Stat(d.File(filepath.Join(SitesDir, "site-c.pub"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("revoked site-c still in the coordinator's directory: %v", err)
	}
	auth, err := os.ReadFile(d.File(AuthConfFile))
	if err != nil || !bytes.Contains(auth, []byte(f.Site("site-a").NKey)) || bytes.Contains(auth, []byte(f.Site("site-c").NKey)) {
		t.Fatalf("auth.conf: %v\n%s", err, auth)
	}
	for _, tc := range []struct {
		name string
		do   func() error
		want error
	}{
		{"site again", func() error { _, err := d.CreateSite("site-a"); return err }, ErrExists},
		{"revoked name reused", func() error { _, err := d.CreateSite("site-c"); return err }, ErrExists},
		{"bad site name", func() error { _, err := d.CreateSite("Site_A"); return err }, ErrIdentity},
		{"revoke unknown", func() error { _, err := d.RevokeSite("nope"); return err }, ErrIdentity},
		{"init twice", func() error { _, err := d.Init(InitOptions{}); return err }, ErrExists},
		{"retire the signing key", func() error { _, err := d.RetireModelKey("model-1"); return err }, ErrIdentity},
		{"retire unknown key", func() error { _, err := d.RetireModelKey("model-9"); return err }, ErrIdentity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// rotation: both trusted, then model-1 retired
	k2, _, err := d.RotateModelKey("")
	if err != nil || k2.Name != "model-2" {
		t.Fatalf("rotate: %+v %v", k2, err)
	}
	ring, err := quant.LoadKeyring(d.File(ModelKeysDir))
	if err != nil || len(ring.IDs()) != 2 {
		t.Fatalf("trust directory after rotation: %v %v", ring, err)
	}
	old, err := d.RetireModelKey("model-1")
	if err != nil || old.Retired == nil {
		t.Fatalf("retire: %+v %v", old, err)
	}
	ring, err = quant.LoadKeyring(d.File(ModelKeysDir))
	if err != nil || len(ring.IDs()) != 1 || ring.IDs()[0] != k2.ID || len(ring.Retired()) != 1 || ring.Retired()[0] != old.ID {
		t.Fatalf("trust directory after retirement: trusted %v retired %v %v", ring.IDs(), ring.Retired(), err)
	}
	if _, err := os.Stat(d.ModelKeyFile("model-1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("retired private key kept: %v", err)
	}
	// revoking again is a no-op that keeps the first time
	s1, _ := d.RevokeSite("site-c")
	if !s1.Revoked.Equal(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("revocation time changed: %v", s1.Revoked)
	}
}

// TestDecodeFleetRefusals: a damaged registry is refused, naming the
// problem, before anything is generated from it.
func TestDecodeFleetRefusals(t *testing.T) {
	d := testDir(t)
	good, err := os.ReadFile(d.File(FleetFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeFleet(good); err != nil {
		t.Fatal(err)
	}
	f, _ := DecodeFleet(good)
	dup := *f
	dup.Sites = append([]Site{}, f.Sites...)
	dup.Sites[1].NKey = dup.Sites[0].NKey
	dupRaw, _ := json.MarshalIndent(&dup, "", "  ")
	for _, tc := range []struct {
		name string
		raw  []byte
		want string
	}{
		{"empty", nil, "EOF"},
		{"trailing", append(append([]byte{}, good...), []byte("{}")...), "trailing"},
		{"unknown field", bytes.Replace(good, []byte(`"v": 1`), []byte(`"v": 1, "x": 2`), 1), "unknown field"},
		{"version", bytes.Replace(good, []byte(`"v": 1`), []byte(`"v": 2`), 1), "version 2"},
		{"bad nkey", bytes.Replace(good, []byte(f.Sites[0].NKey), []byte("UNOTAKEY"), 1), "not an NKey"},
		{"shared nkey", dupRaw, "shares its NKey"},
		{"bad name", bytes.Replace(good, []byte(`"site-a"`), []byte(`"Site A"`), 1), "DNS label"},
		{"huge", make([]byte, MaxFleetBytes+1), "exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeFleet(tc.raw)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// FuzzDecodeFleet: no input crashes the decoder, and whatever it accepts
// encodes and decodes back to the same registry. Seeded with a real
// registry.
func FuzzDecodeFleet(f *testing.F) {
	d := Dir{Path: filepath.Join(f.TempDir(), "fleet")}
	if _, err := d.Init(InitOptions{}); err != nil {
		f.Fatal(err)
	}
	if _, err := d.CreateSite("store-1"); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(d.File(FleetFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`{"v":1,"sites":[{"name":"a","nkey":"x","update_key":"k","created":"2026-01-01T00:00:00Z"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fl, err := DecodeFleet(b)
		if err != nil {
			return
		}
		again, err := fl.Encode()
		if err != nil {
			t.Fatalf("accepted registry does not encode: %v", err)
		}
		if _, err := DecodeFleet(again); err != nil {
			t.Fatalf("re-encoded registry refused: %v", err)
		}
	})
}

// TestInitKeepsOrphanedSecrets: a fleet directory whose registry is gone
// but whose coordinator secrets (the model-signing keys) remain is not
// re-initialised over them.
func TestInitKeepsOrphanedSecrets(t *testing.T) {
	d := Dir{Path: t.TempDir()}
	if _, err := d.Init(InitOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(d.File(FleetFile)); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadDir(d.p("secrets", "coordinator"))
	if err != nil || len(before) == 0 {
		t.Fatalf("no coordinator secrets after Init: %v", err)
	}
	if _, err := d.Init(InitOptions{}); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Fatalf("Init over orphaned secrets: %v, want ErrExists refusing to overwrite", err)
	}
	after, err := os.ReadDir(d.p("secrets", "coordinator"))
	if err != nil || len(after) != len(before) {
		t.Fatalf("secrets changed: %d files before, %d after (%v)", len(before), len(after), err)
	}
}
