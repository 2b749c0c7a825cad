package agentcmd

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// agentPkg is the edge-agent command whose dependencies are guarded.
const agentPkg = "github.com/edgesched/edgesched/cmd/edge-agent"

// forbiddenDeps are packages edge-agent must not link, each with why:
// together they made the stripped binary 79.5 MB (docs/agent.md, "Binary
// size"). A pattern ending in "/" forbids the package and everything
// below it.
var forbiddenDeps = []struct{ pattern, why string }{
	{"k8s.io/client-go/kubernetes", "client-go's clientset: every API group's typed client"},
	{"k8s.io/client-go/kubernetes/", "client-go's typed clients import kubernetes/scheme, which registers every API group at init (use internal/kube)"},
	{"k8s.io/client-go/informers", "the informer factory: ForResource references every API group"},
	{"k8s.io/client-go/informers/", "the informer factory's packages"},
	{"k8s.io/client-go/tools/leaderelection", "its resourcelock package imports the whole clientset (agent/site has its own Lease election)"},
	{"k8s.io/client-go/tools/leaderelection/", "as above"},
	{"k8s.io/client-go/gentype", "imports client-go/testing, and with it server-side apply's OpenAPI machinery"},
	{"k8s.io/client-go/testing", "client-go's fakes: managed fields, strategic merge patch, OpenAPI"},
	{"k8s.io/client-go/applyconfigurations/", "server-side apply configurations"},
	{"k8s.io/kubernetes/", "the kube-scheduler: the agent must not link it (DESIGN.md)"},
	{"k8s.io/kube-scheduler/", "the scheduler framework"},
	{"gonum.org/v1/plot", "plotting and its embedded fonts (training curves: policy/ppo/curve, edgectl only)"},
	{"gonum.org/v1/plot/", "as above"},
	{"codeberg.org/go-fonts/", "fonts embedded by gonum.org/v1/plot"},
	{"github.com/nats-io/nats-server/", "the embedded NATS server (edgectl demo, tests)"},
	{"github.com/edgesched/edgesched/internal/kube/kubeclientset", "the clientset adapter for tests"},
	{"github.com/edgesched/edgesched/sim/report", "the simulator's report plots"},
}

// allowedAPIGroups are the only k8s.io/api packages the agent's scheme
// holds (internal/kube).
var allowedAPIGroups = map[string]bool{"k8s.io/api/core/v1": true, "k8s.io/api/coordination/v1": true}

// forbidden reports why pkg must not be linked by any build ("" when it
// may).
func forbidden(pkg string) string { return forbiddenBy(forbiddenDeps, pkg) }

// forbiddenBy reports why list forbids pkg ("" when it does not).
func forbiddenBy(list []struct{ pattern, why string }, pkg string) string {
	for _, f := range list {
		if pkg == f.pattern || (strings.HasSuffix(f.pattern, "/") && strings.HasPrefix(pkg, f.pattern)) {
			return f.why
		}
	}
	if strings.HasPrefix(pkg, "k8s.io/api/") && !allowedAPIGroups[pkg] {
		return "an API group the agent does not use (its types and generated code would be linked)"
	}
	return ""
}

func TestForbidden(t *testing.T) {
	for _, tc := range []struct {
		pkg  string
		bans bool
	}{
		{"k8s.io/client-go/kubernetes", true},
		{"k8s.io/client-go/kubernetes/scheme", true},
		{"k8s.io/client-go/kubernetes-extra", false}, // a prefix of the name, not of the path
		{"k8s.io/client-go/informers/core/v1", true},
		{"k8s.io/client-go/tools/cache", false},
		{"k8s.io/client-go/rest", false},
		{"gonum.org/v1/plot/vg", true},
		{"gonum.org/v1/gonum/mat", false},
		{"k8s.io/api/core/v1", false},
		{"k8s.io/api/apps/v1", true},
		{"k8s.io/kubernetes/pkg/scheduler", true},
	} {
		if got := forbidden(tc.pkg) != ""; got != tc.bans {
			t.Errorf("forbidden(%q) = %v, want %v", tc.pkg, got, tc.bans)
		}
	}
}

// releaseForbidden are packages edge-agent as released (built with the
// Makefile's AGENT_TAGS) must not link either: gorgonia.org/tensor's
// Dtype embeds reflect.Type, which with protobuf's MethodByName calls
// keeps every exported method of every type in an interface (about 10 MB;
// policy/tensor_gonum.go), and it alone pulls Arrow and gogo protobuf.
var releaseForbidden = []struct{ pattern, why string }{
	{"gorgonia.org/", "gorgonia.org/tensor and its vector packages (the nogorgonia build uses gonum's Sgemm directly)"},
	{"github.com/apache/arrow/", "Apache Arrow, imported only by gorgonia.org/tensor"},
	{"github.com/gogo/protobuf/", "gogo protobuf, imported only by gorgonia.org/tensor"},
}

// agentTags reads AGENT_TAGS, the build tags edge-agent is released with,
// from the Makefile (the line "AGENT_TAGS ?= ...").
func agentTags(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatalf("read the Makefile for AGENT_TAGS: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "AGENT_TAGS ?= "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("the Makefile has no line \"AGENT_TAGS ?= ...\"")
	return ""
}

// TestAgentDependencies lists edge-agent's dependencies with the go
// command and fails on any forbidden one: what keeps the binary small
// (docs/agent.md, "Binary size"). Both builds are checked: the default
// one (go build ./cmd/edge-agent) and the released one (AGENT_TAGS),
// which also leaves out gorgonia.org/tensor.
func TestAgentDependencies(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is not on PATH (%v): cannot list %s's dependencies", err, agentPkg)
	}
	tags := agentTags(t)
	if tags == "" {
		t.Fatal("AGENT_TAGS is empty in the Makefile: the released edge-agent would link gorgonia.org/tensor")
	}
	for _, tc := range []struct {
		name      string
		tags      string
		mustHave  []string
		forbidden []struct{ pattern, why string }
	}{
		{"default build", "", []string{"gorgonia.org/tensor"}, forbiddenDeps},
		{"released build (-tags " + tags + ")", tags, []string{"gonum.org/v1/gonum/blas/gonum"}, append(slices.Clone(forbiddenDeps), releaseForbidden...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"list", "-deps"}
			if tc.tags != "" {
				args = append(args, "-tags", tc.tags)
			}
			out, err := exec.Command(goCmd, append(args, agentPkg)...).Output()
			if err != nil {
				var stderr string
				if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
					stderr = string(ee.Stderr)
				}
				t.Fatalf("go %s %s: %v\n%s", strings.Join(args, " "), agentPkg, err, stderr)
			}
			pkgs := strings.Fields(string(out))
			// the list must be real: the agent's own packages are in it
			for _, want := range append([]string{agentPkg, "github.com/edgesched/edgesched/internal/kube", "k8s.io/client-go/tools/cache"}, tc.mustHave...) {
				if !slices.Contains(pkgs, want) {
					t.Fatalf("go %s %s lacks %s (%d packages listed)", strings.Join(args, " "), agentPkg, want, len(pkgs))
				}
			}
			for _, p := range pkgs {
				if why := forbiddenBy(tc.forbidden, p); why != "" {
					t.Errorf("edge-agent links %s: %s", p, why)
				}
			}
			t.Logf("%s: %d packages, none forbidden", agentPkg, len(pkgs))
		})
	}
}
