//go:build unix

package e2e

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	// stderr goes to a file: the process writes it while the test reads
	logPath := filepath.Join(t.TempDir(), "edge-agent.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	stderr := logReader(logPath)
	cmd := exec.Command(bin, "--no-annotate", "--no-ebpf", "--metrics-addr", addr, "--stale-after", "90s")
	cmd.Stderr = logFile
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

// logReader reads the file at path (what a process wrote so far).
type logReader string

func (p logReader) String() string {
	b, err := os.ReadFile(string(p))
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return string(b)
}
