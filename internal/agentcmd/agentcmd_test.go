package agentcmd

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFlags: bad command lines exit 2 with a message naming the problem,
// -h exits 0, before anything is started.
func TestFlags(t *testing.T) {
	t.Setenv(NodeNameEnv, "")
	dir := t.TempDir()
	badKubeconfig := filepath.Join(dir, "kubeconfig")
	os.WriteFile(badKubeconfig, []byte("this: is: not a kubeconfig"), 0o600)
	// a well-formed kubeconfig (nothing listens there: building the
	// client does not connect)
	kubeconfig := filepath.Join(dir, "ok-kubeconfig")
	os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"+
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"), 0o600)
	site := []string{"--node-name", "n1", "--kubeconfig", kubeconfig, "--no-ebpf", "--site", "factory-1"}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help", []string{"-h"}, 0, "-node-name"},
		{"unknown flag", []string{"--bogus"}, 2, "flag provided but not defined: -bogus"},
		{"stray argument", []string{"--no-annotate", "extra"}, 2, `unexpected arguments ["extra"]`},
		{"bad duration", []string{"--sample-interval", "fast"}, 2, `invalid value "fast" for flag -sample-interval`},
		{"zero duration", []string{"--no-annotate", "--annotate-interval", "0s"}, 2, "--annotate-interval 0s: must be positive"},
		{"negative lease", []string{"--no-annotate", "--lease-duration", "-1s"}, 2, "--lease-duration -1s: must be positive"},
		{"bad log level", []string{"--log-level", "loud"}, 2, "--log-level"},
		{"no node name", nil, 2, "--node-name (or $NODE_NAME) is required"},
		{"missing kubeconfig", []string{"--node-name", "n1", "--kubeconfig", filepath.Join(dir, "nope")}, 2, "--kubeconfig"},
		{"malformed kubeconfig", []string{"--node-name", "n1", "--kubeconfig", badKubeconfig}, 2, "--kubeconfig"},
		{"relative cgroup", []string{"--no-annotate", "--cgroup", "pods"}, 2, "must start with /"},
		{"unknown cgroup", []string{"--no-annotate", "--no-ebpf", "--cgroup", "/edgesched-no-such-cgroup"}, 2, "/edgesched-no-such-cgroup"},
		{"relative tracefs", []string{"--no-annotate", "--tracefs", "sys/kernel/tracing"}, 2, "--tracefs"},
		{"sample slower than annotate", []string{"--no-annotate", "--sample-interval", "20s"}, 2, "longer than the annotate interval"},
		{"annotate too slow for staleness", []string{"--no-annotate", "--annotate-interval", "90s"}, 2, "below half the stale-after"},
		{"bad trace events", []string{"--no-annotate", "--trace-max-events", "0"}, 2, "--trace-max-events"},
		{"site flags without --site", []string{"--no-annotate", "--nats", "nats://127.0.0.1:4222"}, 2, "--nats given without --site"},
		{"site without node name", []string{"--no-annotate", "--site", "factory-1"}, 2, "--node-name (or $NODE_NAME) is required"},
		{"site without nats", site, 2, "--site needs --nats"},
		{"site without key", append(site, "--nats", "nats://127.0.0.1:1"), 2, "--site needs --site-key"},
		{"site with a missing key", append(site, "--nats", "nats://127.0.0.1:1", "--site-key", filepath.Join(dir, "none.key"), "--trusted-keys", dir), 2, "--site-key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := Main(context.Background(), tc.args, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d mentioning %q", code, stderr.String(), tc.code, tc.want)
			}
		})
	}
}

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

// TestRunAndStop runs the agent without a cluster (--no-annotate), on
// /proc only, serves /healthz and /metrics, and stops with exit 0 when
// its context ends (what SIGTERM does in cmd/edge-agent).
func TestRunAndStop(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"--no-annotate", "--no-ebpf", "--metrics-addr", addr, "--sample-interval", "100ms",
			"--annotate-interval", "1s"}, &stderr)
	}()
	deadline := time.Now().Add(10 * time.Second)
	var body string
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				body = string(b)
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz not OK within 10 s (last error %v); log:\n%s", err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if body != "ok\n" {
		t.Fatalf("/healthz body %q", body)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `edgesched_agent_telemetry_source{source="proc"} 1`) {
		t.Fatalf("/metrics lacks the source gauge:\n%.2000s", b)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d after cancel; log:\n%s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop within 10 s of cancel")
	}
	log := stderr.String()
	for _, want := range []string{"eBPF telemetry disabled", "edge-agent stopped"} {
		if !strings.Contains(log, want) {
			t.Fatalf("log lacks %q:\n%s", want, log)
		}
	}
}
