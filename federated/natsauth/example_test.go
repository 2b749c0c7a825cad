package natsauth

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

var update = flag.Bool("update", false, "rewrite deploy/nats-auth/ from the generator")

// exampleSeed makes the shipped example's identities reproducible. They
// are EXAMPLE identities: anyone can derive their seeds from this
// published value, so they must never be deployed (deploy/nats-auth/README.md).
const exampleSeed = "edgesched-example-fleet-do-not-deploy"

// TestDeployExamples: deploy/nats-auth/ holds what the generator makes
// for an example fleet (an operator, three sites, mutual TLS), byte for
// byte, and nats-server reads it. Run with -update after changing the
// generator or the permissions.
func TestDeployExamples(t *testing.T) {
	var seed [32]byte
	copy(seed[:], exampleSeed)
	d := Dir{Path: filepath.Join(t.TempDir(), "fleet"), Rand: rand.NewChaCha8(seed),
		Now: func() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) }}
	if _, err := d.Init(InitOptions{Admins: []string{"ops"}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"store-1", "store-2", "factory-a"} {
		if _, err := d.CreateSite(s); err != nil {
			t.Fatal(err)
		}
	}
	o := DefaultServerOptions()
	o.TLS = &TLSFiles{Cert: "/etc/nats/tls/server.pem", Key: "/etc/nats/tls/server-key.pem", CA: "/etc/nats/tls/ca.pem", VerifyClients: true}
	if _, err := d.WriteServerConfig(o); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join("..", "..", "deploy", "nats-auth")
	for _, f := range []struct{ from, to string }{
		{ServerConfFile, "nats-server.conf"}, {AuthConfFile, "auth.conf"}, {FleetFile, "fleet.json"},
	} {
		got, err := os.ReadFile(d.File(f.from))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dst, f.to)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run TestDeployExamples ./federated/natsauth/ -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what the generator makes (run with -update after changing it)", path)
		}
	}
	// the shipped auth.conf parses with the real server (the TLS files
	// of nats-server.conf exist only on a deployed host)
	conf := filepath.Join(t.TempDir(), "check.conf")
	if err := os.WriteFile(conf, []byte("listen: \"127.0.0.1:-1\"\ninclude auth.conf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	auth, _ := os.ReadFile(filepath.Join(dst, "auth.conf"))
	if err := os.WriteFile(filepath.Join(filepath.Dir(conf), "auth.conf"), auth, 0o644); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	// coordinator + ops + 3 sites
	if len(opts.Nkeys) != 5 {
		t.Fatalf("%d users in the shipped auth.conf, want 5", len(opts.Nkeys))
	}
}
