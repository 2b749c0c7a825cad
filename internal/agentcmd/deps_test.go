package agentcmd

import (
	"errors"
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

// forbidden reports why pkg must not be linked ("" when it may).
func forbidden(pkg string) string {
	for _, f := range forbiddenDeps {
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

// TestAgentDependencies lists edge-agent's dependencies with the go
// command and fails on any forbidden one: what keeps the binary small
// (docs/agent.md, "Binary size").
func TestAgentDependencies(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is not on PATH (%v): cannot list %s's dependencies", err, agentPkg)
	}
	out, err := exec.Command(goCmd, "list", "-deps", agentPkg).Output()
	if err != nil {
		var stderr string
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", agentPkg, err, stderr)
	}
	pkgs := strings.Fields(string(out))
	// the list must be real: the agent's own packages are in it
	for _, want := range []string{agentPkg, "github.com/edgesched/edgesched/internal/kube", "k8s.io/client-go/tools/cache", "gorgonia.org/tensor"} {
		if !slices.Contains(pkgs, want) {
			t.Fatalf("go list -deps %s lacks %s (%d packages listed)", agentPkg, want, len(pkgs))
		}
	}
	for _, p := range pkgs {
		if why := forbidden(p); why != "" {
			t.Errorf("edge-agent links %s: %s", p, why)
		}
	}
	t.Logf("%s: %d packages, none forbidden", agentPkg, len(pkgs))
}
