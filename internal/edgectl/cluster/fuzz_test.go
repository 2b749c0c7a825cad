package cluster

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// FuzzExplainFile: no pod manifest given to 'edgectl explain file' makes
// it panic, whatever its explanation annotation holds; the steps are the
// command's (the manifest read as YAML or JSON, then printed as a table,
// JSON and YAML). A manifest that is explained prints its pod and node,
// and its -o json output is JSON. Seeded with the golden pod EdgePolicy
// explained (internal/edgectl/testdata/explained-pod.json), as JSON and
// as YAML.
func FuzzExplainFile(f *testing.F) {
	golden, err := os.ReadFile(filepath.Join("..", "testdata", "explained-pod.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	y, err := yaml.JSONToYAML(golden)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(y)
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: ns\n  annotations:\n    edgesched.io/explanation: '{\"v\":1,\"node\":\"n1\",\"score\":2,\"baseline\":1,\"rest\":-1e-300,\"groups\":[{\"group\":\"load\",\"attribution\":-0.5},{\"group\":\"\",\"attribution\":1e308},{\"group\":\"z\",\"attribution\":5e-324}]}'\nspec:\n  nodeName: n2\n"))
	f.Add([]byte("kind: Service\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var pod v1.Pod
		if err := yaml.Unmarshal(b, &pod); err != nil {
			return
		}
		if pod.Kind != "" && pod.Kind != "Pod" {
			return
		}
		for _, format := range []string{"table", "json", "yaml"} {
			var out bytes.Buffer
			f := explainFlags{output: format}
			if err := f.print(&out, &pod); err != nil {
				if out.Len() > 0 && format != "table" {
					t.Fatalf("-o %s failed (%v) after writing %q", format, err, out.String())
				}
				return
			}
			switch format {
			case "table":
				if !strings.Contains(out.String(), "Pod:") || !strings.Contains(out.String(), "score - baseline") {
					t.Fatalf("table without its rows:\n%s", out.String())
				}
			case "json":
				var e explainedPod
				if err := json.Unmarshal(out.Bytes(), &e); err != nil || e.Node == "" {
					t.Fatalf("-o json output does not read back (%v):\n%s", err, out.String())
				}
			}
		}
	})
}
