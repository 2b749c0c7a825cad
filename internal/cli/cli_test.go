package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestExitCode(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want int
	}{
		{"success", nil, ExitOK},
		{"-h", flag.ErrHelp, ExitOK},
		{"failure", errors.New("disk full"), ExitFailure},
		{"usage", Usagef("--x: bad"), ExitUsage},
		{"wrapped usage", fmt.Errorf("sim: %w", Usagef("--x: bad")), ExitUsage},
		{"usage of a wrapped failure", Usage(fmt.Errorf("a: %w", errors.New("b"))), ExitUsage},
		{"unknown command", UnknownCommand("edge-agent", "verison", []string{"version"}), ExitUsage},
	}
	for _, tc := range cases {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("%s: exit %d, want %d", tc.name, got, tc.want)
		}
	}
	if Usage(nil) != nil {
		t.Error("Usage(nil) is not nil")
	}
	inner := errors.New("inner")
	if err := Usage(inner); !errors.Is(err, inner) || err.Error() != "inner" {
		t.Errorf("Usage hides its error: %v", err)
	}
}

// TestSuggest: the rule is cobra's (distance at most 2, or a prefix), so
// each expectation follows from counting edits.
func TestSuggest(t *testing.T) {
	known := []string{"backup", "check", "restore", "version"}
	cases := []struct {
		typed string
		want  []string
	}{
		{"bakup", []string{"backup"}},    // one deletion
		{"backupp", []string{"backup"}},  // one insertion
		{"ckeck", []string{"check"}},     // one substitution
		{"verison", []string{"version"}}, // a transposition: two substitutions
		{"bacukp", []string{"backup"}},   // two substitutions
		{"cheque", nil},                  // three edits from "check"
		{"backupxyz", nil},               // three insertions
		{"rest", []string{"restore"}},    // three deletions, but a prefix
		{"restor", []string{"restore"}},  // one deletion and a prefix: named once
		{"VERSION", nil},                 // the name itself, in another case
		{"rollback", nil},                // far from everything
		{"", nil},                        // nothing typed
	}
	for _, tc := range cases {
		if got := Suggest(tc.typed, known); !slices.Equal(got, tc.want) {
			t.Errorf("Suggest(%q) = %q, want %q", tc.typed, got, tc.want)
		}
	}
}

func TestUnknownValue(t *testing.T) {
	err := UnknownValue("-o/--output", "jsno", []string{"table", "json"})
	want := `-o/--output: unknown value "jsno" (did you mean json?); valid values: table, json`
	if !IsUsage(err) || err.Error() != want {
		t.Fatalf("got %v, want the usage error %q", err, want)
	}
	err = UnknownValue("--columns", "foo", []string{"alloc_cpu", "alloc_mem"})
	if want := `--columns: unknown value "foo"; valid values: alloc_cpu, alloc_mem`; err.Error() != want {
		t.Fatalf("got %q, want %q", err, want)
	}
}

// TestFlagErrors: an unknown flag names the close visible ones (never a
// deprecated alias); a deprecated alias sets its flag with a warning on
// stderr; the flag and its alias together are refused; all usage errors.
func TestFlagErrors(t *testing.T) {
	newCmd := func() (*cobra.Command, *string) {
		c := &cobra.Command{Use: "x", SilenceUsage: true, SilenceErrors: true, RunE: func(*cobra.Command, []string) error { return nil }}
		v := c.Flags().String("min-updates", "", "")
		c.Flags().String("max-staleness", "", "")
		DeprecatedAlias(c.Flags(), "min-update-count", "min-updates")
		EnforceContract(c)
		return c, v
	}
	cases := []struct {
		args   []string
		code   int
		value  string
		stderr string
	}{
		{[]string{"--min-update", "2"}, ExitUsage, "", "unknown flag: --min-update (did you mean --min-updates?)"},
		{[]string{"--nothing-like-it"}, ExitUsage, "", "unknown flag: --nothing-like-it\n"},
		// a negative argument is shorthand flags to pflag: the error says so
		{[]string{"-1"}, ExitUsage, "", "unknown shorthand flag: '1' in -1 (-1 is read as flags: an argument cannot start with a dash unless it follows --)"},
		{[]string{"-0.5"}, ExitUsage, "", "-0.5 is read as flags"},
		{[]string{"-x"}, ExitUsage, "", "unknown shorthand flag: 'x' in -x\n"},
		{[]string{"--min-update-count", "3"}, ExitOK, "3", "Flag --min-update-count has been deprecated, use --min-updates instead"},
		{[]string{"--min-update-count", "3", "--min-updates", "4"}, ExitUsage, "", "--min-update-count and --min-updates are the same flag"},
	}
	for _, tc := range cases {
		c, v := newCmd()
		var stdout, stderr bytes.Buffer
		code := Execute(context.Background(), c, tc.args, &stdout, &stderr)
		if code != tc.code || (tc.value != "" && *v != tc.value) || !strings.Contains(stderr.String(), tc.stderr) || stdout.Len() > 0 {
			t.Errorf("%q: exit %d, --min-updates %q\nstdout %q\nstderr %q\nwant exit %d, %q, stderr with %q", tc.args, code, *v, stdout.String(), stderr.String(), tc.code, tc.value, tc.stderr)
		}
	}
}

// TestInfoFromBuild: what a plain `go build` records (vcs.*) fills what
// -ldflags did not stamp; stamped values win.
func TestInfoFromBuild(t *testing.T) {
	const rev, when = "824bacbef47bb697e2efb2f1b7b57ba4afddec1f", "2026-12-02T00:38:43Z"
	bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/edgesched/edgesched", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: when}, {Key: "vcs.modified", Value: "true"}}}
	var plain BuildInfo
	fromBuild(&plain, bi)
	if plain.Commit != rev || plain.Date != when || !plain.Modified || plain.Version != "" {
		t.Errorf("plain build: %+v", plain)
	}
	stamped := BuildInfo{Version: "v0.3.0", Commit: "abc", Date: "2027-01-01T00:00:00Z"}
	fromBuild(&stamped, bi)
	if stamped.Commit != "abc" || stamped.Date != "2027-01-01T00:00:00Z" || stamped.Modified || stamped.Version != "v0.3.0" {
		t.Errorf("stamped build: %+v", stamped)
	}
	installed := BuildInfo{}
	fromBuild(&installed, &debug.BuildInfo{Main: debug.Module{Version: "v0.2.1"}})
	if installed.Version != "v0.2.1" {
		t.Errorf("go install module@v0.2.1: version %q", installed.Version)
	}
	line := BuildInfo{Version: "dev", Commit: rev, Date: when, Modified: true, GoVersion: "go1.26.0", Platform: "linux/amd64"}.Line("edgectl")
	if want := "edgectl dev commit " + rev + " (modified) built " + when + " go1.26.0 linux/amd64"; line != want {
		t.Errorf("line %q, want %q", line, want)
	}
}
