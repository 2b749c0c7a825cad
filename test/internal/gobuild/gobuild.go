package gobuild

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// GoTool returns the go command: from PATH, else from GOROOT.
func GoTool() (string, error) {
	p, err := exec.LookPath("go")
	if err == nil {
		return p, nil
	}
	alt := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, serr := os.Stat(alt); serr != nil {
		return "", fmt.Errorf("gobuild: the go tool is neither on PATH (%v) nor in GOROOT (%v)", err, serr)
	}
	return alt, nil
}

// ModuleRoot walks up from the working directory to the directory of
// go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("gobuild: no go.mod above the working directory")
		}
		dir = parent
	}
}

// ProgramName is the name `go build` gives the program of package pkg:
// its last path element, or the one before a major-version suffix
// (github.com/nats-io/nats-server/v2 builds nats-server).
func ProgramName(pkg string) string {
	pkg = strings.TrimSuffix(pkg, "/")
	base := path.Base(pkg)
	if len(base) > 1 && base[0] == 'v' && strings.Trim(base[1:], "0123456789") == "" && strings.Contains(pkg, "/") {
		return path.Base(path.Dir(pkg))
	}
	return base
}

// Build builds pkgs (import paths, or ./relative to the module root) into
// dir with one `go build` and returns each program's path, in order (see
// ProgramName). It skips t when the go tool is missing and fails it, with
// the compiler's output, when the build fails.
func Build(t testing.TB, dir string, pkgs ...string) []string {
	t.Helper()
	if _, err := GoTool(); err != nil {
		t.Skipf("cannot build %s: %v", strings.Join(pkgs, " "), err)
	}
	began := time.Now()
	paths, err := TryBuild(dir, pkgs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s in %v", strings.Join(pkgs, " "), time.Since(began).Round(time.Millisecond))
	return paths
}

// TryBuild is Build returning the failure (with the compiler's output)
// instead of ending the test.
func TryBuild(dir string, pkgs ...string) ([]string, error) {
	goBin, err := GoTool()
	if err != nil {
		return nil, err
	}
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args := append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)
	cmd := exec.Command(goBin, args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	paths := make([]string, len(pkgs))
	for i, p := range pkgs {
		paths[i] = filepath.Join(dir, ProgramName(p))
		if _, err := os.Stat(paths[i]); err != nil {
			return nil, fmt.Errorf("go build made no %s: %w", paths[i], err)
		}
	}
	return paths, nil
}
