package schedcmd

import (
	"slices"
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
}

// releaseForbidden are packages edge-scheduler as released (built with the
// Makefile's SCHEDULER_TAGS) must not link either: gorgonia.org/tensor
// and what only it imports (policy/nn/tensor_gonum.go; about 7 MB of the
// stripped binary, docs/edge-plugin.md "Binary size").
var releaseForbidden = deplist.Rules{
	{Pattern: "gorgonia.org/", Why: "gorgonia.org/tensor and its vector packages (the nogorgonia build uses gonum's Sgemm directly)"},
	{Pattern: "github.com/apache/arrow/", Why: "Apache Arrow, imported only by gorgonia.org/tensor"},
	{Pattern: "github.com/gogo/protobuf/", Why: "gogo protobuf, imported only by gorgonia.org/tensor"},
}

func TestRules(t *testing.T) {
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
		if got := all.Why(tc.pkg) != ""; got != tc.bans {
			t.Errorf("Why(%q) = %v, want %v", tc.pkg, got, tc.bans)
		}
	}
}

// TestSchedulerDependencies lists edge-scheduler's dependencies with the go
// command and fails on any forbidden one. Both builds are checked: the
// default one (go build ./cmd/edge-scheduler, which still links
// gorgonia.org/tensor through quant's float-model code and policy/nn) and the
// released one (SCHEDULER_TAGS), which leaves it out.
func TestSchedulerDependencies(t *testing.T) {
	tags := deplist.MakefileVar(t, "../../Makefile", "SCHEDULER_TAGS")
	if tags == "" {
		t.Fatal("SCHEDULER_TAGS is empty in the Makefile: the released edge-scheduler would link gorgonia.org/tensor")
	}
	for _, tc := range []struct {
		name, tags string
		mustHave   []string
		forbidden  deplist.Rules
	}{
		{"default build", "", []string{"gorgonia.org/tensor"}, servingForbidden},
		{"released build (-tags " + tags + ")", tags, []string{"gonum.org/v1/gonum/blas/gonum"}, append(slices.Clone(servingForbidden), releaseForbidden...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// the list must be real: the scheduler's own packages are in it
			deplist.Check(t, schedulerPkg, tc.tags, append([]string{"github.com/edgesched/edgesched/edge-plugin", "k8s.io/kubernetes/pkg/scheduler"}, tc.mustHave...), tc.forbidden.Why)
		})
	}
}
