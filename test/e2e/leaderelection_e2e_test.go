//go:build unix

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgesched/edgesched/sim/openb"
)

// TestEdgeSchedulerLeaderElection runs two edge-schedulers with leader
// election on one Lease against the real apiserver: only the one holding
// the Lease schedules; SIGTERM makes the leader release it and exit 0; the
// other takes it over and schedules the next pod; a leader frozen past
// its lease exits 1 when it resumes, and the third takes over. edge-scheduler runs
// kube-scheduler's scheduler on its own main (internal/schedcmd), so this
// is what checks its leader election, not kube-scheduler's app.
func TestEdgeSchedulerLeaderElection(t *testing.T) {
	bins := Build(t, KinePkg, APIServerPkg, "github.com/edgesched/edgesched/cmd/edge-scheduler")
	cp := Start(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	all, err := openb.LoadNodes("openb:"+openb.AllNodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cpuNodes = all[:0:0]
	for _, n := range all {
		if n.GPUs == 0 && len(cpuNodes) < 4 {
			cpuNodes = append(cpuNodes, n)
		}
	}
	if _, err := RegisterNodes(ctx, cp.Client, cpuNodes, 0); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	// Short lease times so that a takeover is seconds (client-go requires
	// lease > renew deadline > 1.2 x retry period).
	const schedName, leaseNS, leaseName = "edge-le", "kube-system", "edge-le"
	cfg := filepath.Join(cp.Dir, "leader-election.yaml")
	text := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: true
  leaseDuration: 4s
  renewDeadline: 3s
  retryPeriod: 500ms
  resourceLock: leases
  resourceNamespace: %s
  resourceName: %s
profiles:
- schedulerName: %s
`, kubeconfig, leaseNS, leaseName, schedName)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(name string) *Process {
		// the harness passes --leader-elect=false; the later flag wins
		return cp.StartScheduler(t, SchedulerOptions{Binary: bins[2], Name: name, ConfigFile: cfg, Args: []string{"--leader-elect=true"}})
	}
	const acquired = `"Successfully acquired lease" lock="` + leaseNS + "/" + leaseName + `"`
	waitLog := func(p *Process, what string) time.Duration {
		t.Helper()
		began := time.Now()
		for !strings.Contains(p.LogTail(1<<20), what) {
			if ok, err := p.Exited(); ok {
				t.Fatalf("%s exited waiting for %q: %v", p.Name, what, err)
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: no %q in its log", p.Name, what)
			}
			time.Sleep(100 * time.Millisecond)
		}
		return time.Since(began)
	}
	holder := func() string {
		t.Helper()
		l, err := cp.Client.CoordinationV1().Leases(leaseNS).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("lease %s/%s: %v", leaseNS, leaseName, err)
		}
		if l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}

	a := start("edge-scheduler-a")
	waitLog(a, acquired)
	first := holder()
	b := start("edge-scheduler-b")
	// b is ready (its informers synced) but does not lead
	if h := holder(); h != first || strings.Contains(b.LogTail(1<<20), acquired) {
		t.Fatalf("b took the lease from a running leader: holder %q, was %q", h, first)
	}

	const ns = "e2e-le"
	if err := CreateNamespace(ctx, cp.Client, ns); err != nil {
		t.Fatal(err)
	}
	pod := func(name string) {
		p := testPod(name, podShape{cpu: "100m", mem: "64Mi"})
		p.Spec.SchedulerName = schedName
		if _, err := cp.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPodBound(ctx, t, cp, ns, name)
	}
	pod("under-a")
	if strings.Contains(b.LogTail(1<<20), `pod="e2e-le/under-a"`) {
		t.Fatal("the follower b logged the pod a scheduled")
	}
	// the binding is logged after the API has it: wait for the line
	waitLog(a, `pod="e2e-le/under-a"`)

	// SIGTERM: a releases the lease and exits 0; b takes it over at
	// once (not after the lease duration) and schedules.
	stopped := time.Now()
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if errors.As(a.waitErr, &exit) || !strings.Contains(a.LogTail(1<<20), "Requested to terminate, exiting") {
		t.Fatalf("a did not stop cleanly on SIGTERM (%v), want exit 0 after releasing the lease:\n%s", a.waitErr, a.LogTail(4096))
	}
	waitLog(b, acquired)
	takeover := time.Since(stopped)
	if h := holder(); h == first || h == "" {
		t.Fatalf("after the takeover the lease holder is %q (a was %q)", h, first)
	}
	pod("under-b")
	// the binding is logged after the API has it: wait for the line
	waitLog(b, `pod="e2e-le/under-b"`)
	t.Logf("a led as %s; SIGTERM to b leading %s later (lease duration 4s)", first, takeover.Round(time.Millisecond))

	// A leader that cannot renew (frozen past the lease) must not go on
	// scheduling beside the new one: c takes the lease over, and b, once
	// resumed, finds it lost and exits 1.
	c := start("edge-scheduler-c")
	if err := b.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitLog(c, acquired)
	if err := b.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Done():
	case <-ctx.Done():
		t.Fatalf("b went on after losing its lease:\n%s", b.LogTail(4096))
	}
	if !errors.As(b.waitErr, &exit) || exit.ExitCode() != 1 || !strings.Contains(b.LogTail(1<<20), "leader election lost") {
		t.Fatalf("b after losing its lease: %v, want exit 1 with %q:\n%s", b.waitErr, "leader election lost", b.LogTail(4096))
	}
	pod("under-c")
	// the binding is logged after the API has it: wait for the line
	waitLog(c, `pod="e2e-le/under-c"`)
	// the leader's /metrics has what kube-scheduler's main registers
	// beside the scheduler's own: client-go's and the build's
	m, err := scrapeMetrics(ctx, c.URL+"/metrics", cp.Token)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		min  float64
	}{
		{"leader_election_master_status", 1}, {"rest_client_requests_total", 1}, {"kubernetes_build_info", 1},
		{"scheduler_schedule_attempts_total", 1}, {"go_goroutines", 1},
	} {
		if got := m.sum(tc.name); got < tc.min {
			t.Errorf("c's /metrics: %s = %v, want at least %v", tc.name, got, tc.min)
		}
	}
}
