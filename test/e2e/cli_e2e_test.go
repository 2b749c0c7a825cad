//go:build unix

package e2e

import (
	"bytes"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestDeprecatedFlagName starts the built edge-agent with a flag's old
// name (--stale-after, now --telemetry-max-age; docs/cli.md, "One name per
// concept"): it still works — the agent serves /healthz and stops cleanly
// on SIGTERM — and says once on stderr which flag replaced it.
func TestDeprecatedFlagName(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped under -short (builds edge-agent)")
	}
	bin := buildLocal(t, agentPkg)[0]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var stderr lockedBuffer
	cmd := exec.Command(bin, "--no-annotate", "--no-ebpf", "--metrics-addr", addr, "--stale-after", "90s")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("edge-agent --stale-after 90s exited (%v) before it served /healthz:\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("edge-agent --stale-after 90s: no /healthz within 30s:\n%s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("edge-agent after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("edge-agent did not stop within 30s of SIGTERM:\n%s", stderr.String())
	}
	if n := strings.Count(stderr.String(), "Flag --stale-after has been deprecated, use --telemetry-max-age instead"); n != 1 {
		t.Fatalf("%d deprecation warnings naming --telemetry-max-age, want 1:\n%s", n, stderr.String())
	}
}

// lockedBuffer is a bytes.Buffer a process writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
