package fltest

import (
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/edgesched/edgesched/federated/natsauth"
)

// FleetDir initializes a natsauth fleet directory in t.TempDir() (the
// coordinator, model key model-1, as 'edgectl auth init' makes them) and
// creates the named sites in it.
func FleetDir(t testing.TB, sites ...string) natsauth.Dir {
	t.Helper()
	d := natsauth.Dir{Path: filepath.Join(t.TempDir(), "fleet")}
	if _, err := d.Init(natsauth.InitOptions{}); err != nil {
		t.Fatalf("init fleet directory: %v", err)
	}
	for _, s := range sites {
		if _, err := d.CreateSite(s); err != nil {
			t.Fatalf("create site %s: %v", s, err)
		}
	}
	return d
}

// StartAuthServer runs a nats-server from the configuration d generates
// (NKey users with per-subject permissions, JetStream in t.TempDir(), on
// a random loopback port) with mutual TLS: a development PKI in
// t.TempDir() with a server certificate for 127.0.0.1 and a client
// certificate for each of clients. It returns the server, shut down at
// the test's cleanup, and the PKI's files for the clients to dial with.
func StartAuthServer(t testing.TB, d natsauth.Dir, clients ...string) (*server.Server, *natsauth.PKIFiles) {
	t.Helper()
	pki, err := natsauth.DevPKI(filepath.Join(t.TempDir(), "pki"), natsauth.DevPKIOptions{Hosts: []string{"127.0.0.1"}, Clients: clients})
	if err != nil {
		t.Fatalf("development PKI: %v", err)
	}
	o := natsauth.DefaultServerOptions()
	o.Listen, o.StoreDir = "127.0.0.1:-1", t.TempDir()
	o.TLS = &natsauth.TLSFiles{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA, VerifyClients: true}
	conf, err := d.WriteServerConfig(o)
	if err != nil {
		t.Fatalf("write server configuration: %v", err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("load %s: %v", conf, err)
	}
	return RunServer(t, opts), pki
}
