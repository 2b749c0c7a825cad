package extender

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
	"github.com/edgesched/edgesched/quant"
)

// goroutineLabel is the pprof label these tests put on Start's goroutine:
// every goroutine Start starts, and those they start, inherit it.
const goroutineLabel = "edgesched-extender-test"

// startLabelled runs Start with every goroutine it starts labelled label.
func startLabelled(ctx context.Context, label string, cfg Config) (srv *Server, err error) {
	pprof.Do(ctx, pprof.Labels(goroutineLabel, label), func(ctx context.Context) { srv, err = Start(ctx, cfg) })
	return srv, err
}

// labelled returns the stacks of the running goroutines labelled label
// (the goroutine profile's records, identical stacks grouped).
func labelled(label string) []string {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	var out []string
	for _, rec := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(rec, `"`+goroutineLabel+`":"`+label+`"`) {
			out = append(out, rec)
		}
	}
	return out
}

// modelArgs writes a signed model and its key into dir and returns the
// plugin args that load and watch it.
func modelArgs(t *testing.T, dir string) edgeplugin.Args {
	t.Helper()
	s := testSigner(t, 1)
	_, pub, err := quant.WriteKeyPair(dir, "test", s)
	if err != nil {
		t.Fatal(err)
	}
	model := writeFile(t, dir, "model.esa", encodeVersion(t, s, 2))
	return edgeplugin.Args{ModelPath: model, ModelKeys: []string{pub}, TargetWorkload: edgeplugin.DefaultTargetWorkload}
}

// TestStartFailureStopsWhatItStarted: a Start that fails after loading the
// model (the address is taken, the API client cannot be built) stops
// what it started, the model file's watch and the informers, before it
// returns. They ran until the caller's context ended.
func TestStartFailureStopsWhatItStarted(t *testing.T) {
	dir := t.TempDir()
	args := modelArgs(t, dir)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	// a well-formed kubeconfig (nothing listens there: the informers
	// start and retry their lists)
	kubeconfig := writeFile(t, dir, "kubeconfig", []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"+
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"))
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"address in use", Config{Listen: taken.Addr().String(), Args: args, Source: NewStaticSource(nil)}, "edgesched extender: listen: "},
		{"address in use, informers", Config{Listen: taken.Addr().String(), Args: args, Kubeconfig: kubeconfig}, "edgesched extender: listen: "},
		{"no kubeconfig", Config{Listen: "127.0.0.1:0", Args: args, Kubeconfig: filepath.Join(dir, "missing")}, "edgesched extender: kubeconfig: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := klog.NewContext(t.Context(), logr.Discard()) // lives on after Start
			srv, err := startLabelled(ctx, t.Name(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start = %v, %v; want an error with %q", srv, err, tc.want)
			}
			// Start waited for the model watch and the informers; a
			// goroutine of a failed list may take a moment to return
			deadline := time.Now().Add(10 * time.Second)
			for left := labelled(t.Name()); len(left) > 0; left = labelled(t.Name()) {
				if time.Now().After(deadline) {
					t.Fatalf("%d goroutine stacks of the failed Start still run 10 s later:\n\n%s", len(left), strings.Join(left, "\n\n"))
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// TestServerDoneWaitsForModelWatch: Done closes only once the model file's
// watch has returned. The watch is held in its log call while it installs
// a new model; the server stops meanwhile, and Done stays open until the
// watch is let go. Done closed as soon as the HTTP server had stopped.
func TestServerDoneWaitsForModelWatch(t *testing.T) {
	dir := t.TempDir()
	args := modelArgs(t, dir)
	args.ReloadInterval = &metav1.Duration{Duration: time.Second}
	installing, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	logger := funcr.New(func(_, kv string) {
		if strings.Contains(kv, `"Installed model"`) {
			once.Do(func() {
				close(installing)
				<-release
			})
		}
	}, funcr.Options{})
	ctx, cancel := context.WithCancel(klog.NewContext(t.Context(), logger))
	defer cancel()
	srv, err := startLabelled(ctx, t.Name(), Config{Listen: "127.0.0.1:0", Args: args, Source: NewStaticSource([]*v1.Node{k8sNode(gpuNode("t4", "T4", 2))})})
	if err != nil {
		t.Fatal(err)
	}
	// a new model for the watch's next poll (renamed in: never half written)
	next := filepath.Join(dir, "next.esa")
	if err := os.WriteFile(next, encodeVersion(t, testSigner(t, 1), 3), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, args.ModelPath); err != nil {
		t.Fatal(err)
	}
	select {
	case <-installing:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the watch did not install the new model within 10 s")
	}
	cancel()
	select {
	case <-srv.Done():
		close(release)
		t.Fatal("Done closed while the model watch was still running")
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	select {
	case <-srv.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop within 10 s of the watch returning")
	}
	if err := srv.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	for _, stack := range labelled(t.Name()) {
		if strings.Contains(stack, "(*ModelStore).Watch") {
			t.Fatalf("the model watch runs after Done:\n%s", stack)
		}
	}
}
