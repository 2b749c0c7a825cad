package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl"
	"github.com/edgesched/edgesched/internal/edgectl/cluster"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/internal/testutil/filefixture"
)

// internal/edgectl/testdata/explained-pod.json carries an explanation
// written by EdgePolicy itself (edge-plugin's TestExplainedPodGolden,
// through Bind; the root package's TestOutputFormats reads it too).
const goldenExplainedPod = "../testdata/explained-pod.json"

func readExplainedPod(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(goldenExplainedPod)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// podWith writes the golden pod with its explanation annotation replaced
// (or removed when ann is nil).
func podWith(t *testing.T, ann *string) string {
	t.Helper()
	m := readExplainedPod(t)
	anns := m["metadata"].(map[string]any)["annotations"].(map[string]any)
	if ann == nil {
		delete(anns, cluster.AnnotationExplanation)
	} else {
		anns[cluster.AnnotationExplanation] = *ann
	}
	b, _ := json.Marshal(m)
	p := filepath.Join(t.TempDir(), "pod.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExplainFile(t *testing.T) {
	out, _, err := run(t, "explain", "file", goldenExplainedPod)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"vision/inference-7f9c", "Node:", "r00034", "version 1 (50f55d239d94)", "normalized 100/100", "gpu-fit", "+26.422", "-8.941", "|█", "█|", "score - baseline"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("\n%s", out)

	// -o json, from stdin, as YAML
	var e cluster.ExplainedPod
	out, _, err = run(t, "explain", "file", goldenExplainedPod, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatal(err)
	}
	// edgectl's convention (docs/cli.md), not the annotation's camelCase
	for _, key := range []string{`"model_version"`, `"normalized_score"`, `"computed_at"`} {
		if !strings.Contains(out, key) {
			t.Errorf("-o json has no key %s:\n%s", key, out)
		}
	}
	if strings.Contains(out, "modelVersion") || strings.Contains(out, "computedAt") {
		t.Errorf("-o json has camelCase keys:\n%s", out)
	}
	sum := e.Rest
	for _, g := range e.Groups {
		sum += g.Attribution
	}
	if e.Pod != "vision/inference-7f9c" || e.Node != "r00034" || len(e.Groups) == 0 || math.Abs(sum-(e.Score-e.Baseline)) > 1e-5 {
		t.Fatalf("json %+v", e)
	}
	yamlPod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: ns\n  annotations:\n    edgesched.io/explanation: '{\"v\":1,\"node\":\"n1\",\"score\":2,\"baseline\":1,\"groups\":[{\"group\":\"load\",\"attribution\":-0.5},{\"group\":\"carbon\",\"attribution\":1.5}]}'\n"
	var stdout bytes.Buffer
	cmd := edgectl.NewRootCommand(edgectl.Options{})
	cmd.SetArgs([]string{"explain", "file", "-"})
	cmd.SetIn(strings.NewReader(yamlPod))
	cmd.SetOut(&stdout)
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := stdout.String(); !strings.Contains(s, "ns/web") || !strings.Contains(s, "carbon") || !strings.Contains(s, "-0.500") {
		t.Fatalf("stdin yaml:\n%s", s)
	}
}

func TestExplainErrors(t *testing.T) {
	bad := `{"v":1,"node":`
	future := `{"v":2,"node":"n"}`
	noNode := `{"v":1}`
	notPod := filepath.Join(t.TempDir(), "svc.yaml")
	os.WriteFile(notPod, []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n"), 0o644)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no annotation", []string{"explain", "file", podWith(t, nil)}, "has no edgesched.io/explanation annotation"},
		{"malformed annotation", []string{"explain", "file", podWith(t, &bad)}, "malformed"},
		{"no node", []string{"explain", "file", podWith(t, &noNode)}, "no node"},
		{"future format", []string{"explain", "file", podWith(t, &future)}, "format 2"},
		{"not a pod", []string{"explain", "file", notPod}, "kind Service"},
		{"missing file", []string{"explain", "file", filepath.Join(t.TempDir(), "nope.json")}, "no such file"},
		{"bad output", []string{"explain", "file", goldenExplainedPod, "-o", "xml"}, "--output"},
		{"no slash", []string{"explain", "pod", "justname"}, "want NAMESPACE/NAME"},
		{"two slashes", []string{"explain", "pod", "a/b/c"}, "want NAMESPACE/NAME"},
		{"empty namespace", []string{"explain", "pod", "/web"}, "namespace"},
		{"bad name", []string{"explain", "pod", "default/Web_0"}, "name"},
		{"no args", []string{"explain", "pod"}, "accepts 1 arg"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := run(t, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// TestExplainInputErrors: a pod reference or --timeout wrong on its face
// is a usage error (exit 2); an empty manifest says so (it was "pod / has
// no edgesched.io/explanation annotation"); a kubeconfig that is not a
// regular file or is over cmdutil.MaxKubeconfigBytes is refused before
// client-go reads it whole (a 2 GiB one took 2.2 GB).
func TestExplainInputErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, []byte("\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filefixture.Sparse(t, dir, "big-kubeconfig", cmdutil.MaxKubeconfigBytes+1)
	cases := []struct {
		name  string
		args  []string
		want  string
		usage bool
	}{
		{"no slash", []string{"explain", "pod", "justname"}, `pod "justname": want NAMESPACE/NAME`, true},
		{"bad namespace", []string{"explain", "pod", "/web"}, "namespace", true},
		{"negative timeout", []string{"explain", "pod", "ns/web", "--timeout", "-1s"}, "--timeout -1s: must be positive", true},
		{"empty manifest", []string{"explain", "file", empty}, empty + ": not a pod manifest: empty input", false},
		{"kubeconfig over the cap", []string{"explain", "pod", "ns/web", "--kubeconfig", big}, "kubeconfig: " + big + ": input exceeds its size limit", false},
		{"kubeconfig a directory", []string{"explain", "pod", "ns/web", "--kubeconfig", dir}, "kubeconfig: " + dir + ": not a regular file (a directory)", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := run(t, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			if cli.IsUsage(err) != c.usage {
				t.Errorf("usage error (exit 2): %v, want %v", cli.IsUsage(err), c.usage)
			}
		})
	}
}

// TestExplainPod reads the pod through client-go from a stand-in API
// server named by a kubeconfig.
func TestExplainPod(t *testing.T) {
	golden, err := os.ReadFile(goldenExplainedPod)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/api/v1/namespaces/vision/pods/inference-7f9c" {
			w.Write(golden)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"x\" not found","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+srv.URL+`"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600)
	out, _, err := run(t, "explain", "pod", "vision/inference-7f9c", "--kubeconfig", kc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "r00034") || !strings.Contains(out, "gpu-fit") {
		t.Fatalf("output:\n%s", out)
	}
	t.Setenv("KUBECONFIG", kc) // the default
	if _, _, err := run(t, "explain", "pod", "vision/missing"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("missing pod: %v", err)
	}
	if _, _, err := run(t, "explain", "pod", "vision/inference-7f9c", "--kubeconfig", filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "kubeconfig") {
		t.Fatalf("missing kubeconfig: %v", err)
	}
}
