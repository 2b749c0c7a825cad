package edgectl

import (
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	out, _, err := run(t, "version")
	if err != nil || !strings.HasPrefix(out, "edgectl "+Version+" (go") {
		t.Fatalf("version: %v %q", err, out)
	}
	if _, _, err := run(t, "version", "extra"); err == nil {
		t.Error("version accepted an argument")
	}
}
