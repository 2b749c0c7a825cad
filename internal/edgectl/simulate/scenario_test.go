package simulate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScenarioListShowValidate(t *testing.T) {
	out, _, err := run(t, "scenario", "list")
	if err != nil || !strings.Contains(out, "builtin:retail-fleet") || !strings.Contains(out, "builtin:factory-vision") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	src, _, err := run(t, "scenario", "show", "builtin:retail-fleet")
	if err != nil || !strings.Contains(src, "kind: Scenario") {
		t.Fatalf("show: %v", err)
	}
	path := filepath.Join(t.TempDir(), "mine.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err = run(t, "scenario", "validate", path)
	if err != nil || !strings.HasPrefix(out, "retail-fleet: ok: 24 nodes in 3 zones") {
		t.Fatalf("validate: %v\n%s", err, out)
	}
	bad := strings.Replace(src, "cpuMilli: 4000", "cpuMilli: -4000", 1)
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = run(t, "scenario", "validate", path)
	if err == nil || !strings.Contains(err.Error(), path+":") || !strings.Contains(err.Error(), "nodePools[0].cpuMilli") {
		t.Fatalf("validate of a bad file: %v", err)
	}
	if _, _, err := run(t, "scenario", "show", "nope"); err == nil {
		t.Error("show of an unknown scenario succeeded")
	}
}
