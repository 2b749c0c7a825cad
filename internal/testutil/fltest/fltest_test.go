package fltest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/quant"
)

// thisPkg is this package's import path.
const (
	thisPkg      = "github.com/edgesched/edgesched/internal/testutil/fltest"
	natstestPkg  = "github.com/edgesched/edgesched/internal/testutil/natstest"
	modeltestPkg = "github.com/edgesched/edgesched/internal/testutil/modeltest"
)

// TestOnlyTestsImport lists every package of the module with the go
// command and fails if a non-test file imports this package, natstest,
// which it is built on, or modeltest (their functions call t.Fatal, and
// natstest would pull nats-server into a binary). The
// listing must be real: at least one package's tests import it.
func TestOnlyTestsImport(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is not on PATH (%v): cannot list the importers of %s", err, thisPkg)
	}
	// one line a package: its path, "|", its non-test imports, "|", its
	// tests' imports (in-package and external)
	out, err := exec.Command(goCmd, "list", "-e", "-f",
		`{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}`,
		"github.com/edgesched/edgesched/...").Output()
	if err != nil {
		var stderr string
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	var testers []string
	for line := range strings.Lines(string(out)) {
		f := strings.SplitN(strings.TrimSpace(line), "|", 3)
		if len(f) != 3 {
			t.Fatalf("go list line %q: want path|imports|test imports", line)
		}
		for _, pkg := range []string{thisPkg, natstestPkg, modeltestPkg} {
			if slices.Contains(strings.Fields(f[1]), pkg) && f[0] != thisPkg {
				t.Errorf("%s imports %s in a non-test file: it is for tests only", f[0], pkg)
			}
		}
		if slices.Contains(strings.Fields(f[2]), thisPkg) {
			testers = append(testers, f[0])
		}
	}
	if len(testers) == 0 {
		t.Fatalf("no package's tests import %s: the listing is not what this test expects", thisPkg)
	}
	t.Logf("%s is imported by the tests of %d packages and by no non-test file", thisPkg, len(testers))
}

// TestRunCoordinator: the coordinator RunCoordinator starts on an
// embedded server sets up its stream and consumer, its stop closes the
// store, and a second stop (and the cleanup's) does nothing more.
func TestRunCoordinator(t *testing.T) {
	srv := StartNATS(t)
	coordKey, _, err := quant.GenerateKey(rngFor(1))
	if err != nil {
		t.Fatal(err)
	}
	siteKey, _, err := quant.GenerateKey(rngFor(2))
	if err != nil {
		t.Fatal(err)
	}
	reg := &federated.Registry{}
	if err := reg.Add("store-1", siteKey.Public()); err != nil {
		t.Fatal(err)
	}
	c, stop := RunCoordinator(t, srv.ClientURL(), CoordinatorConfig(t.TempDir(), reg, coordKey), SmallModel(t, 1))
	js, err := jetstream.New(Connect(t, srv.ClientURL(), "probe"))
	if err != nil {
		t.Fatal(err)
	}
	Eventually(t, 10*time.Second, "the coordinator's consumer on "+federated.UpdateStream, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.Consumer(ctx, federated.UpdateStream, "coordinator")
		return err == nil, fmt.Sprint(err)
	})
	ss, err := c.Sites()
	if err != nil || len(ss) != 1 || ss[0].Site.Site != "store-1" {
		t.Fatalf("sites %+v, %v: want store-1 alone", ss, err)
	}
	stop()
	stop()
	if _, err := c.Sites(); err == nil {
		t.Fatal("the store still answers after stop: want it closed")
	}
}

// TestStartAuthServer: the server StartAuthServer runs refuses a client
// without a client certificate and an NKey, and admits the coordinator
// with its seed and certificate.
func TestStartAuthServer(t *testing.T) {
	d := FleetDir(t, "store-1")
	srv, pki := StartAuthServer(t, d, "coordinator")
	if nc, err := nats.Connect(srv.ClientURL(), nats.Secure(), nats.RootCAs(pki.CA), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("connected with neither a client certificate nor an NKey")
	}
	cc := natsauth.ClientConfig{NKeySeedFile: d.CoordinatorSeed(), CAFile: pki.CA, CertFile: pki.ClientCerts["coordinator"],
		KeyFile: pki.ClientKeys["coordinator"], InboxPrefix: natsauth.CoordinatorInboxPrefix}
	opts, err := cc.Options()
	if err != nil {
		t.Fatal(err)
	}
	nc := Connect(t, srv.ClientURL(), "coordinator", opts...)
	if err := nc.Flush(); err != nil {
		t.Fatalf("coordinator connection: %v", err)
	}
}

// rngFor is a reproducible key source.
func rngFor(seed byte) *rand.ChaCha8 { return rand.NewChaCha8([32]byte{seed, 0xf1}) }
