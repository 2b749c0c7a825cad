package schedcmd

import (
	"testing"

	"github.com/edgesched/edgesched/internal/testutil/deplist"
)

// schedulerPkg is the edge-scheduler command whose dependencies are
// guarded.
const schedulerPkg = "github.com/edgesched/edgesched/cmd/edge-scheduler"

// servingForbidden are packages edge-scheduler must not link in any build:
// it serves signed int8 models, it does not train them (issue 20,
// "serving apart from training"). A pattern ending in "/" forbids the
// package and everything below it.
var servingForbidden = deplist.Rules{
	{Pattern: "github.com/edgesched/edgesched/policy/ppo", Why: "PPO training"},
	{Pattern: "github.com/edgesched/edgesched/policy/ppo/", Why: "PPO training (its curves and plots)"},
	{Pattern: "gonum.org/v1/plot", Why: "plotting and its embedded fonts (training curves)"},
	{Pattern: "gonum.org/v1/plot/", Why: "as above"},
	{Pattern: "github.com/nats-io/nats-server/", Why: "the embedded NATS server (edgectl demo, tests)"},
	{Pattern: "github.com/edgesched/edgesched/coordinator", Why: "the federated coordinator"},
	{Pattern: "github.com/edgesched/edgesched/agent/", Why: "the edge agent (formats both use live in kubefmt and quant)"},
	// quant reads float models as plain data (policy.FloatModel), so
	// neither build links the trainable network or its tensors (about 7 MB
	// of the stripped binary, docs/edge-plugin.md "Binary size")
	{Pattern: "github.com/edgesched/edgesched/policy/nn", Why: "the trainable float network (quant reads float models as policy.FloatModel)"},
	{Pattern: "gorgonia.org/", Why: "gorgonia.org/tensor and its vector packages (policy/nn's tensors)"},
	{Pattern: "github.com/apache/arrow/", Why: "Apache Arrow, imported only by gorgonia.org/tensor"},
	{Pattern: "github.com/gogo/protobuf/", Why: "gogo protobuf, imported only by gorgonia.org/tensor"},
	// edge-scheduler runs kube-scheduler's scheduler without its app
	// (run.go): the app's generic API server machinery was 35 MB of the
	// stripped binary (docs/edge-plugin.md, "Binary size")
	{Pattern: "k8s.io/kubernetes/cmd/kube-scheduler/", Why: "kube-scheduler's app (edge-scheduler runs pkg/scheduler itself)"},
	{Pattern: "k8s.io/apiserver/pkg/server", Why: "the generic API server (kube-scheduler's app serves its endpoints with it)"},
	{Pattern: "k8s.io/apiserver/pkg/server/", Why: "as above"},
	{Pattern: "k8s.io/apiserver/pkg/authentication/request/", Why: "the generic API server's authenticators (run.go asks TokenReviews itself)"},
}

func TestRules(t *testing.T) {
	all := servingForbidden
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
		{"github.com/edgesched/edgesched/policy/nn", true},
	} {
		if got := all.Why(tc.pkg) != ""; got != tc.bans {
			t.Errorf("Why(%q) = %v, want %v", tc.pkg, got, tc.bans)
		}
	}
}

// TestSchedulerDependencies lists edge-scheduler's dependencies with the go
// command and fails on any forbidden one, in the default build (go build
// ./cmd/edge-scheduler) and in the released one (the Makefile's
// SCHEDULER_TAGS): since quant reads float models as plain data, neither
// links policy/nn or gorgonia.
func TestSchedulerDependencies(t *testing.T) {
	tags := deplist.MakefileVar(t, "../../Makefile", "SCHEDULER_TAGS")
	for _, tc := range []struct{ name, tags string }{
		{"default build", ""},
		{"released build (-tags " + tags + ")", tags},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// the list must be real: the scheduler's own packages are in it
			deplist.Check(t, schedulerPkg, tc.tags, []string{"github.com/edgesched/edgesched/edge-plugin", "github.com/edgesched/edgesched/quant", "k8s.io/kubernetes/pkg/scheduler"}, servingForbidden.Why)
		})
	}
}
