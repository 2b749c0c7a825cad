package policy

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestDocsListEveryFeature keeps docs/policy.md in step with the schema.
func TestDocsListEveryFeature(t *testing.T) {
	b, err := os.ReadFile("../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if !strings.Contains(doc, SchemaID) {
		t.Errorf("docs/policy.md does not name schema %s", SchemaID)
	}
	for i, f := range FeatureList() {
		if !strings.Contains(doc, "| "+strconv.Itoa(i)+" | `"+f.Name+"` | "+f.Description+" |") {
			t.Errorf("docs/policy.md lacks feature %d %s: %s", i, f.Name, f.Description)
		}
	}
}
