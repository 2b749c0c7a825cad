package deplist

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Rule forbids the import path Pattern, or with a trailing "/" every
// path below it, and says why.
type Rule struct{ Pattern, Why string }

// Rules is a list of rules.
type Rules []Rule

// Why returns why rs forbid pkg ("" when they do not). A pattern ending in
// "/" forbids the paths below it, not the path itself nor a longer name.
func (rs Rules) Why(pkg string) string {
	for _, r := range rs {
		if pkg == r.Pattern || (strings.HasSuffix(r.Pattern, "/") && strings.HasPrefix(pkg, r.Pattern)) {
			return r.Why
		}
	}
	return ""
}

// MakefileVar returns the value of the Makefile line "NAME ?= VALUE" in
// the file makefile (a path from the test's directory).
func MakefileVar(t testing.TB, makefile, name string) string {
	t.Helper()
	b, err := os.ReadFile(makefile)
	if err != nil {
		t.Fatalf("read the Makefile for %s: %v", name, err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, name+" ?= "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("the Makefile has no line \"%s ?= ...\"", name)
	return ""
}

// Check lists pkg's dependencies under tags ("" for none) and fails the
// test for every one forbidden reports a reason for. The list must hold
// every path of mustHave (so that an empty or wrong list cannot pass).
// It skips, saying why, when the go command is not on PATH.
func Check(t *testing.T, pkg, tags string, mustHave []string, forbidden func(pkg string) string) {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is not on PATH (%v): cannot list %s's dependencies", err, pkg)
	}
	args := []string{"list", "-deps"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	out, err := exec.Command(goCmd, append(args, pkg)...).Output()
	if err != nil {
		var stderr string
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go %s %s: %v\n%s", strings.Join(args, " "), pkg, err, stderr)
	}
	pkgs := strings.Fields(string(out))
	for _, want := range append([]string{pkg}, mustHave...) {
		if !slices.Contains(pkgs, want) {
			t.Fatalf("go %s %s lacks %s (%d packages listed)", strings.Join(args, " "), pkg, want, len(pkgs))
		}
	}
	for _, p := range pkgs {
		if why := forbidden(p); why != "" {
			t.Errorf("%s links %s: %s", pkg, p, why)
		}
	}
	t.Logf("%s: %d packages, none forbidden", pkg, len(pkgs))
}

// templateCalls are cobra's setters that execute a text/template.
var templateCalls = []string{".SetVersionTemplate(", ".SetUsageTemplate(", ".SetHelpTemplate("}

// CheckNoTemplates fails the test if a package of this module that pkg
// links (under tags) imports text/template or html/template or calls one
// of cobra's template setters. Executing a template calls
// reflect.Value.MethodByName, which turns off the linker's dead-code
// elimination of methods for the whole binary (edge-agent was 5.4 MB
// larger for one SetVersionTemplate). It skips, saying why, when the go
// command is not on PATH.
func CheckNoTemplates(t *testing.T, pkg, tags string) {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is not on PATH (%v): cannot list %s's dependencies", err, pkg)
	}
	args := []string{"list", "-deps", "-f", `{{.ImportPath}}|{{.Dir}}|{{join .GoFiles " "}} {{join .CgoFiles " "}}|{{join .Imports " "}}`}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	out, err := exec.Command(goCmd, append(args, pkg)...).Output()
	if err != nil {
		t.Fatalf("go %s %s: %v", strings.Join(args, " "), pkg, err)
	}
	const module = "github.com/edgesched/edgesched/"
	scanned := 0
	for line := range strings.Lines(string(out)) {
		f := strings.SplitN(strings.TrimSpace(line), "|", 4)
		if len(f) != 4 || !strings.HasPrefix(f[0], module) {
			continue
		}
		for _, imp := range strings.Fields(f[3]) {
			if imp == "text/template" || imp == "html/template" {
				t.Errorf("%s imports %s: linked into %s, it turns off dead-code elimination", f[0], imp, pkg)
			}
		}
		for _, file := range strings.Fields(f[2]) {
			src, err := os.ReadFile(filepath.Join(f[1], file))
			if err != nil {
				t.Fatal(err)
			}
			for _, call := range templateCalls {
				if strings.Contains(string(src), call) {
					t.Errorf("%s/%s calls cobra's %s...): linked into %s, it executes a text/template and turns off dead-code elimination", f[0], file, call[1:], pkg)
				}
			}
			scanned++
		}
	}
	if scanned == 0 {
		t.Fatalf("no file of this module among %s's dependencies: the listing is not what this check expects", pkg)
	}
}
