package onnx

// The ONNX ecosystem's own tools, installed by the tests from package
// registries this machine reaches, into a cache directory outside the
// repository ($EDGESCHED_TOOLS_CACHE, default the user cache directory's
// edgesched/onnx): ONNX Runtime's Node.js binding from npm, and Debian's
// python3-onnx (the ONNX checker) unpacked with dpkg-deb, so nothing is
// installed into the system. A test that cannot have a tool skips and
// says why.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Pinned versions of the ecosystem's tools.
const (
	ortNodeVersion = "1.30.0" // npm onnxruntime-node: ONNX Runtime 1.30.0 (CPU binaries ship in the package)
	onnxDebPackage = "python3-onnx"
)

func toolsCache() (string, error) {
	if d := os.Getenv("EDGESCHED_TOOLS_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "edgesched", "onnx"), nil
}

// installOnce builds dir with fill (into a temporary sibling renamed into
// place, so concurrent test processes never see half an install) unless
// it exists.
func installOnce(dir string, fill func(tmp string) error) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".install-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := fill(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(dir); statErr == nil {
			return nil // another process installed it first
		}
		return err
	}
	return nil
}

func runCmd(ctx context.Context, dir string, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(out.String(), 2000))
	}
	return out.Bytes(), nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// ortRuntime is ONNX Runtime's Node.js binding, installed.
type ortRuntime struct {
	node   string // the node binary
	module string // the onnxruntime-node package directory
}

var ortInstall = sync.OnceValues(func() (*ortRuntime, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("no node on PATH (Debian's nodejs, or Node.js 20+)")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return nil, fmt.Errorf("no npm on PATH")
	}
	cache, err := toolsCache()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, "onnxruntime-node-"+ortNodeVersion)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	err = installOnce(dir, func(tmp string) error {
		// --ignore-scripts: the install script only fetches CUDA binaries
		// from outside npm; the CPU runtime ships in the package.
		_, err := runCmd(ctx, tmp, nil, npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--no-save",
			"--ignore-scripts", "--loglevel=error", "onnxruntime-node@"+ortNodeVersion)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("npm install onnxruntime-node@%s: %w", ortNodeVersion, err)
	}
	rt := &ortRuntime{node: node, module: filepath.Join(dir, "node_modules", "onnxruntime-node")}
	out, err := runCmd(ctx, "", nil, node, "-e", fmt.Sprintf("console.log(require(%q).env.versions.node)", rt.module))
	if err != nil {
		return nil, fmt.Errorf("onnxruntime-node does not load here: %w", err)
	}
	if v := strings.TrimSpace(string(out)); v != ortNodeVersion {
		return nil, fmt.Errorf("onnxruntime-node reports version %q, want %s", v, ortNodeVersion)
	}
	return rt, nil
})

// needORT returns ONNX Runtime or skips the test, saying why.
func needORT(t *testing.T) *ortRuntime {
	t.Helper()
	rt, err := ortInstall()
	if err != nil {
		t.Skipf("ONNX Runtime unavailable, cross-check skipped: %v", err)
	}
	return rt
}

// ortScript runs one model on rows (float32 little endian, k x F) and
// writes each output's values (float32 little endian) to OUT.NAME.
const ortScript = `'use strict';
const [modPath, modelPath, rowsPath, k, F, outPrefix] = process.argv.slice(2);
const ort = require(modPath);
const fs = require('fs');
(async () => {
  const sess = await ort.InferenceSession.create(modelPath, {executionProviders: ['cpu']});
  const b = fs.readFileSync(rowsPath);
  const rows = new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
  const feeds = {};
  feeds[sess.inputNames[0]] = new ort.Tensor('float32', rows, [Number(k), Number(F)]);
  const res = await sess.run(feeds);
  for (const name of sess.outputNames) {
    const d = res[name].data;
    fs.writeFileSync(outPrefix + '.' + name, Buffer.from(d.buffer, d.byteOffset, d.byteLength));
  }
  console.log(JSON.stringify({ort: ort.env.versions.node, outputs: sess.outputNames}));
})().catch((e) => { console.error(String(e && e.stack || e)); process.exit(1); });
`

// run scores rows with the model file and returns the outputs by name.
func (rt *ortRuntime) run(t *testing.T, model []byte, rows []float32, F int) map[string][]float32 {
	t.Helper()
	dir := t.TempDir()
	for name, b := range map[string][]byte{"run.js": []byte(ortScript), "model.onnx": model, "rows.bin": floatsLE(rows)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k := len(rows) / F
	out, err := runCmd(ctx, dir, nil, rt.node, "run.js", rt.module, "model.onnx", "rows.bin", fmt.Sprint(k), fmt.Sprint(F), filepath.Join(dir, "out"))
	if err != nil {
		t.Fatalf("ONNX Runtime: %v", err)
	}
	t.Logf("ONNX Runtime: %s", strings.TrimSpace(string(out)))
	res := map[string][]float32{}
	matches, _ := filepath.Glob(filepath.Join(dir, "out.*"))
	for _, p := range matches {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = f32le(b[4*i:])
		}
		res[strings.TrimPrefix(filepath.Ext(p), ".")] = v
	}
	return res
}

// onnxChecker is the ONNX project's checker (Python), from Debian.
type onnxChecker struct {
	python  string
	env     []string
	version string
}

var checkerInstall = sync.OnceValues(func() (*onnxChecker, error) {
	python := "/usr/bin/python3" // Debian's, which its python3-onnx is built for
	if _, err := os.Stat(python); err != nil {
		return nil, fmt.Errorf("no Debian python3 at %s", python)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	probe := func(env []string) (string, error) {
		out, err := runCmd(ctx, "", env, python, "-c", "import onnx, onnx.checker; print(onnx.__version__)")
		return strings.TrimSpace(string(out)), err
	}
	if v, err := probe(nil); err == nil {
		return &onnxChecker{python: python, version: v}, nil // installed system-wide
	}
	for _, tool := range []string{"apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("no %s (Debian's python3-onnx is unpacked with them)", tool)
		}
	}
	cache, err := toolsCache()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, onnxDebPackage)
	err = installOnce(dir, func(tmp string) error {
		pkgs, err := debClosure(ctx, onnxDebPackage)
		if err != nil && os.Geteuid() == 0 {
			// a fresh machine has no package lists yet
			if _, uerr := runCmd(ctx, "", nil, "apt-get", "update", "-qq"); uerr == nil {
				pkgs, err = debClosure(ctx, onnxDebPackage)
			}
		}
		if err != nil {
			return err
		}
		debs := filepath.Join(tmp, "debs")
		if err := os.MkdirAll(debs, 0o755); err != nil {
			return err
		}
		if _, err := runCmd(ctx, debs, nil, "apt-get", append([]string{"download", "-qq"}, pkgs...)...); err != nil {
			return err
		}
		files, _ := filepath.Glob(filepath.Join(debs, "*.deb"))
		for _, f := range files {
			if _, err := runCmd(ctx, "", nil, "dpkg-deb", "-x", f, filepath.Join(tmp, "root")); err != nil {
				return err
			}
		}
		return os.RemoveAll(debs)
	})
	if err != nil {
		return nil, fmt.Errorf("unpacking Debian's %s: %w", onnxDebPackage, err)
	}
	root := filepath.Join(dir, "root")
	var libs []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(d.Name(), ".so") && !strings.Contains(p, "dist-packages") {
			if len(libs) == 0 || libs[len(libs)-1] != filepath.Dir(p) {
				libs = append(libs, filepath.Dir(p))
			}
		}
		return nil
	})
	env := []string{
		"PYTHONPATH=" + filepath.Join(root, "usr", "lib", "python3", "dist-packages"),
		"LD_LIBRARY_PATH=" + strings.Join(libs, ":"),
	}
	v, err := probe(env)
	if err != nil {
		return nil, fmt.Errorf("the unpacked onnx does not import: %w", err)
	}
	return &onnxChecker{python: python, env: env, version: v}, nil
})

// debClosure lists the packages apt would install for pkg (those missing
// on this machine).
func debClosure(ctx context.Context, pkg string) ([]string, error) {
	out, err := runCmd(ctx, "", nil, "apt-get", "install", "-s", "--no-install-recommends", pkg)
	if err != nil {
		return nil, err
	}
	var pkgs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "Inst" {
			pkgs = append(pkgs, f[1])
		}
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("apt-get lists nothing to install for %s", pkg)
	}
	return pkgs, nil
}

// needChecker returns the ONNX checker or skips the test, saying why.
func needChecker(t *testing.T) *onnxChecker {
	t.Helper()
	c, err := checkerInstall()
	if err != nil {
		t.Skipf("ONNX checker unavailable, check skipped: %v", err)
	}
	return c
}

const checkerScript = `import sys, onnx, onnx.checker
for p in sys.argv[1:]:
    m = onnx.load(p)
    onnx.checker.check_model(m, full_check=True)
    print("onnx %s checker: %s ok (IR %d, opset %d)" % (onnx.__version__, p.rsplit("/", 1)[-1], m.ir_version, m.opset_import[0].version))
`

// check runs onnx.checker.check_model(full_check=True) on the files.
func (c *onnxChecker) check(t *testing.T, files map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	args := []string{"-c", checkerScript}
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := runCmd(ctx, dir, c.env, c.python, args...)
	if err != nil {
		t.Fatalf("the ONNX checker refuses: %v", err)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}

// TestONNXTools installs the ecosystem's tools and says which are ready
// or why not. `make onnx-tools` (a step of `make test`) runs it alone
// with -v, because `go test` does not print the reason of a skip in a
// passing package: this is where a machine without the tools shows that
// TestONNXRuntime, TestONNXChecker and TestSchemaAgainstONNX skip.
func TestONNXTools(t *testing.T) {
	var missing []string
	if rt, err := ortInstall(); err != nil {
		t.Logf("ONNX Runtime unavailable: TestONNXRuntime skips: %v", err)
		missing = append(missing, "ONNX Runtime")
	} else {
		t.Logf("ONNX Runtime %s ready (%s, %s)", ortNodeVersion, rt.module, rt.node)
	}
	if c, err := checkerInstall(); err != nil {
		t.Logf("ONNX checker unavailable: TestONNXChecker and TestSchemaAgainstONNX skip: %v", err)
		missing = append(missing, "the ONNX checker")
	} else {
		t.Logf("ONNX checker ready (onnx %s, %s)", c.version, c.python)
	}
	if len(missing) > 0 {
		t.Skipf("SKIP: %s unavailable (above)", strings.Join(missing, " and "))
	}
}
