//go:build unix

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Packages of the programs the harness runs, at the versions go.mod pins.
const (
	KinePkg      = "github.com/k3s-io/kine"
	APIServerPkg = "k8s.io/kubernetes/cmd/kube-apiserver"
	SchedulerPkg = "k8s.io/kubernetes/cmd/kube-scheduler"
)

// BinDirEnv names a directory of prebuilt binaries that replaces building.
const BinDirEnv = "EDGESCHED_E2E_BIN_DIR"

// module describes the Go module the tests run in.
type module struct {
	root     string // directory of go.mod
	path     string // module path
	goBin    string // the go command
	cacheDir string // binaries of external packages, keyed by go.sum
	localDir string // binaries of this module's packages (always rebuilt)
}

var (
	modOnce sync.Once
	modInfo *module
	modErr  error // a reason to skip

	buildMu sync.Mutex            // serialises builds within this test binary
	built   = map[string]string{} // package -> binary path, this run
)

// findModule locates the go tool and the module root, and computes the
// cache key. An error means the tests cannot build anything: they skip.
func findModule() (*module, error) {
	modOnce.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
				goBin = p
			} else {
				modErr = fmt.Errorf("the go tool is not on PATH (%v); it is needed to build kine and kube-apiserver", err)
				return
			}
		}
		out, err := exec.Command(goBin, "env", "GOMOD", "GOVERSION", "GOOS", "GOARCH").Output()
		if err != nil {
			modErr = fmt.Errorf("go env: %v", err)
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 4 || lines[0] == "" || lines[0] == os.DevNull {
			modErr = fmt.Errorf("not inside a Go module (go env GOMOD = %q)", lines[0])
			return
		}
		m := &module{root: filepath.Dir(lines[0]), goBin: goBin}
		if m.path, err = modulePath(lines[0]); err != nil {
			modErr = err
			return
		}
		h := sha256.New()
		sum, err := os.ReadFile(filepath.Join(m.root, "go.sum"))
		if err != nil {
			modErr = fmt.Errorf("read go.sum: %v", err)
			return
		}
		h.Write(sum)
		fmt.Fprintf(h, "\x00%s\x00%s\x00%s", lines[1], lines[2], lines[3])
		key := hex.EncodeToString(h.Sum(nil))[:16]
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		m.cacheDir = filepath.Join(base, "edgesched-e2e", key)
		m.localDir = filepath.Join(base, "edgesched-e2e", "local")
		pruneCache(filepath.Dir(m.cacheDir), key)
		modInfo = m
	})
	return modInfo, modErr
}

// cacheUnused is how long a cache directory of another go.sum is kept
// after its last use.
const cacheUnused = 7 * 24 * time.Hour

// pruneCache marks the directory of key as used and removes the
// directories of other keys not used for cacheUnused: each holds a few
// hundred MB of binaries.
func pruneCache(base, key string) {
	now := time.Now()
	os.Chtimes(filepath.Join(base, key), now, now) // may not exist yet
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == key || e.Name() == "local" || len(e.Name()) != len(key) {
			continue
		}
		if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) > cacheUnused {
			os.RemoveAll(filepath.Join(base, e.Name()))
		}
	}
}

func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(p), `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// skipIfUnavailable skips t when programs cannot be built here.
func skipIfUnavailable(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: skipped under -short (builds and runs kine, kube-apiserver and a scheduler)")
	}
	if d := os.Getenv(BinDirEnv); d != "" {
		return
	}
	if _, err := findModule(); err != nil {
		t.Skipf("e2e: cannot build the control plane: %v", err)
	}
}

// Build returns the paths of the programs built from pkgs (package
// paths, e.g. KinePkg), in the same order, building whatever is missing
// with one `go build` run from the module root per set of release tags
// (releaseTags). Packages from other modules are cached across runs (see the package doc); this module's own
// packages are rebuilt once per test binary, which the Go build cache
// keeps fast. It skips t if the go tool is missing and fails it if the
// build fails, with the compiler's output.
func Build(t testing.TB, pkgs ...string) []string {
	t.Helper()
	skipIfUnavailable(t)
	paths, err := build(t, pkgs)
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	return paths
}

func build(t testing.TB, pkgs []string) ([]string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()

	if d := os.Getenv(BinDirEnv); d != "" {
		paths := make([]string, len(pkgs))
		for i, p := range pkgs {
			paths[i] = filepath.Join(d, path.Base(p))
			if !fileExists(paths[i]) {
				return nil, fmt.Errorf("%s=%s has no %s", BinDirEnv, d, path.Base(p))
			}
		}
		return paths, nil
	}
	m, err := findModule()
	if err != nil {
		return nil, err
	}
	// Group the missing packages by destination directory.
	var external, local []string
	for _, p := range pkgs {
		if _, ok := built[p]; ok {
			continue
		}
		if p == m.path || strings.HasPrefix(p, m.path+"/") {
			local = append(local, p)
			continue
		}
		if bin := filepath.Join(m.cacheDir, path.Base(p)); fileExists(bin) {
			t.Logf("e2e: using cached %s", bin)
			built[p] = bin
			continue
		}
		external = append(external, p)
	}
	for _, group := range []struct {
		dir  string
		pkgs []string
	}{{m.cacheDir, external}, {m.localDir, local}} {
		if len(group.pkgs) == 0 {
			continue
		}
		if err := m.goBuild(t, group.dir, group.pkgs); err != nil {
			return nil, err
		}
		for _, p := range group.pkgs {
			built[p] = filepath.Join(group.dir, path.Base(p))
		}
	}
	paths := make([]string, len(pkgs))
	for i, p := range pkgs {
		paths[i] = built[p]
	}
	return paths, nil
}

// goBuild builds pkgs into dir. It holds an exclusive lock on the directory so
// concurrent test binaries do not build the same thing twice, builds into
// a scratch directory and renames the results into place, so a binary in
// dir is always complete.
func (m *module) goBuild(t testing.TB, dir string, pkgs []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	// Another process may have built them while we waited for the lock.
	if dir == m.cacheDir {
		missing := pkgs[:0:0]
		for _, p := range pkgs {
			if !fileExists(filepath.Join(dir, path.Base(p))) {
				missing = append(missing, p)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		pkgs = missing
	}

	scratch, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)

	// Leave a minute of the test's deadline to report what happened.
	ctx := context.Background()
	if dl, ok := deadline(t); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-time.Minute))
		defer cancel()
	}
	start := time.Now()
	// one go build per set of release tags (most programs have none)
	byTags := map[string][]string{}
	var tagSets []string
	for _, p := range pkgs {
		tags, err := m.releaseTags(p)
		if err != nil {
			return err
		}
		if _, ok := byTags[tags]; !ok {
			tagSets = append(tagSets, tags)
		}
		byTags[tags] = append(byTags[tags], p)
	}
	for _, tags := range tagSets {
		group := byTags[tags]
		args := []string{"build", "-o", scratch + string(filepath.Separator)}
		if tags != "" {
			args = append(args, "-tags", tags)
		}
		args = append(args, group...)
		t.Logf("e2e: building %s into %s (the first build of kube-apiserver/kube-scheduler takes several minutes)", strings.Join(args[3:], " "), dir)
		if err := m.runGo(ctx, t, args, start); err != nil {
			return fmt.Errorf("go build %s: %w", strings.Join(group, " "), err)
		}
	}
	for _, p := range pkgs {
		name := path.Base(p)
		if err := os.Rename(filepath.Join(scratch, name), filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("install %s: %w", name, err)
		}
	}
	t.Logf("e2e: built %s in %s", strings.Join(pkgs, " "), time.Since(start).Round(time.Second))
	return nil
}

// runGo runs the go command with args in the module root, logging
// progress every 30 seconds; the error carries the command's output.
func (m *module) runGo(ctx context.Context, t testing.TB, args []string, start time.Time) error {
	cmd := exec.CommandContext(ctx, m.goBin, args...)
	cmd.Dir = m.root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	var err error
	for {
		select {
		case <-tick.C:
			t.Logf("e2e: still building (%s elapsed)", time.Since(start).Round(time.Second))
			continue
		case err = <-done:
		}
		break
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("stopped near the test deadline after %s; run again with a longer -timeout (the first build takes minutes):\n%s",
				time.Since(start).Round(time.Second), out.String())
		}
		return fmt.Errorf("%v\n%s", err, out.String())
	}
	return nil
}

// releaseTagVars are the Makefile variables holding the build tags of the
// programs released with some (policy/tensor_gonum.go says why).
var releaseTagVars = map[string]string{
	"github.com/edgesched/edgesched/cmd/edge-agent":     "AGENT_TAGS",
	"github.com/edgesched/edgesched/cmd/edge-scheduler": "SCHEDULER_TAGS",
}

// releaseTags returns the build tags pkg is released with, so the tests
// run what users get: edge-agent and edge-scheduler are built with the
// Makefile's AGENT_TAGS and SCHEDULER_TAGS, read from their lines
// "NAME ?= ..."; other programs with none.
func (m *module) releaseTags(pkg string) (string, error) {
	name, ok := releaseTagVars[pkg]
	if !ok {
		return "", nil
	}
	b, err := os.ReadFile(filepath.Join(m.root, "Makefile"))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, name+" ?= "); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("the Makefile has no line \"%s ?= ...\"", name)
}

// deadline is t.Deadline when t is a *testing.T.
func deadline(t testing.TB) (time.Time, bool) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}
