package kubefmt

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/edgesched/edgesched"

// seams are the import rules between the agent, the scheduler plugin and
// this package: for packages under from (a path below the module, the
// package itself included), the prefixes none of their dependencies may
// have, each with why. A prefix ending in "/" forbids everything below
// it; one starting with "=" forbids exactly that package; otherwise it
// forbids the package and everything below it. The scheduler's layers
// (docs/edge-plugin.md, "Layers"): sources (what is watched and trusted)
// below serving (the core: view, scores, devices, policy) below explain,
// below the framework plugin, below the extender.
var seams = []struct {
	from      string
	forbidden []string
	why       string
}{
	{"agent", []string{module + "/edge-plugin"}, "the agent must not link the scheduler plugin (and with it the kube-scheduler): share through kubefmt"},
	{"edge-plugin", []string{module + "/agent"}, "the scheduler plugin must not link the agent: share through kubefmt"},
	{"kubefmt", []string{module + "/agent", module + "/edge-plugin", "k8s.io/kubernetes", "k8s.io/kube-scheduler", "k8s.io/client-go"},
		"kubefmt is what both sides share: it imports the API types and the simulator's model only"},
	{"edge-plugin/sources", []string{"=" + module + "/edge-plugin", module + "/edge-plugin/serving", module + "/edge-plugin/explain", module + "/edge-plugin/extender",
		"k8s.io/kube-scheduler", "k8s.io/kubernetes/pkg/scheduler"},
		"the sources (models, watched ConfigMaps) know nothing of the scheduling framework or of what reads them"},
	{"edge-plugin/serving", []string{"=" + module + "/edge-plugin", module + "/edge-plugin/explain", module + "/edge-plugin/extender"},
		"the serving core is below the plugin, the extender and the explanation"},
	{"edge-plugin/serving", []string{module + "/edge-plugin/apis"},
		"the serving core takes its settings as Options, not as the plugin's args"},
	{"edge-plugin/apis", []string{"=" + module + "/edge-plugin", module + "/edge-plugin/serving", module + "/edge-plugin/sources",
		module + "/edge-plugin/explain", module + "/edge-plugin/extender", "=k8s.io/kubernetes/pkg/scheduler/framework", "k8s.io/kube-scheduler/framework"},
		"the args are configuration data: no scheduling framework, no serving code"},
	{"edge-plugin/explain", []string{"=" + module + "/edge-plugin", module + "/edge-plugin/extender"},
		"the explanation is below the plugin and the extender"},
	{"edge-plugin", []string{module + "/edge-plugin/extender"},
		"the framework plugin does not link the extender (the extender serves the plugin)"},
}

// under reports whether pkg is prefix or below it (pkg is exactly prefix
// for a prefix starting with "=").
func under(pkg, prefix string) bool {
	if exact, ok := strings.CutPrefix(prefix, "="); ok {
		return pkg == exact
	}
	prefix = strings.TrimSuffix(prefix, "/")
	return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
}

// seamViolation reports why pkg must not depend on dep ("" when it may).
func seamViolation(pkg, dep string) string {
	for _, s := range seams {
		if !under(pkg, module+"/"+s.from) {
			continue
		}
		for _, f := range s.forbidden {
			if under(dep, f) {
				return s.why
			}
		}
	}
	return ""
}

func TestSeamViolation(t *testing.T) {
	for _, tc := range []struct {
		pkg, dep string
		bans     bool
	}{
		{module + "/agent", module + "/edge-plugin", true},
		{module + "/agent/trace", module + "/edge-plugin/conventions", true},
		{module + "/agent/trace", module + "/kubefmt", false},
		{module + "/agentx", module + "/edge-plugin", false}, // a prefix of the name, not of the path
		{module + "/edge-plugin", module + "/agent/telemetry", true},
		{module + "/edge-plugin", module + "/agentcmd", false},
		{module + "/edge-plugin", module + "/kubefmt", false},
		{module + "/kubefmt", "k8s.io/kubernetes/pkg/scheduler", true},
		{module + "/kubefmt", "k8s.io/kube-scheduler/framework", true},
		{module + "/kubefmt", "k8s.io/api/core/v1", false},
		{module + "/kubefmt", module + "/sim", false},
		{module + "/internal/edgectl", module + "/edge-plugin", false},
		{module + "/edge-plugin/sources", "k8s.io/kube-scheduler/framework", true},
		{module + "/edge-plugin/sources", "k8s.io/client-go/informers", false},
		{module + "/edge-plugin/serving", module + "/edge-plugin", true},
		{module + "/edge-plugin/serving", module + "/edge-plugin/sources", false},
		{module + "/edge-plugin/serving", module + "/edge-plugin/apis/config/v1", true},
		{module + "/edge-plugin/apis/config/scheme", "k8s.io/kubernetes/pkg/scheduler/framework", true},
		{module + "/edge-plugin/apis/config/scheme", "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme", false},
		{module + "/edge-plugin/serving", module + "/edge-plugin/extender", true},
		{module + "/edge-plugin", module + "/edge-plugin/extender", true},
		{module + "/edge-plugin/extender", module + "/edge-plugin", false},
	} {
		if got := seamViolation(tc.pkg, tc.dep) != ""; got != tc.bans {
			t.Errorf("seamViolation(%q, %q) = %v, want %v", tc.pkg, tc.dep, got, tc.bans)
		}
	}
}

// listedPackage is what go list -json says of a package.
type listedPackage struct {
	ImportPath                string
	Deps                      []string
	TestImports, XTestImports []string
}

// TestSeams lists the agent's, the plugin's and this package's
// dependencies with the go command (go list -deps, as the agent's
// dependency test) and fails on any import across the seams: every
// dependency of every package, and the direct imports of its tests.
func TestSeams(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is not on PATH (%v): cannot list the dependencies", err)
	}
	args := []string{"list", "-json=ImportPath,Deps,TestImports,XTestImports"}
	for _, s := range seams {
		args = append(args, module+"/"+s.from+"/...")
	}
	out, err := exec.Command(goCmd, args...).Output()
	if err != nil {
		var stderr string
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := map[string]int{}
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		for _, s := range seams {
			if under(p.ImportPath, module+"/"+s.from) {
				seen[s.from]++
			}
		}
		for _, dep := range slices.Concat(p.Deps, p.TestImports, p.XTestImports) {
			if why := seamViolation(p.ImportPath, dep); why != "" {
				t.Errorf("%s imports %s: %s", p.ImportPath, dep, why)
			}
		}
	}
	// the list must be real: each side's packages are in it
	for _, s := range seams {
		if seen[s.from] == 0 {
			t.Fatalf("go list listed no package under %s", s.from)
		}
	}
	t.Logf("packages checked: %v", seen)
}
