package cli_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/agentcmd"
	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/coordcmd"
	"github.com/edgesched/edgesched/internal/edgectl"
	"github.com/edgesched/edgesched/internal/schedcmd"
)

// binary is one program's command line, run in-process.
type binary struct {
	name string
	main func(ctx context.Context, args []string, stdout, stderr *bytes.Buffer) int
}

var binaries = []binary{
	{"edgectl", func(ctx context.Context, args []string, stdout, stderr *bytes.Buffer) int {
		return edgectl.Execute(ctx, edgectl.Options{}, args, stdout, stderr)
	}},
	{"edge-agent", func(ctx context.Context, args []string, stdout, stderr *bytes.Buffer) int {
		return agentcmd.Main(ctx, args, stdout, stderr)
	}},
	{"edge-coordinator", func(ctx context.Context, args []string, stdout, stderr *bytes.Buffer) int {
		return coordcmd.Main(ctx, args, stdout, stderr)
	}},
	{"edge-scheduler", func(ctx context.Context, args []string, stdout, stderr *bytes.Buffer) int {
		return schedcmd.Main(ctx, args, stdout, stderr)
	}},
}

func byName(name string) binary {
	for _, b := range binaries {
		if b.name == name {
			return b
		}
	}
	panic("no binary " + name)
}

// typo mistypes a command name: its middle letter replaced, one edit
// away, so the name must be suggested.
func typo(name string) string {
	i := len(name) / 2
	r := byte('x')
	if name[i] == r {
		r = 'q'
	}
	return name[:i] + string(r) + name[i+1:]
}

// contractCase is one command line and what the contract says of it.
type contractCase struct {
	bin    string
	args   []string
	code   int
	stdout string // must contain
	stderr string // must contain
}

// edgectlCases walks edgectl's command tree: every group refuses a
// mistyped subcommand with exit 2 and suggests the right one, and prints
// its help with exit 0 when called alone; every command refuses an
// unknown flag with exit 2 and names the close flag.
func edgectlCases(t *testing.T) []contractCase {
	t.Helper()
	var cases []contractCase
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		var subs []*cobra.Command
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() {
				subs = append(subs, s)
			}
		}
		if len(subs) > 0 {
			first := subs[0].Name()
			cases = append(cases,
				contractCase{bin: "edgectl", args: append(append([]string{}, path...), typo(first)), code: cli.ExitUsage,
					stderr: "Did you mean this?\n\t" + first},
				contractCase{bin: "edgectl", args: path, code: cli.ExitOK, stdout: "Available Commands:"},
				// the help verb keeps the contract too
				contractCase{bin: "edgectl", args: append(append([]string{"help"}, path...), typo(first)), code: cli.ExitUsage,
					stderr: "Did you mean this?\n\t" + first})
		}
		// --outputt is one edit from --output, which many commands have;
		// --hepl two from --help, which every command has.
		bad, want := "--hepl", "did you mean --help?"
		if c.Flags().Lookup("output") != nil {
			bad, want = "--outputt", "did you mean --output?"
		}
		cases = append(cases, contractCase{bin: "edgectl", args: append(append([]string{}, path...), bad), code: cli.ExitUsage, stderr: want})
		for _, s := range subs {
			walk(s, append(append([]string{}, path...), s.Name()))
		}
	}
	root := edgectl.NewRootCommand(edgectl.Options{})
	root.InitDefaultHelpFlag()
	for _, c := range root.Commands() {
		c.InitDefaultHelpFlag()
	}
	walk(root, nil)
	if len(cases) < 40 {
		t.Fatalf("only %d cases from edgectl's tree: the walk missed commands", len(cases))
	}
	return cases
}

// TestContract is the CLI contract (docs/cli.md) over every edgectl
// command and every daemon: an unknown subcommand exits 2 with a
// suggestion (also through `edgectl help`), --version and the version
// verb exit 0 with the commit. The output half (-o json parses, -o yaml
// parses to the same document, for every command with -o) is
// internal/edgectl's TestOutputFormats, which needs that package's
// embedded coordinator.
func TestContract(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	cli.Commit, cli.Date = commit, "2030-01-02T03:04:05Z" // as the Makefile's -ldflags stamp them
	defer func() { cli.Commit, cli.Date = "", "" }()
	cases := edgectlCases(t)
	for _, b := range binaries {
		cases = append(cases,
			contractCase{bin: b.name, args: []string{"--version"}, code: cli.ExitOK, stdout: b.name + " dev commit " + commit + " built 2030-01-02T03:04:05Z"},
			contractCase{bin: b.name, args: []string{"version"}, code: cli.ExitOK, stdout: b.name + " dev commit " + commit},
			contractCase{bin: b.name, args: []string{"verison"}, code: cli.ExitUsage, stderr: "Did you mean this?\n\tversion"},
			contractCase{bin: b.name, args: []string{"version", "extra"}, code: cli.ExitUsage, stderr: "extra"},
			// every binary has shell completion (cobra's scripts)
			contractCase{bin: b.name, args: []string{"completion", "bash"}, code: cli.ExitOK, stdout: "bash completion V2 for " + b.name},
			contractCase{bin: b.name, args: []string{"completion", "zsh"}, code: cli.ExitOK, stdout: "#compdef " + b.name},
		)
	}
	cases = append(cases,
		contractCase{bin: "edgectl", args: []string{"scenario", "shwo", "retail-fleet"}, code: cli.ExitUsage, stderr: "Did you mean this?\n\tshow"},
		contractCase{bin: "edgectl", args: []string{"round", "stauts"}, code: cli.ExitUsage, stderr: "\tstatus"},
		contractCase{bin: "edgectl", args: []string{"auth", "site", "craete", "x"}, code: cli.ExitUsage, stderr: "Did you mean this?\n\tcreate"},
		contractCase{bin: "edgectl", args: []string{"sim", "--polices", "fgd"}, code: cli.ExitUsage, stderr: "did you mean --policies?"},
		contractCase{bin: "edgectl", args: []string{"sim", "--policies", "fdg"}, code: cli.ExitUsage, stderr: `unknown value "fdg" (did you mean fgd?); valid values: all, baselines,`},
		contractCase{bin: "edgectl", args: []string{"sim", "--columns", "alloc_cpu,foo"}, code: cli.ExitUsage, stderr: `--columns: unknown value "foo"; valid values: pods_arrived,`},
		contractCase{bin: "edgectl", args: []string{"sim", "-o", "yml"}, code: cli.ExitUsage, stderr: `unknown value "yml" (did you mean yaml?); valid values: table, json, yaml`},
		contractCase{bin: "edgectl", args: []string{"sim", "--seed", "many"}, code: cli.ExitUsage, stderr: `invalid argument "many" for "--seed"`},
		contractCase{bin: "edgectl", args: []string{"version", "--help"}, code: cli.ExitOK, stdout: "Usage:"},
		contractCase{bin: "edgectl", args: []string{"help", "scenraio"}, code: cli.ExitUsage, stderr: "Did you mean this?\n\tscenario"},
		contractCase{bin: "edgectl", args: []string{"help", "scenario", "shwo"}, code: cli.ExitUsage, stderr: "Did you mean this?\n\tshow"},
		contractCase{bin: "edgectl", args: []string{"help", "shwo"}, code: cli.ExitUsage, stderr: `unknown help topic "shwo"`},
		contractCase{bin: "edgectl", args: []string{"help", "sim", "extra"}, code: cli.ExitUsage, stderr: `has no subcommand "extra"`},
		contractCase{bin: "edgectl", args: []string{"help", "scenario", "show"}, code: cli.ExitOK, stdout: "Usage:"},
		contractCase{bin: "edgectl", args: []string{"version", "-o", "json"}, code: cli.ExitOK, stdout: `"commit": "` + commit + `"`},
		contractCase{bin: "edgectl", args: []string{"version", "-o", "yaml"}, code: cli.ExitOK, stdout: "commit: " + commit},
		contractCase{bin: "edgectl", args: []string{"scenario", "list", "-o", "xml"}, code: cli.ExitUsage, stderr: "valid values: table, json, yaml"},
		contractCase{bin: "edge-agent", args: []string{"--no-anotate"}, code: cli.ExitUsage, stderr: "did you mean --no-annotate?"},
		contractCase{bin: "edge-agent", args: []string{"--sample-interval", "often"}, code: cli.ExitUsage, stderr: `invalid argument "often" for "--sample-interval" flag`},
		contractCase{bin: "edge-coordinator", args: []string{"bakup"}, code: cli.ExitUsage, stderr: "Did you mean this?\n\tbackup"},
		contractCase{bin: "edge-coordinator", args: []string{"--rounds", "some"}, code: cli.ExitUsage, stderr: `invalid argument "some" for "--rounds" flag`},
		contractCase{bin: "edge-scheduler", args: []string{"extendr"}, code: cli.ExitUsage, stderr: "Did you mean this?\n\textender"},
		contractCase{bin: "edge-scheduler", args: []string{"extender", "--version"}, code: cli.ExitOK, stdout: "edge-scheduler dev commit " + commit},
		contractCase{bin: "edge-scheduler", args: []string{"extender", "--modle", "m"}, code: cli.ExitUsage, stderr: "did you mean --model?"},
		contractCase{bin: "edge-agent", args: []string{"__complete", "--telemetry"}, code: cli.ExitOK, stdout: "--telemetry-max-age"},
		contractCase{bin: "edge-coordinator", args: []string{"__complete", "check", "--model"}, code: cli.ExitOK, stdout: "--model-keys"},
		contractCase{bin: "edge-scheduler", args: []string{"__complete", "extender", "--model-"}, code: cli.ExitOK, stdout: "--model-keys"},
	)
	for _, tc := range cases {
		t.Run(tc.bin+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := byName(tc.bin).main(t.Context(), tc.args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d, stdout with %q, stderr with %q", code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

// TestPlainBuildVersion builds edge-agent with a plain `go build` (no
// -ldflags) and checks that --version names the checkout's commit, read
// from what Go recorded (vcs.revision). Go records it only in a checkout
// whose .git is a directory (not in a `git worktree`, golang/go#58218)
// and when -buildvcs is not off; the build here asks for it explicitly.
func TestPlainBuildVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips building edge-agent")
	}
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	dir := strings.TrimSpace(string(root))
	if fi, err := os.Stat(filepath.Join(dir, ".git")); err != nil || !fi.IsDir() {
		t.Skipf("%s/.git is not a directory (a git worktree or no checkout): Go records no VCS information there", dir)
	}
	head, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("git rev-parse HEAD: %v (no git here)", err)
	}
	bin := filepath.Join(t.TempDir(), "edge-agent")
	build := exec.Command("go", "build", "-buildvcs=true", "-tags", "nogorgonia", "-o", bin, "./cmd/edge-agent")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("edge-agent --version: %v", err)
	}
	// The version is Go's pseudo-version of the checkout
	// (v0.0.0-TIME-COMMIT12, since Go 1.24), the commit the full hash.
	if want := " commit " + strings.TrimSpace(string(head)); !strings.HasPrefix(string(out), "edge-agent ") || !strings.Contains(string(out), want) {
		t.Fatalf("edge-agent --version: %q, want the line to name %q", out, want)
	}
}
