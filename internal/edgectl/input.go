package edgectl

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
	"github.com/edgesched/edgesched/sim/openb"
	"github.com/edgesched/edgesched/sim/scenario"
)

// Defaults for the openb inputs.
const (
	defaultNodes = "openb:" + openb.AllNodes
	defaultPods  = "openb:" + openb.Default
)

// input is a compiled cluster and workload with a display name.
type input struct {
	name string
	env  *sim.Env
	// scenarioSeed is the generator seed of a scenario (0 for openb).
	scenarioSeed uint64
	// timed reports whether replay is possible.
	timed        bool
	fromScenario bool
}

// loadInput reads either a scenario or an openb node and pod list.
func loadInput(nodes, pods, scen string) (*input, error) {
	if scen != "" {
		if nodes != "" || pods != "" {
			return nil, fmt.Errorf("give --scenario or --nodes/--pods, not both")
		}
		l, err := scenario.Load(scen)
		if err != nil {
			return nil, err
		}
		env, err := sim.NewEnv(l.Cluster, l.Workload, sim.EnvOptions{})
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", scen, err)
		}
		return &input{name: l.Name, env: env, scenarioSeed: l.Seed, timed: env.HasTimes, fromScenario: true}, nil
	}
	if nodes == "" {
		nodes = defaultNodes
	}
	if pods == "" {
		pods = defaultPods
	}
	ns, err := openb.LoadNodes(nodes, nil)
	if err != nil {
		return nil, err
	}
	pl, err := openb.LoadPods(pods, nil)
	if err != nil {
		return nil, err
	}
	name := shortRef(nodes) + " + " + shortRef(pods)
	env, err := sim.NewEnv(&sim.Cluster{Name: shortRef(nodes), Nodes: ns}, &sim.Workload{Name: shortRef(pods), Pods: pl.Pods, Untimed: !pl.Timed}, sim.EnvOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &input{name: name, env: env, timed: pl.Timed}, nil
}

func shortRef(ref string) string {
	if i := strings.LastIndexAny(ref, "/\\"); i >= 0 {
		ref = ref[i+1:]
	}
	return strings.TrimSuffix(ref, ".csv")
}

// resolvePolicies turns a comma-separated list into factories; "all" (or
// an empty list) means every baseline.
func resolvePolicies(list string) ([]sim.Factory, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "all" || list == "baselines" {
		return baseline.All(), nil
	}
	var out []sim.Factory
	seen := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		f, err := baseline.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("--policies: %w", err)
		}
		if seen[f.Name] {
			continue
		}
		seen[f.Name] = true
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--policies: no policy named")
	}
	return out, nil
}

// parseSeeds reads "7", "1,2,3" or "1-5" (at most 1000 seeds).
func parseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(strings.TrimSpace(lo), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seeds: %q is not a seed (want N, N,M or N-M)", part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(strings.TrimSpace(hi), 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("--seeds: %q is not a range (want N-M with N <= M)", part)
			}
		}
		if b-a >= 1000 || len(out)+int(b-a+1) > 1000 {
			return nil, fmt.Errorf("--seeds: at most 1000 seeds")
		}
		for i := uint64(0); i <= b-a; i++ { // by count: a+i cannot wrap
			out = append(out, a+i)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--seeds: empty")
	}
	return out, nil
}
