package schedcmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edgesched/edgesched/edge-plugin/extender"

	"github.com/spf13/cobra"

	edgecli "github.com/edgesched/edgesched/internal/cli"
)

// runExtenderCommand runs `extender args` to its end, as
// cmd/edge-scheduler does; it returns the exit code and what went to
// stdout and stderr.
func runExtenderCommand(t *testing.T, args ...string) (int, string) {
	t.Helper()
	root := &cobra.Command{Use: "edge-scheduler"}
	root.AddCommand(newExtender())
	edgecli.EnforceContract(root)
	var out bytes.Buffer
	code := edgecli.Execute(t.Context(), root, append([]string{"extender"}, args...), &out, &out)
	return code, out.String()
}

// TestExtenderCommandUsage: bad command lines are usage errors (2) naming
// the problem; a ConfigMap is [NAMESPACE/]NAME, NAME alone in --namespace;
// --keys, the old name of --model-keys, still works and warns.
func TestExtenderCommandUsage(t *testing.T) {
	if code, out := runExtenderCommand(t, "--help"); code != 0 || !strings.Contains(out, "--model-keys") || !strings.Contains(out, "--listen") || strings.Contains(out, "--keys") {
		t.Fatalf("--help: %d %s", code, out)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "--model is required"},
		{[]string{"--model", "m"}, 2, "--model-keys is required"},
		{[]string{"--model", "m", "--model-keys", "k", "extra"}, 2, "unexpected argument"},
		{[]string{"--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"--model", "m", "--model-keys", "k", "--tls-cert", "c"}, 1, "--tls-key"},
		{[]string{"--model", "m", "--model-keys", "k", "--dependencies-configmap", "Bad_Name"}, 2, `--dependencies-configmap: bad ConfigMap reference "Bad_Name"`},
		{[]string{"--model", "m", "--model-keys", "k", "--topology-configmap", "a/b/c"}, 2, `--topology-configmap: bad ConfigMap reference "a/b/c"`},
		{[]string{"--model", "m", "--model-keys", "k", "--namespace", "No", "--policy-configmap", "policy"}, 2, `--policy-configmap: bad ConfigMap reference "policy": namespace "No"`},
		// the old name parses (the model file is missing: a failure, 1)
		{[]string{"--model", "m", "--keys", "k"}, 1, "Flag --keys has been deprecated, use --model-keys instead"},
		{[]string{"--model", "m", "--keys", "k", "--model-keys", "k"}, 2, "--keys and --model-keys are the same flag"},
	} {
		if code, out := runExtenderCommand(t, c.args...); code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%v: %d %q, want %d and %q", c.args, code, out, c.code, c.want)
		}
	}
}

// TestExtenderConfigMapFlags: the flags reach the server's
// configuration, every ConfigMap as NAMESPACE/NAME in the plugin's args.
func TestExtenderConfigMapFlags(t *testing.T) {
	var got extender.Config
	root := &cobra.Command{Use: "edge-scheduler"}
	root.AddCommand(newExtenderCommand(func(_ context.Context, cfg extender.Config, _ int) error { got = cfg; return nil }))
	edgecli.EnforceContract(root)
	var out bytes.Buffer
	if code := edgecli.Execute(t.Context(), root, []string{"extender", "--model", "m", "--model-keys", "a,b", "--model-keys", "c", "--namespace", "site-1",
		"--dependencies-configmap", "deps", "--policy-configmap", "ops/policy", "--telemetry-max-age", "90s"}, &out, &out); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	if a := got.Args; a.DependenciesConfigMap != "site-1/deps" || a.PolicyConfigMap != "ops/policy" || a.TopologyConfigMap != "" ||
		strings.Join(a.ModelKeys, " ") != "a b c" || a.TelemetryMaxAge.Duration != 90*time.Second || got.QPS != extender.DefaultQPS {
		t.Fatalf("config %+v", got)
	}
}
