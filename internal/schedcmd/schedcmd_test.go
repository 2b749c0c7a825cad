package schedcmd

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigArgsRefusedAtLoad: EdgePolicy's args are in kube-scheduler's
// configuration scheme, so edge-scheduler refuses a KubeSchedulerConfiguration
// whose EdgePolicy args have an unknown field when it loads the file,
// naming the plugin and the field, before it connects to any API server
// (the kubeconfig named does not exist). Without the registration the
// args would reach the plugin as raw bytes, after the scheduler had
// started its clients.
// childEnv makes the test binary run edge-scheduler's Main (the child
// side of TestConfigArgsRefusedAtLoad).
const childEnv = "EDGESCHED_SCHEDCMD_CHILD"

func TestConfigArgsRefusedAtLoad(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "scheduler-config.yaml")
	const text = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: /nonexistent/kubeconfig
profiles:
- schedulerName: edge-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: EdgePolicy
  pluginConfig:
  - name: EdgePolicy
    args:
      modelPath: /nonexistent/model.esa
      modelKey: [/nonexistent/keys]
`
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	// kube-scheduler logs the failure through klog to the process's
	// stderr: run Main in a child process of this test binary
	if os.Getenv(childEnv) == "1" {
		os.Exit(Main(t.Context(), []string{"--config", os.Getenv(childEnv + "_CONFIG"), "--secure-port", "0"}, os.Stdout, os.Stderr))
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestConfigArgsRefusedAtLoad$")
	cmd.Env = append(os.Environ(), childEnv+"=1", childEnv+"_CONFIG="+cfg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("edge-scheduler: %v (want a non-zero exit); stderr:\n%s", err, stderr.String())
	}
	for _, want := range []string{"decoding args for plugin EdgePolicy", `unknown field`, `modelKey`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %s:\n%s", want, stderr.String())
		}
	}
}
