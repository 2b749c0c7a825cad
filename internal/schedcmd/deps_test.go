package schedcmd

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// schedulerPkg is the edge-scheduler command whose dependencies are
// guarded.
const schedulerPkg = "github.com/edgesched/edgesched/cmd/edge-scheduler"

// servingForbidden are packages edge-scheduler must not link in any build:
// it serves signed int8 models, it does not train them (issue 20,
// "serving apart from training"). A pattern ending in "/" forbids the
// package and everything below it.
var servingForbidden = []struct{ pattern, why string }{
	{"github.com/edgesched/edgesched/policy/ppo", "PPO training"},
	{"github.com/edgesched/edgesched/policy/ppo/", "PPO training (its curves and plots)"},
	{"gonum.org/v1/plot", "plotting and its embedded fonts (training curves)"},
	{"gonum.org/v1/plot/", "as above"},
	{"github.com/nats-io/nats-server/", "the embedded NATS server (edgectl demo, tests)"},
	{"github.com/edgesched/edgesched/coordinator", "the federated coordinator"},
	{"github.com/edgesched/edgesched/agent/", "the edge agent (formats both use live in kubefmt and quant)"},
}

// releaseForbidden are packages edge-scheduler as released (built with the
// Makefile's SCHEDULER_TAGS) must not link either: gorgonia.org/tensor
// and what only it imports (policy/tensor_gonum.go; about 7 MB of the
// stripped binary, docs/edge-plugin.md "Binary size").
var releaseForbidden = []struct{ pattern, why string }{
	{"gorgonia.org/", "gorgonia.org/tensor and its vector packages (the nogorgonia build uses gonum's Sgemm directly)"},
	{"github.com/apache/arrow/", "Apache Arrow, imported only by gorgonia.org/tensor"},
	{"github.com/gogo/protobuf/", "gogo protobuf, imported only by gorgonia.org/tensor"},
}

func forbiddenBy(list []struct{ pattern, why string }, pkg string) string {
	for _, f := range list {
		if pkg == f.pattern || (strings.HasSuffix(f.pattern, "/") && strings.HasPrefix(pkg, f.pattern)) {
			return f.why
		}
	}
	return ""
}

func TestForbiddenBy(t *testing.T) {
	all := append(slices.Clone(servingForbidden), releaseForbidden...)
	for _, tc := range []struct {
		pkg  string
		bans bool
	}{
		{"github.com/edgesched/edgesched/policy/ppo", true},
		{"github.com/edgesched/edgesched/policy/ppo/curve", true},
		{"github.com/edgesched/edgesched/policy", false},
		{"github.com/edgesched/edgesched/agent/site", true},
		{"github.com/edgesched/edgesched/agentx", false}, // a prefix of the name, not of the path
		{"gorgonia.org/tensor", true},
		{"gonum.org/v1/gonum/blas/gonum", false},
	} {
		if got := forbiddenBy(all, tc.pkg) != ""; got != tc.bans {
			t.Errorf("forbiddenBy(%q) = %v, want %v", tc.pkg, got, tc.bans)
		}
	}
}

// schedulerTags reads SCHEDULER_TAGS, the build tags edge-scheduler is
// released with, from the Makefile (the line "SCHEDULER_TAGS ?= ...").
func schedulerTags(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatalf("read the Makefile for SCHEDULER_TAGS: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "SCHEDULER_TAGS ?= "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("the Makefile has no line \"SCHEDULER_TAGS ?= ...\"")
	return ""
}

// TestSchedulerDependencies lists edge-scheduler's dependencies with the go
// command and fails on any forbidden one. Both builds are checked: the
// default one (go build ./cmd/edge-scheduler, which still links
// gorgonia.org/tensor through the policy package's float network) and the
// released one (SCHEDULER_TAGS), which leaves it out.
func TestSchedulerDependencies(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is not on PATH (%v): cannot list %s's dependencies", err, schedulerPkg)
	}
	tags := schedulerTags(t)
	if tags == "" {
		t.Fatal("SCHEDULER_TAGS is empty in the Makefile: the released edge-scheduler would link gorgonia.org/tensor")
	}
	for _, tc := range []struct {
		name      string
		tags      string
		mustHave  []string
		forbidden []struct{ pattern, why string }
	}{
		{"default build", "", []string{"gorgonia.org/tensor"}, servingForbidden},
		{"released build (-tags " + tags + ")", tags, []string{"gonum.org/v1/gonum/blas/gonum"}, append(slices.Clone(servingForbidden), releaseForbidden...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"list", "-deps"}
			if tc.tags != "" {
				args = append(args, "-tags", tc.tags)
			}
			out, err := exec.Command(goCmd, append(args, schedulerPkg)...).Output()
			if err != nil {
				var stderr string
				if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
					stderr = string(ee.Stderr)
				}
				t.Fatalf("go %s %s: %v\n%s", strings.Join(args, " "), schedulerPkg, err, stderr)
			}
			pkgs := strings.Fields(string(out))
			// the list must be real: the scheduler's own packages are in it
			for _, want := range append([]string{schedulerPkg, "github.com/edgesched/edgesched/edge-plugin", "k8s.io/kubernetes/pkg/scheduler"}, tc.mustHave...) {
				if !slices.Contains(pkgs, want) {
					t.Fatalf("go %s %s lacks %s (%d packages listed)", strings.Join(args, " "), schedulerPkg, want, len(pkgs))
				}
			}
			for _, p := range pkgs {
				if why := forbiddenBy(tc.forbidden, p); why != "" {
					t.Errorf("edge-scheduler links %s: %s", p, why)
				}
			}
			t.Logf("%s: %d packages, none forbidden", schedulerPkg, len(pkgs))
		})
	}
}
