package schedcmd

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	edgecli "github.com/edgesched/edgesched/internal/cli"
)

// parse runs the scheduler command line args through the command tree
// and returns the options the scheduler would run with, or the exit code
// and stderr of a refused command line.
func parse(t *testing.T, args ...string) (*schedulerOptions, int, string) {
	t.Helper()
	var got *schedulerOptions
	var stdout, stderr bytes.Buffer
	code := edgecli.Execute(t.Context(), newCommand(func(_ context.Context, o *schedulerOptions) error { got = o; return nil }), args, &stdout, &stderr)
	return got, code, stderr.String()
}

// writeConfig writes a KubeSchedulerConfiguration with body after its kind.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "scheduler-config.yaml")
	text := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" + body
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadConfig: the configuration as kube-scheduler loads it, with the
// leader-election flags applied only when given and --kubeconfig only
// where the file names none.
func TestLoadConfig(t *testing.T) {
	noElection := writeConfig(t, "leaderElection:\n  leaderElect: false\n")
	withClient := writeConfig(t, "clientConnection:\n  kubeconfig: /etc/k/admin.conf\nprofiles:\n- schedulerName: edge-scheduler\n")
	for _, tc := range []struct {
		name       string
		args       []string
		elect      bool
		kubeconfig string
		profile    string
	}{
		// kube-scheduler's defaults: one profile, leader election on
		{"no config", nil, true, "", "default-scheduler"},
		{"no config, flag", []string{"--leader-elect=false", "--kubeconfig", "/k"}, false, "/k", "default-scheduler"},
		{"file says no", []string{"--config", noElection}, false, "", "default-scheduler"},
		{"flag wins over file", []string{"--config", noElection, "--leader-elect"}, true, "", "default-scheduler"},
		{"file's kubeconfig wins", []string{"--config", withClient, "--kubeconfig", "/other"}, true, "/etc/k/admin.conf", "edge-scheduler"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, code, stderr := parse(t, tc.args...)
			if o == nil {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			cfg, err := o.loadConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.LeaderElection.LeaderElect != tc.elect || cfg.ClientConnection.Kubeconfig != tc.kubeconfig ||
				len(cfg.Profiles) != 1 || cfg.Profiles[0].SchedulerName != tc.profile {
				t.Fatalf("leaderElect %v kubeconfig %q profiles %d (%s), want %v %q %s", cfg.LeaderElection.LeaderElect,
					cfg.ClientConnection.Kubeconfig, len(cfg.Profiles), cfg.Profiles[0].SchedulerName, tc.elect, tc.kubeconfig, tc.profile)
			}
		})
	}
}

// TestLoadConfigRefused: a configuration kube-scheduler would refuse is
// refused with the problem named.
func TestLoadConfigRefused(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, bytes.Repeat([]byte("#"), maxConfigBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	notConfig := filepath.Join(t.TempDir(), "pod.yaml")
	if err := os.WriteFile(notConfig, []byte("apiVersion: v1\nkind: Pod\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file, want string
		is               error
	}{
		{"percentage over 100", writeConfig(t, "percentageOfNodesToScore: 101\n"), "percentageOfNodesToScore", nil},
		{"unknown field", writeConfig(t, "parallelsim: 4\n"), `unknown field "parallelsim"`, nil},
		{"not a scheduler configuration", notConfig, "pod.yaml", nil},
		{"missing file", filepath.Join(t.TempDir(), "none.yaml"), "no such file", os.ErrNotExist},
		{"too large", big, "file too large", errTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, code, stderr := parse(t, "--config", tc.file)
			if o == nil {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			_, err := o.loadConfig()
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("loadConfig: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestSchedulerUsageErrors: flags wrong on their face exit 2 with the
// flag named, before anything runs.
func TestSchedulerUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--secure-port", "70000"}, "--secure-port 70000 is not a port"},
		{[]string{"--tls-cert-file", "c.pem"}, "--tls-cert-file and --tls-private-key-file go together"},
		{[]string{"--leader-elect-lease-duration", "0s"}, "--leader-elect-lease-duration must be positive"},
		{[]string{"--feature-gates", "NoSuchGate=true"}, "--feature-gates: unrecognized feature gate: NoSuchGate"},
		{[]string{"--feature-gates", "nonsense"}, `invalid argument "nonsense" for "--feature-gates"`},
		{[]string{"--secure-prot", "1"}, "did you mean --secure-port?"},
		{[]string{"stray"}, `unknown command "stray"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, code, stderr := parse(t, tc.args...)
			if o != nil || code != edgecli.ExitUsage || !strings.Contains(stderr, tc.want) {
				t.Fatalf("ran %v, exit %d, stderr:\n%s\nwant exit %d with %q", o != nil, code, stderr, edgecli.ExitUsage, tc.want)
			}
		})
	}
}
