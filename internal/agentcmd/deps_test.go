package agentcmd

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/internal/testutil/deplist"
)

// agentPkg is the edge-agent command whose dependencies are guarded.
const agentPkg = "github.com/edgesched/edgesched/cmd/edge-agent"

// forbiddenDeps are packages edge-agent must not link, each with why:
// together they made the stripped binary 79.5 MB (docs/agent.md, "Binary
// size"). A pattern ending in "/" forbids the package and everything
// below it.
var forbiddenDeps = deplist.Rules{
	{Pattern: "k8s.io/client-go/kubernetes", Why: "client-go's clientset: every API group's typed client"},
	{Pattern: "k8s.io/client-go/kubernetes/", Why: "client-go's typed clients import kubernetes/scheme, which registers every API group at init (use internal/kube)"},
	{Pattern: "k8s.io/client-go/informers", Why: "the informer factory: ForResource references every API group"},
	{Pattern: "k8s.io/client-go/informers/", Why: "the informer factory's packages"},
	{Pattern: "k8s.io/client-go/tools/leaderelection", Why: "its resourcelock package imports the whole clientset (agent/site has its own Lease election)"},
	{Pattern: "k8s.io/client-go/tools/leaderelection/", Why: "as above"},
	{Pattern: "k8s.io/client-go/gentype", Why: "imports client-go/testing, and with it server-side apply's OpenAPI machinery"},
	{Pattern: "k8s.io/client-go/testing", Why: "client-go's fakes: managed fields, strategic merge patch, OpenAPI"},
	{Pattern: "k8s.io/client-go/applyconfigurations/", Why: "server-side apply configurations"},
	{Pattern: "k8s.io/kubernetes/", Why: "the kube-scheduler: the agent must not link it (DESIGN.md)"},
	{Pattern: "k8s.io/kube-scheduler/", Why: "the scheduler framework"},
	{Pattern: "gonum.org/v1/plot", Why: "plotting and its embedded fonts (training curves: policy/ppo/curve, edgectl only)"},
	{Pattern: "gonum.org/v1/plot/", Why: "as above"},
	{Pattern: "codeberg.org/go-fonts/", Why: "fonts embedded by gonum.org/v1/plot"},
	{Pattern: "github.com/nats-io/nats-server/", Why: "the embedded NATS server (edgectl demo, tests)"},
	{Pattern: "github.com/edgesched/edgesched/internal/kube/kubeclientset", Why: "the clientset adapter for tests"},
	{Pattern: "github.com/edgesched/edgesched/sim/report", Why: "the simulator's report plots"},
}

// allowedAPIGroups are the only k8s.io/api packages the agent's scheme
// holds (internal/kube).
var allowedAPIGroups = map[string]bool{"k8s.io/api/core/v1": true, "k8s.io/api/coordination/v1": true}

// forbidden reports why pkg must not be linked by any build ("" when it
// may).
func forbidden(pkg string) string {
	if why := forbiddenDeps.Why(pkg); why != "" {
		return why
	}
	return apiGroupWhy(pkg)
}

// apiGroupWhy refuses the k8s.io/api groups outside allowedAPIGroups.
func apiGroupWhy(pkg string) string {
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
// policy/nn/tensor_gonum.go), and it alone pulls Arrow and gogo protobuf.
var releaseForbidden = deplist.Rules{
	{Pattern: "gorgonia.org/", Why: "gorgonia.org/tensor and its vector packages (the nogorgonia build uses gonum's Sgemm directly)"},
	{Pattern: "github.com/apache/arrow/", Why: "Apache Arrow, imported only by gorgonia.org/tensor"},
	{Pattern: "github.com/gogo/protobuf/", Why: "gogo protobuf, imported only by gorgonia.org/tensor"},
}

// TestAgentDependencies lists edge-agent's dependencies with the go
// command and fails on any forbidden one: what keeps the binary small
// (docs/agent.md, "Binary size"). Both builds are checked: the default
// one (go build ./cmd/edge-agent) and the released one (AGENT_TAGS),
// which also leaves out gorgonia.org/tensor.
func TestAgentDependencies(t *testing.T) {
	tags := deplist.MakefileVar(t, "../../Makefile", "AGENT_TAGS")
	if tags == "" {
		t.Fatal("AGENT_TAGS is empty in the Makefile: the released edge-agent would link gorgonia.org/tensor")
	}
	released := append(slices.Clone(forbiddenDeps), releaseForbidden...)
	for _, tc := range []struct {
		name, tags string
		mustHave   []string
		forbidden  func(string) string
	}{
		{"default build", "", []string{"gorgonia.org/tensor"}, forbidden},
		{"released build (-tags " + tags + ")", tags, []string{"gonum.org/v1/gonum/blas/gonum"}, func(p string) string {
			return cmp.Or(released.Why(p), apiGroupWhy(p))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// the list must be real: the agent's own packages are in it
			deplist.Check(t, agentPkg, tc.tags, append([]string{"github.com/edgesched/edgesched/internal/kube", "k8s.io/client-go/tools/cache"}, tc.mustHave...), tc.forbidden)
			deplist.CheckNoTemplates(t, agentPkg, tc.tags)
		})
	}
}
