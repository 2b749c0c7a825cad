package coordcmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/internal/testutil/metricstest"
	"github.com/edgesched/edgesched/quant"
)

// syncBuffer is a bytes.Buffer safe for the coordinator's log goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAuthFlags: the connection and key-rotation flags refuse bad files
// before anything connects, naming the problem.
func TestAuthFlags(t *testing.T) {
	d := fltest.FleetDir(t, "store-1")
	leaky := filepath.Join(t.TempDir(), "leaky.nk")
	raw, _ := os.ReadFile(d.CoordinatorSeed())
	if err := os.WriteFile(leaky, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	// a trust directory in which the coordinator's own key is retired
	retiredDir := t.TempDir()
	pub, _ := os.ReadFile(d.File(filepath.Join(natsauth.ModelKeysDir, "model-1.pub")))
	if err := os.WriteFile(filepath.Join(retiredDir, "model-1"+quant.RetiredSuffix), pub, 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"--key", d.ModelKeyFile("model-1"), "--sites", d.File(natsauth.SitesDir)}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"seed readable by others", []string{"--nkey", leaky}, "readable by its owner only"},
		{"missing seed", []string{"--nkey", filepath.Join(t.TempDir(), "none.nk")}, "no such file"},
		{"nkey and creds", []string{"--nkey", d.CoordinatorSeed(), "--creds", leaky}, "mutually exclusive"},
		{"cert without key", []string{"--tls-cert", "c.pem"}, "both the certificate and its key"},
		{"bad CA", []string{"--tlsca", leaky}, "no PEM certificate"},
		{"bad inbox prefix", []string{"--inbox-prefix", "_INBOX.>"}, "inbox prefix"},
		{"signing key retired", []string{"--model-keys", retiredDir}, "retired"},
		{"missing model keys", []string{"--model-keys", filepath.Join(t.TempDir(), "none")}, "--model-keys"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := Main(context.Background(), append(append([]string{}, base...), tc.args...), io.Discard, &stderr)
			if code != 1 || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 mentioning %q", code, stderr.String(), tc.want)
			}
		})
	}
}

// TestRunWithNKeyAndTLS runs edge-coordinator's Main against a real
// nats-server configured by natsauth (NKey users, permissions, mutual
// TLS): it connects with --nkey and the --tls-* flags, serves the admin
// API (an operator gets an answer) and stops cleanly. With --ha it runs
// twice on the same server, from two empty data directories: the first
// takes the lease and ships a checkpoint, the second restores it (every
// JetStream call of high availability within the coordinator's
// permissions). With --regions too, each run also creates its own
// consumer of the regional stream and the second deletes the first's.
func TestRunWithNKeyAndTLS(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		runs    int
		regions bool
	}{
		{"single", nil, 1, false},
		{"ha", []string{"--ha", "--replica-id", "a"}, 2, false},
		{"ha-regions", []string{"--ha", "--replica-id", "a"}, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := fltest.FleetDir(t, "store-1")
			srv, pki := fltest.StartAuthServer(t, d, "coordinator", "admin")
			args := tc.args
			if tc.regions {
				args = append(append([]string{}, args...), "--regions", regionsDir(t, "store-1"))
			}
			for run := range tc.runs {
				log, body := runAuthCoordinator(t, d, srv.ClientURL(), pki, args)
				if tc.args != nil && !strings.Contains(body, "edgesched_coordinator_active 1") {
					t.Errorf("run %d: /metrics lacks edgesched_coordinator_active 1", run+1)
				}
				if run > 0 && (!strings.Contains(log, "active: restored") || strings.Contains(log, `checkpoint=""`)) {
					t.Errorf("run %d did not restore a checkpoint:\n%s", run+1, log)
				}
			}
		})
	}
}

// regionsDir is a --regions directory of one region, eu, with sites.
func regionsDir(t *testing.T, sites ...string) string {
	t.Helper()
	dir := t.TempDir()
	k, _, err := quant.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	priv, _, err := quant.WriteKeyPair(dir, "eu", k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(priv); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "eu.sites"), []byte(strings.Join(sites, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runAuthCoordinator runs Main with the coordinator's NKey and TLS
// identity and extra flags until it serves the admin API, reads its
// /metrics, stops it and returns its log and the metrics text.
func runAuthCoordinator(t *testing.T, d natsauth.Dir, url string, pki *natsauth.PKIFiles, extra []string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncBuffer{}
	done := make(chan int, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ln.Addr().String()
	ln.Close()
	args := append([]string{"--server", url, "--key", d.ModelKeyFile("model-1"), "--sites", d.File(natsauth.SitesDir),
		"--model-keys", d.File(natsauth.ModelKeysDir), "--data", t.TempDir(), "--calibrate", "builtin:factory-vision", "--metrics-addr", metricsAddr,
		"--nkey", d.CoordinatorSeed(), "--tlsca", pki.CA, "--tlscert", pki.ClientCerts["coordinator"], "--tlskey", pki.ClientKeys["coordinator"]}, extra...)
	go func() { done <- Main(ctx, args, io.Discard, stderr) }()
	admin := natsauth.ClientConfig{NKeySeedFile: d.AdminSeed("admin"), CAFile: pki.CA, CertFile: pki.ClientCerts["admin"], KeyFile: pki.ClientKeys["admin"], InboxPrefix: natsauth.AdminInboxPrefix}
	aopts, err := admin.Options()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, aopts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		msg, err := nc.Request(federated.AdminSubjectPrefix+".sites", []byte("{}"), time.Second)
		if err == nil && strings.Contains(string(msg.Data), "store-1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no admin answer: %v\n%s", err, stderr.String())
		}
		select {
		case code := <-done:
			t.Fatalf("coordinator exited %d:\n%s", code, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	// /metrics: the coordinator's series and every daemon's
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "edgesched_coordinator_round ") {
		t.Errorf("/metrics lacks the coordinator's series:\n%.2000s", body)
	}
	metricstest.CheckProcessMetricsText(t, string(body), "edge-coordinator")
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	log := stderr.String()
	if !strings.Contains(log, "tls=true") || !strings.Contains(log, "nkey=true") || strings.Contains(log, "ermissions") {
		t.Fatalf("coordinator log:\n%s", log)
	}
	return log, string(body)
}

// TestWaitsForNATS: edge-coordinator started before its NATS server
// waits for it (it used to exit 1 with "no servers available"), comes up
// when the server does, and stops cleanly on cancel.
func TestWaitsForNATS(t *testing.T) {
	d := fltest.FleetDir(t, "store-1")
	// a free port for the server that is not running yet
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"--server", url, "--key", d.ModelKeyFile("model-1"), "--sites", d.File(natsauth.SitesDir),
			"--data", t.TempDir(), "--calibrate", "builtin:factory-vision"}, io.Discard, stderr)
	}()
	// the coordinator is waiting, not gone (bootstrap takes a moment, so
	// poll its log for the connection attempt rather than sleep)
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), "bootstrap") && !strings.Contains(stderr.String(), "model") {
		select {
		case code := <-done:
			t.Fatalf("coordinator exited %d before its NATS server started:\n%s", code, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordinator did not start:\n%s", stderr.String())
		}
	}
	select {
	case code := <-done:
		t.Fatalf("coordinator exited %d before its NATS server started:\n%s", code, stderr.String())
	case <-time.After(500 * time.Millisecond):
	}
	fltest.RunServer(t, &server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir()})
	for !strings.Contains(stderr.String(), "coordinator up") {
		select {
		case code := <-done:
			t.Fatalf("coordinator exited %d:\n%s", code, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordinator did not come up after its server did:\n%s", stderr.String())
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
}
