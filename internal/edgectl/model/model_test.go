package model_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/edgectltest"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant/int8net"
)

func TestModelKeygen(t *testing.T) {
	dir := edgectltest.KeyDir(t, "coord")
	st, err := os.Stat(filepath.Join(dir, "coord.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("private key: %v %v", st, err)
	}
	if _, _, err := run(t, "model", "keygen", "--dir", dir, "--name", "coord"); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("overwriting a key: %v", err)
	}
	if _, _, err := run(t, "model", "keygen", "--dir", dir); err == nil || !strings.Contains(err.Error(), "--name") {
		t.Fatalf("no name: %v", err)
	}
}

func TestModelSignInspectVerify(t *testing.T) {
	keys := edgectltest.KeyDir(t, "coord")
	other := edgectltest.KeyDir(t, "other")
	dir := t.TempDir()
	v1, v2 := filepath.Join(dir, "v1.esa"), filepath.Join(dir, "v2.esa")
	for _, c := range []struct{ out, version string }{{v1, "1"}, {v2, "2"}} {
		out, errOut, err := run(t, "model", "sign", "edge", "--key", filepath.Join(keys, "coord.key"), "--out", c.out, "--version", c.version)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "float32 model") || !strings.Contains(out, "version "+c.version) {
			t.Fatalf("sign output:\n%s", out)
		}
		if errOut != "" {
			t.Fatalf("sign wrote to stderr:\n%s", errOut)
		}
	}
	out, _, err := run(t, "model", "inspect", v2, "--model-keys", keys)
	if err != nil {
		t.Fatal(err)
	}
	// the shipped models carry input bounds, and so does their artifact
	for _, want := range []string{"dtype      float32", "version    2", "signature  verified", "wc1", policy.SchemaID, "bounds     the"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect lacks %q:\n%s", want, out)
		}
	}
	out, _, err = run(t, "model", "inspect", v2)
	if err != nil || !strings.Contains(out, "not verified") {
		t.Fatalf("inspect without keys: %v\n%s", err, out)
	}
	out, _, err = run(t, "model", "inspect", v2, "-o", "json")
	var doc struct {
		Header struct {
			Version uint64 `json:"version"`
			DType   string `json:"dtype"`
		} `json:"header"`
	}
	if err != nil || json.Unmarshal([]byte(out), &doc) != nil || doc.Header.Version != 2 || doc.Header.DType != "float32" {
		t.Fatalf("inspect -o json: %v\n%s", err, out)
	}
	if out, _, err = run(t, "model", "verify", v2, "--model-keys", keys, "--current", v1); err != nil || !strings.Contains(out, "ok: float32") {
		t.Fatalf("verify newer: %v %s", err, out)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"rollback", []string{"model", "verify", v1, "--model-keys", keys, "--current", v2}, "does not increase"},
		{"wrong keyring", []string{"model", "verify", v1, "--model-keys", other}, "unknown signing key"},
		{"no keyring", []string{"model", "verify", v1}, "--model-keys: required"},
		{"tampered", []string{"model", "verify", tamper(t, v1), "--model-keys", keys}, "does not verify"},
		{"sign without key", []string{"model", "sign", "edge", "--out", filepath.Join(dir, "x.esa")}, "--key: required"},
		{"sign unknown model", []string{"model", "sign", "nosuch", "--key", filepath.Join(keys, "coord.key"), "--out", filepath.Join(dir, "x.esa")}, "no such shipped model"},
		{"sign with a public key", []string{"model", "sign", "edge", "--key", filepath.Join(keys, "coord.pub"), "--out", filepath.Join(dir, "x.esa")}, "bad key"},
		{"inspect junk", []string{"model", "inspect", filepath.Join(keys, "coord.pub")}, "magic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// tamper copies an artifact with one payload byte flipped.
func tamper(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-200] ^= 1
	out := filepath.Join(t.TempDir(), "tampered.esa")
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestModelQuantizeThenSimulate(t *testing.T) {
	keys := edgectltest.KeyDir(t, "coord")
	q := filepath.Join(t.TempDir(), "edge-int8.esa")
	out, errOut, err := run(t, "model", "quantize", "edge", "--scenario", "builtin:factory-vision", "--calib-seeds", "1", "--eval-seeds", "2",
		"--key", filepath.Join(keys, "coord.key"), "--out", q, "--version", "3", "--progress", "always")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"int8 model", "version 3", "calibration: percentile:99.99,rounding:adaptive", "size: int8 artifact", "fidelity on held-out seeds [2]", "failure_rate: float"} {
		if !strings.Contains(out, want) {
			t.Errorf("quantize output lacks %q:\n%s", want, out)
		}
	}
	// a bar for the calibration run and one for the fidelity runs, each
	// reaching 100%
	for _, want := range []string{"calibration run 1/1 (seed 1)", "fidelity seed 2 (1/1)", "100% |"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("no progress %q on stderr:\n%s", want, errOut)
		}
	}
	// inspect names the int8 scheme and the kernel this build scores with
	out, _, err = run(t, "model", "inspect", q, "--model-keys", keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dtype      int8", "quant      int8-", "kernel     " + int8net.Kernel() + " "} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect of the int8 artifact lacks %q:\n%s", want, out)
		}
	}
	out, _, err = run(t, "sim", "--scenario", "builtin:factory-vision", "--policies", "learned:edge,learned:"+q, "--model-keys", keys, "--progress", "never")
	if err != nil || !strings.Contains(out, "learned:"+q) {
		t.Fatalf("sim with the int8 artifact: %v\n%s", err, out)
	}
	if _, _, err := run(t, "sim", "--scenario", "builtin:factory-vision", "--policies", "learned:"+q, "--progress", "never"); err == nil || !strings.Contains(err.Error(), "--model-keys") {
		t.Fatalf("sim without keys: %v", err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bad calibration", []string{"--calibration", "mean"}, "--calibration"},
		{"percentile out of range", []string{"--calibration", "percentile:20"}, "percentile"},
		{"bad rounding", []string{"--rounding", "up"}, `--rounding: quant: cannot quantize: rounding "up" (want nearest or adaptive)`},
		{"bad seeds", []string{"--calib-seeds", "x"}, "--calib-seeds"},
		{"no out", []string{"-o", ""}, "--out: required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"model", "quantize", "edge", "--key", filepath.Join(keys, "coord.key"), "--out", filepath.Join(t.TempDir(), "x.esa")}, tc.args...)
			if _, _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestModelDeprecatedNames: --keys (now --model-keys) and the file's -o
// (now --out; -o is the output format everywhere else) still work, each
// with a warning on stderr naming the new flag, and stdout stays data.
func TestModelDeprecatedNames(t *testing.T) {
	keys := edgectltest.KeyDir(t, "coord")
	art := filepath.Join(t.TempDir(), "m.esa")
	out, errOut, err := run(t, "model", "sign", "edge", "--key", filepath.Join(keys, "coord.key"), "-o", art)
	if err != nil || !strings.Contains(errOut, "Flag shorthand -o has been deprecated, use --out instead") || strings.Contains(out, "deprecated") {
		t.Fatalf("sign -o: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	out, errOut, err = run(t, "model", "verify", art, "--keys", keys)
	if err != nil || !strings.Contains(errOut, "Flag --keys has been deprecated, use --model-keys instead") || strings.Contains(out, "deprecated") {
		t.Fatalf("verify --keys: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if _, _, err := run(t, "model", "verify", art, "--keys", keys, "--model-keys", keys); err == nil || !strings.Contains(err.Error(), "--keys and --model-keys are the same flag") {
		t.Fatalf("both names: %v", err)
	}
}

// TestModelInspectDecision: inspect names each shipped model's decision
// rule: edge-loaded's CPU and busy caps, default's band (ordered by FGD less the GPU
// model's pressure and the GPUs a placement strands), none for edge.
func TestModelInspectDecision(t *testing.T) {
	keys := edgectltest.KeyDir(t, "coord")
	dir := t.TempDir()
	for _, tc := range []struct{ model, want string }{
		{"edge-loaded", "decision   CPU cap 0.8 (nodes the pod would bring above 80% of their CPU by requests rank last); busy cap 0.9 (nodes measured at 90% CPU or more rank below the others on their side of the CPU cap)"},
		{"default", "decision   band 6 logits, 8 for whole-GPU pods (FGD less 10 x the GPU model's pressure and 20 x the GPUs it strands orders the candidates within it)"},
		{"edge", "decision   busy cap 0.9 (nodes measured at 90% CPU or more rank last)"},
		{"edge-carbon", ""},
	} {
		path := filepath.Join(dir, tc.model+".esa")
		if _, _, err := run(t, "model", "sign", tc.model, "--key", filepath.Join(keys, "coord.key"), "--out", path, "--version", "1"); err != nil {
			t.Fatal(err)
		}
		out, _, err := run(t, "model", "inspect", path, "--model-keys", keys)
		if err != nil {
			t.Fatal(err)
		}
		if tc.want == "" {
			if strings.Contains(out, "decision ") {
				t.Errorf("%s has no rule, inspect shows one:\n%s", tc.model, out)
			}
			continue
		}
		if !strings.Contains(out, tc.want) {
			t.Errorf("%s: inspect lacks %q:\n%s", tc.model, tc.want, out)
		}
	}
}

// TestModelInspectModelFile: inspect reads artifacts (.esa); given a model
// file (.esm: what train and model import write, the shipped models) it
// says so and names the verbs that make an artifact of it, and the first
// of them does. It said "quant: bad artifact: not an edgesched artifact
// (magic)".
func TestModelInspectModelFile(t *testing.T) {
	keys := edgectltest.KeyDir(t, "coord")
	shipped := filepath.Join("..", "..", "..", "models")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"default.esm", nil},
		{"edge.esm", nil},
		{"edge.esm", []string{"--model-keys", keys}}, // a keyring changes nothing
		{"edge-sage.esm", []string{"-o", "json"}},
	} {
		t.Run(strings.Join(append([]string{tc.name}, tc.args...), " "), func(t *testing.T) {
			path := filepath.Join(shipped, tc.name)
			out, _, err := run(t, append([]string{"model", "inspect", path}, tc.args...)...)
			if err == nil {
				t.Fatalf("inspect of a model file succeeded:\n%s", out)
			}
			for _, want := range []string{path + ": a model file (.esm", "not an artifact (.esa)",
				"'edgectl model sign " + path + " --key KEY --out FILE.esa'", "'edgectl model quantize " + path + " --key KEY --out FILE.esa'"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "magic") || cli.ExitCode(err) != cli.ExitFailure {
				t.Errorf("error %q (exit %d): want a failure (exit 1) that does not blame the magic", err, cli.ExitCode(err))
			}
		})
	}
	// the advice works: sign the model file, then inspect the artifact
	esa := filepath.Join(t.TempDir(), "default.esa")
	if _, _, err := run(t, "model", "sign", filepath.Join(shipped, "default.esm"), "--key", filepath.Join(keys, "coord.key"), "--out", esa); err != nil {
		t.Fatal(err)
	}
	if out, _, err := run(t, "model", "inspect", esa, "--model-keys", keys); err != nil || !strings.Contains(out, "dtype      float32") {
		t.Fatalf("inspect of the signed model file: %v\n%s", err, out)
	}
}

// TestModelFlagErrors: a missing required flag or a value wrong on its
// face is a usage error (exit 2) naming the flag; an --out that cannot be
// written is refused before any work (quantize ran its calibration
// first, then failed renaming DIR.tmp over the directory and left
// DIR.tmp behind); keygen's --name is a file name, not a path (../x
// wrote outside --dir).
func TestModelFlagErrors(t *testing.T) {
	keys := edgectltest.KeyDir(t, "coord")
	key := filepath.Join(keys, "coord.key")
	dir := t.TempDir()
	outDir := filepath.Join(dir, "a-directory")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	esa := filepath.Join(dir, "m.esa")
	for _, tc := range []struct {
		args  []string
		want  string
		usage bool
	}{
		{[]string{"keygen", "--dir", dir}, "--name: required", true},
		{[]string{"keygen", "--dir", filepath.Join(dir, "keys"), "--name", "../evil"}, `--name "../evil": a file name, not a path`, true},
		{[]string{"keygen", "--dir", dir, "--name", "sub/k"}, `--name "sub/k": a file name, not a path`, true},
		{[]string{"verify", esa}, "--model-keys: required", true},
		{[]string{"sign", "edge", "--out", esa}, "--key: required", true},
		{[]string{"sign", "edge", "--key", key}, "--out: required", true},
		{[]string{"sign", "edge", "--key", key, "--out", outDir}, "--out " + outDir + ": is a directory", false},
		{[]string{"sign", "edge", "--key", key, "--out", filepath.Join(dir, "none", "m.esa")}, "directory " + filepath.Join(dir, "none") + " does not exist", false},
		{[]string{"quantize", "edge", "--key", key, "--out", outDir, "--progress", "never"}, "--out " + outDir + ": is a directory", false},
		{[]string{"quantize", "edge", "--key", key, "--out", esa, "--calibration", "percentile:200"}, "--calibration: quant", true},
		{[]string{"quantize", "edge", "--key", key, "--out", esa, "--calibration", "median"}, `--calibration: "median"`, true},
		{[]string{"quantize", "edge", "--key", key, "--out", esa, "--rounding", "up"}, `--rounding: quant: cannot quantize: rounding "up"`, true},
		{[]string{"quantize", "edge", "--key", key, "--out", esa, "--calib-seeds", "x"}, `--calib-seeds: "x" is not a seed`, true},
		{[]string{"quantize", "edge", "--key", key, "--out", esa, "--eval-seeds", "5-1"}, `--eval-seeds: "5-1" is not a range`, true},
		{[]string{"quantize", "edge", "--key", key, "--out", esa, "--max-rows", "0"}, "--max-rows: 0, want >= 1", true},
		{[]string{"quantize", "edge", "--key", key, "--out", esa, "--progress", "sometimes"}, `--progress: "sometimes"`, true},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, errOut, err := run(t, append([]string{"model"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if cli.IsUsage(err) != tc.usage {
				t.Errorf("usage error (exit 2): %v, want %v", cli.IsUsage(err), tc.usage)
			}
			if strings.Contains(errOut, "calibration run") {
				t.Errorf("refused after a calibration run:\n%s", errOut)
			}
		})
	}
	for _, p := range []string{filepath.Join(dir, "evil.key"), esa} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s written by a refused command", p)
		}
	}
	// nor a temporary file (atomicfile's .NAME.tmp*, or NAME.tmp) anywhere
	_ = filepath.WalkDir(filepath.Dir(outDir), func(p string, _ fs.DirEntry, err error) error {
		if err == nil && strings.Contains(filepath.Base(p), ".tmp") {
			t.Errorf("%s written by a refused command", p)
		}
		return nil
	})
}
