//go:build unix

package fl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/test/internal/gobuild"
)

// The nats-server versions the federation is tested against
// (docs/federated.md "NATS server versions"): the oldest supported, as
// Debian packages it (bookworm's nats-server is 2.9.10), and the one
// go.mod pins; and one older than the minimum, which must be refused.
const (
	natsOldest   = "v2.9.10"
	natsPinned   = "v2.15.2"
	natsTooOld   = "v2.8.4"
	natsCacheEnv = "EDGESCHED_NATS_CACHE"
)

// natsServerBinary returns a nats-server of version: the pinned one is
// built from this module's dependency; others with `go install
// github.com/nats-io/nats-server/v2@VERSION` from the Go module proxy
// into a cache kept across runs ($EDGESCHED_NATS_CACHE, default
// $XDG_CACHE_HOME/edgesched-test/nats-server). When the version cannot be
// fetched or built the test is skipped, saying why.
func natsServerBinary(t *testing.T, version string) string {
	t.Helper()
	if version == natsPinned {
		return gobuild.Build(t, filepath.Join(t.TempDir(), "nats"), "github.com/nats-io/nats-server/v2")[0]
	}
	cache := os.Getenv(natsCacheEnv)
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		cache = filepath.Join(base, "edgesched-test", "nats-server")
	}
	dir := filepath.Join(cache, version)
	bin := filepath.Join(dir, "nats-server")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	goBin, err := gobuild.GoTool()
	if err != nil {
		t.Skipf("cannot build nats-server %s: %v", version, err)
	}
	tmp, err := os.MkdirTemp(cache+"-tmp", "build-") // same file system: the rename below is atomic
	if err != nil {
		if err := os.MkdirAll(cache+"-tmp", 0o755); err != nil {
			t.Skipf("cannot build nats-server %s: %v", version, err)
		}
		if tmp, err = os.MkdirTemp(cache+"-tmp", "build-"); err != nil {
			t.Skipf("cannot build nats-server %s: %v", version, err)
		}
	}
	defer os.RemoveAll(tmp)
	began := time.Now()
	cmd := exec.Command(goBin, "install", "github.com/nats-io/nats-server/v2@"+version)
	cmd.Dir = tmp // outside any module: go install pkg@version ignores go.mod anyway
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("cannot fetch or build nats-server %s from the Go module proxy (%v):\n%s", version, err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(tmp, "nats-server"), bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("built nats-server %s in %v (cached in %s)", version, time.Since(began).Round(time.Second), dir)
	return bin
}

// startNATSProcess runs a nats-server binary with JetStream on a free
// loopback port until the test's cleanup, and returns its URL.
func startNATSProcess(t *testing.T, bin string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	logPath := filepath.Join(t.TempDir(), "nats-server.log")
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", t.TempDir(), "-l", logPath)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("nats-server log:\n%s", b)
			}
		}
	})
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	fltest.Eventually(t, 20*time.Second, "nats-server to accept connections", func() (bool, string) {
		nc, err := nats.Connect(url)
		if err != nil {
			return false, err.Error()
		}
		defer nc.Close()
		return true, ""
	})
	return url
}

// TestRestartRecoveryOldNATS reproduces finding 2 of issue 21: on
// nats-server 2.9.10 (Debian's), after a kill -9 mid-round every restart
// of edge-coordinator exited with "reset the update consumer to its ack
// floor: context deadline exceeded" (the reset API came with 2.14). On
// the oldest supported server and on the pinned one, the coordinator is
// killed after recording an update it has not acked, restarted, and the
// rounds finish with models bit-identical to an uninterrupted run on the
// same server, every update applied once (runCrashScenario's checks).
func TestRestartRecoveryOldNATS(t *testing.T) {
	coord := buildEdgeCoordinator(t)
	for _, version := range []string{natsOldest, natsPinned} {
		t.Run(version, func(t *testing.T) {
			bin := natsServerBinary(t, version)
			ref := runCrashScenarioOn(t, coord, crashKill{}, startNATSProcess(t, bin))
			got := runCrashScenarioOn(t, coord, crashKill{failpoint: coordinator.FailUpdateCommitted + ":2"}, startNATSProcess(t, bin))
			t.Logf("nats-server %s: killed at the second recorded update and restarted; versions %s", version, got.describe())
			compareCrashRuns(t, ref, got)
		})
	}
}

// TestOldNATSRefused: a nats-server older than the minimum (2.8.4) is
// refused when the coordinator starts on it, with a message naming both
// versions.
func TestOldNATSRefused(t *testing.T) {
	url := startNATSProcess(t, natsServerBinary(t, natsTooOld))
	srv := "2.8.4"
	f := newFleet(t, url, 1)
	c, err := coordinator.New(f.coordinatorConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Bootstrap(context.Background(), fltest.SmallModel(t, 1)); err != nil {
		t.Fatal(err)
	}
	nc := fltest.Connect(t, url, "coordinator")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = c.Run(ctx, nc)
	if !errors.Is(err, federated.ErrServerVersion) || !strings.Contains(err.Error(), srv) || !strings.Contains(err.Error(), "2.9.0") {
		t.Fatalf("coordinator on nats-server %s: %v, want a refusal naming %s and 2.9.0", srv, err, srv)
	}
	t.Logf("refused: %v", err)
}
