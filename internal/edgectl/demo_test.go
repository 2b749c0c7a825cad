package edgectl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDemo(t *testing.T) {
	dir := t.TempDir()
	out, _, err := run(t, "demo", "--out", dir, "--progress", "never")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"inflate mode, 1523 nodes", "retail-fleet, replay mode", "fgd", "k8s-default", "trimaran-tlp", "learned", "learned:edge"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	for _, f := range []string{"openb/unallocated_gpu.png", "openb/curve.csv", "retail-fleet/utilization.png", "retail-fleet/results.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}
