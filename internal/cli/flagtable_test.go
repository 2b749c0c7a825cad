package cli_test

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/edgesched/edgesched/internal/agentcmd"
	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/coordcmd"
	"github.com/edgesched/edgesched/internal/edgectl"
	"github.com/edgesched/edgesched/internal/schedcmd"
)

var update = flag.Bool("update", false, "rewrite docs/cli.md's flag table from cli.FlagTable")

// trees build each binary's command tree in process. edge-scheduler's is
// its own verbs (extender, version): kube-scheduler's command registers
// global state when built, and takes none of the table's concepts.
var trees = map[string]func() *cobra.Command{
	"edgectl":          func() *cobra.Command { return edgectl.NewRootCommand(edgectl.Options{}) },
	"edge-agent":       agentcmd.NewCommand,
	"edge-coordinator": coordcmd.NewCommand,
	"edge-scheduler":   schedcmd.NewCommand,
}

// command finds the command path names in a fresh tree, with its root.
func command(t *testing.T, path string) (*cobra.Command, *cobra.Command) {
	t.Helper()
	words := strings.Fields(path)
	tree, ok := trees[words[0]]
	if !ok {
		t.Fatalf("%q: no binary %q", path, words[0])
	}
	root := tree()
	c, rest, err := root.Find(words[1:])
	if err != nil || len(rest) > 0 || c.CommandPath() != path {
		t.Fatalf("%q: found %q (rest %q): %v", path, c.CommandPath(), rest, err)
	}
	return root, c
}

// TestFlagTable: every command the table names takes the concept under
// its one name, visible in its help; every old name is hidden from the
// help and deprecated; -o is only ever the output format.
func TestFlagTable(t *testing.T) {
	for _, f := range cli.FlagTable {
		for _, path := range f.Commands {
			t.Run(f.Name+"/"+path, func(t *testing.T) {
				_, c := command(t, path)
				fl := c.Flags().Lookup(f.Name)
				if fl == nil || fl.Hidden || fl.Deprecated != "" {
					t.Fatalf("%s has no visible --%s (%+v)", path, f.Name, fl)
				}
				if f.Shorthand != "" && (fl.Shorthand != f.Shorthand || fl.ShorthandDeprecated != "") {
					t.Fatalf("%s: --%s's shorthand is %q, want -%s", path, f.Name, fl.Shorthand, f.Shorthand)
				}
				if help := c.UsageString(); !strings.Contains(help, "--"+f.Name+" ") && !strings.Contains(help, "--"+f.Name+"\n") {
					t.Fatalf("%s's help has no --%s:\n%s", path, f.Name, help)
				}
			})
		}
		for _, old := range f.Deprecated {
			t.Run(f.Name+"/"+old.Command+"/old "+old.Name, func(t *testing.T) {
				_, c := command(t, old.Command)
				help := c.UsageString()
				if old.Shorthand {
					fl := c.Flags().Lookup(f.Name)
					if fl == nil || fl.Shorthand != old.Name || fl.ShorthandDeprecated == "" || strings.Contains(help, "-"+old.Name+", --"+f.Name) {
						t.Fatalf("%s: -%s is not a deprecated shorthand of --%s (%+v)", old.Command, old.Name, f.Name, fl)
					}
					return
				}
				fl := c.Flags().Lookup(old.Name)
				if fl == nil || !fl.Hidden || fl.Deprecated == "" || strings.Contains(help, "--"+old.Name+" ") {
					t.Fatalf("%s: --%s is not a hidden deprecated alias of --%s (%+v)\n%s", old.Command, old.Name, f.Name, fl, help)
				}
			})
		}
	}
	// -o is the output format wherever it is visible
	for _, tree := range trees {
		var walk func(c *cobra.Command)
		walk = func(c *cobra.Command) {
			c.Flags().VisitAll(func(fl *pflag.Flag) {
				if fl.Shorthand == "o" && fl.ShorthandDeprecated == "" && fl.Name != "output" {
					t.Errorf("%s: -o is --%s, not the output format", c.CommandPath(), fl.Name)
				}
			})
			for _, s := range c.Commands() {
				walk(s)
			}
		}
		walk(tree())
	}
}

// TestDeprecatedNames: every old name still sets its flag, and prints a
// warning on stderr naming the new one.
func TestDeprecatedNames(t *testing.T) {
	for _, f := range cli.FlagTable {
		for _, old := range f.Deprecated {
			t.Run(old.Command+" "+old.Name, func(t *testing.T) {
				root, c := command(t, old.Command)
				var stdout, stderr bytes.Buffer
				root.SetOut(&stdout)
				root.SetErr(&stderr)
				fl := c.Flags().Lookup(f.Name)
				value, want := "abc", "abc"
				if fl.Value.Type() == "duration" {
					value, want = "2m", "2m0s"
				}
				arg := "--" + old.Name
				if old.Shorthand {
					arg = "-" + old.Name
				}
				if err := c.ParseFlags([]string{arg, value}); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(fl.Value.String(), want) {
					t.Fatalf("%s %s %s: --%s is %q", old.Command, arg, value, f.Name, fl.Value.String())
				}
				if w := stderr.String(); !strings.Contains(w, "deprecated") || !strings.Contains(w, "--"+f.Name) || stdout.Len() > 0 {
					t.Fatalf("%s %s: stderr %q, stdout %q; want a warning naming --%s on stderr", old.Command, arg, w, stdout.String(), f.Name)
				}
			})
		}
	}
}

// docPath is the document whose table FlagTableMarkdown writes, between
// the markers.
const (
	docPath   = "../../docs/cli.md"
	docBegin  = "<!-- flag table: cli.FlagTable; go test ./internal/cli -run TestFlagTableDoc -update -->\n"
	docEnding = "<!-- end of flag table -->\n"
)

// TestFlagTableDoc: docs/cli.md's table is cli.FlagTable's (-update
// rewrites it).
func TestFlagTableDoc(t *testing.T) {
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, docBegin), strings.Index(doc, docEnding)
	if i < 0 || j < i {
		t.Fatalf("%s: no flag table between %q and %q", docPath, docBegin, docEnding)
	}
	want := doc[:i+len(docBegin)] + cli.FlagTableMarkdown() + doc[j:]
	if want == doc {
		return
	}
	if *update {
		if err := os.WriteFile(docPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s's flag table is not cli.FlagTable's: run go test ./internal/cli -run TestFlagTableDoc -update", docPath)
}
