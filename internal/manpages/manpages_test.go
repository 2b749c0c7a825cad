package manpages

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/edgectl"
)

// TestWrite: one page per available command, each a man page of section
// 1 naming its flags; the pages' date is the one given.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	date := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	pages, err := Write(dir, date)
	if err != nil {
		t.Fatal(err)
	}
	// the commands cobra documents: available ones (not hidden, not the
	// help topics), the root included
	want := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.IsAvailableCommand() && c.HasParent() || c.IsAdditionalHelpTopicCommand() {
			return
		}
		want++
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	root := edgectl.NewRootCommand(edgectl.Options{})
	walk(root)
	if len(pages) != want || want < 40 {
		t.Fatalf("%d pages for %d commands", len(pages), want)
	}
	for page, wants := range map[string][]string{
		"edgectl.1":                    {`.TH "EDGECTL" "1" "Jan 2030" "edgesched `, "edgectl-sim(1)"},
		"edgectl-sim.1":                {`\fB--policies\fP`, `\fB-o\fP, \fB--output\fP="table"`},
		"edgectl-round-status.1":       {`\fB-s\fP, \fB--server\fP`, `\fB--context\fP`},
		"edgectl-topology-configmap.1": {`--namespace\fP="edgesched-system"`},
	} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wants {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s lacks %q:\n%.1500s", page, w, b)
			}
		}
	}
}
