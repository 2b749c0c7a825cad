package cmdutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/testutil/filefixture"
	"github.com/edgesched/edgesched/sim/scenario/family"
)

func TestParseSeeds(t *testing.T) {
	tests := []struct {
		in   string
		want []uint64
		err  bool
	}{
		{"7", []uint64{7}, false},
		{"1,3, 5", []uint64{1, 3, 5}, false},
		{"1-3,9", []uint64{1, 2, 3, 9}, false},
		{"18446744073709551615", []uint64{18446744073709551615}, false},
		{"18446744073709551614-18446744073709551615", []uint64{18446744073709551614, 18446744073709551615}, false},
		{"1-1000", nil, false},
		{"1-1001", nil, true},
		{"", nil, true},
		{"-3", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseSeeds(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("parseSeeds(%q) error = %v, want error %v", tt.in, err, tt.err)
			continue
		}
		if err != nil && !cli.IsUsage(err) { // every caller parses a flag
			t.Errorf("parseSeeds(%q) error %v is not a usage error", tt.in, err)
		}
		if tt.want != nil && (len(got) != len(tt.want) || got[0] != tt.want[0] || got[len(got)-1] != tt.want[len(tt.want)-1]) {
			t.Errorf("parseSeeds(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestScenarioName: reports name a family with the calibration version
// that ran; other scenarios keep their documents' names.
func TestScenarioName(t *testing.T) {
	for _, c := range []struct{ ref, name, want string }{
		{"builtin:retail-stores", "retail-stores", fmt.Sprintf("retail-stores@v%d", family.Latest)},
		{"builtin:retail-stores@v1", "retail-stores", "retail-stores@v1"},
		{"builtin:retail-fleet", "retail-fleet", "retail-fleet"},
		{"my-fleet.yaml", "mine", "mine"},
		{"retail-stores", "from-a-file", "from-a-file"}, // a file named like a family
	} {
		if got := scenarioName(c.ref, c.name); got != c.want {
			t.Errorf("scenarioName(%q, %q) = %q, want %q", c.ref, c.name, got, c.want)
		}
	}
}

// TestFlagChecks: the checks the verbs share name the flag and the
// problem; a bad --progress or --parallel value is a usage error.
func TestFlagChecks(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filefixture.Sparse(t, dir, "big", MaxKubeconfigBytes+1)
	fifo := filefixture.FIFO(t, dir, "fifo")
	_, progressErr := WantProgress("sometimes", io.Discard)
	for _, tc := range []struct {
		name  string
		err   error
		want  string // "" for no error
		usage bool
	}{
		{"progress", progressErr, `--progress: "sometimes" (want auto, always or never)`, true},
		{"parallel 0", CheckParallel(0), "", false},
		{"parallel -1", CheckParallel(-1), "--parallel: -1, want 0 (the number of CPUs) or more", true},
		{"out a new file", CheckOutFile("--out", filepath.Join(dir, "new")), "", false},
		{"out a directory", CheckOutFile("--out", dir), "--out " + dir + ": is a directory", false},
		{"out in a missing directory", CheckOutFile("--out", filepath.Join(dir, "none", "x")), "directory " + filepath.Join(dir, "none") + " does not exist", false},
		{"out under a file", CheckOutFile("--out", filepath.Join(file, "x")), file + " is not a directory", false},
		{"out dir new", CheckOutDir("--out", filepath.Join(dir, "new")), "", false},
		{"out dir exists", CheckOutDir("--out", dir), "", false},
		{"out dir a file", CheckOutDir("--out", file), "--out " + file + ": exists and is not a directory", false},
		{"out dir under a file", CheckOutDir("--out", filepath.Join(file, "x")), "not a directory", false},
		{"kubeconfig missing", CheckKubeconfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: filepath.Join(dir, "none")}), "", false},
		{"kubeconfig over the cap", CheckKubeconfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: big}), "kubeconfig: " + big + ": input exceeds its size limit", false},
		{"kubeconfig list", CheckKubeconfig(&clientcmd.ClientConfigLoadingRules{Precedence: []string{file, dir}}), "kubeconfig: " + dir + ": not a regular file (a directory)", false},
		// client-go reads these, as before: a process substitution, and
		// /dev/null for the in-cluster config
		{"kubeconfig a pipe", CheckKubeconfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: fifo}), "", false},
		{"kubeconfig /dev/null", CheckKubeconfig(&clientcmd.ClientConfigLoadingRules{Precedence: []string{os.DevNull}}), "", false},
	} {
		switch {
		case tc.want == "" && tc.err != nil:
			t.Errorf("%s: %v", tc.name, tc.err)
		case tc.want != "" && (tc.err == nil || !strings.Contains(tc.err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, tc.err, tc.want)
		case cli.IsUsage(tc.err) != tc.usage:
			t.Errorf("%s: usage error %v, want %v", tc.name, cli.IsUsage(tc.err), tc.usage)
		}
	}
	if !errors.Is(CheckOutFile("--out", dir), ErrOutIsDir) {
		t.Error("a directory --out is not ErrOutIsDir")
	}
}
