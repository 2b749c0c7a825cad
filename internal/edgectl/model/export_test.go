package model_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/onnx"
)

func TestModelExport(t *testing.T) {
	dir := t.TempDir()
	for _, critic := range []bool{false, true} {
		path := filepath.Join(dir, "edge.onnx")
		args := []string{"model", "export", "edge", "--format", "onnx", "--out", path}
		if critic {
			args = append(args, "--critic")
		}
		out, _, err := run(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"wrote " + path + ": ONNX IR 8, opset 17", fmt.Sprintf("input    features [N, %d] float32", policy.NumFeatures), "output   score [N, 1]"} {
			if !strings.Contains(out, want) {
				t.Errorf("export output lacks %q:\n%s", want, out)
			}
		}
		if got := strings.Contains(out, "output   value [1, 1]"); got != critic {
			t.Errorf("critic output listed %v, want %v:\n%s", got, critic, out)
		}
		// the file is an ONNX model of the shipped network, with its schema
		mp, err := onnx.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(mp.GetGraph().GetOutput()); n != map[bool]int{false: 1, true: 2}[critic] {
			t.Errorf("%d outputs", n)
		}
		imp, err := onnx.Import(mp, onnx.DefaultImportOptions())
		if err != nil {
			t.Fatal(err)
		}
		want, err := models.Load("edge")
		if err != nil {
			t.Fatal(err)
		}
		if imp.Model.Schema.Hash() != want.Schema.Hash() || imp.Model.Decision != want.Decision || imp.Model.Schema.ID != policy.SchemaID {
			t.Errorf("schema or decision rule not carried: %+v", imp.Model.Decision)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "tflite", "--out", filepath.Join(dir, "x")}, `--format: "tflite"`},
		{[]string{"--format", "onnx"}, "--out: required"},
		{[]string{"--out", filepath.Join(dir, "x.onnx"), "--model-keys", filepath.Join(dir, "none")}, "none"},
	} {
		if _, _, err := run(t, append([]string{"model", "export", "edge"}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	if _, _, err := run(t, "model", "export", "nosuchmodel", "--out", filepath.Join(dir, "x.onnx")); err == nil {
		t.Error("exported a model that does not exist")
	}
	// a missing --out and an unknown --format are usage errors (exit 2);
	// an --out that is a directory is refused by name (it was "rename
	// DIR/.x.tmpN DIR: file exists")
	for _, tc := range []struct {
		args  []string
		want  string
		usage bool
	}{
		{[]string{"--format", "tflite", "--out", filepath.Join(dir, "x")}, `--format: "tflite"`, true},
		{[]string{"--format", "onnx"}, "--out: required", true},
		{[]string{"--out", dir}, "--out " + dir + ": is a directory, want a file path", false},
	} {
		_, _, err := run(t, append([]string{"model", "export", "edge"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || cli.IsUsage(err) != tc.usage {
			t.Errorf("%v: error %v (usage error %v), want %q (usage error %v)", tc.args, err, cli.IsUsage(err), tc.want, tc.usage)
		}
	}
}
