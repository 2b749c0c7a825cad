package family_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
	"github.com/edgesched/edgesched/sim/scenario"
	"github.com/edgesched/edgesched/sim/scenario/family"
)

// k8sFigures runs the kube-scheduler default scoring on a family's seed
// and returns its CPU use, scheduling failures and cross-zone traffic.
func k8sFigures(t testing.TB, name string, seed uint64) map[string]float64 {
	t.Helper()
	l, err := scenario.LoadWith("builtin:"+name, scenario.Options{Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	env, err := sim.NewEnv(l.Cluster, l.Workload, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := baseline.Lookup(baseline.K8sDefault)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(context.Background(), env, pol, sim.DefaultRunConfig(sim.Replay))
	if err != nil {
		t.Fatal(err)
	}
	return res.Measures
}

// TestCalibration: on each family, for two selection seeds, the
// kube-scheduler default scoring sees the bands the families are built
// for (family.Bands). EDGESCHED_CALIBRATE_SEEDS=1-10 widens the check and
// logs every figure (the table in docs/scenario.md).
func TestCalibration(t *testing.T) {
	if testing.Short() {
		t.Skip("calibration runs every family: skipped with -short")
	}
	seeds := []uint64{1, 2}
	if s := os.Getenv("EDGESCHED_CALIBRATE_SEEDS"); s != "" {
		lo, hi, _ := strings.Cut(s, "-")
		a, _ := strconv.ParseUint(lo, 10, 64)
		b, _ := strconv.ParseUint(hi, 10, 64)
		seeds = nil
		for x := a; x <= b; x++ {
			seeds = append(seeds, x)
		}
	}
	for _, name := range family.Names() {
		for _, seed := range seeds {
			m := k8sFigures(t, name, seed)
			line := fmt.Sprintf("%s seed %d: cpu used %.1f%% (alloc %.1f%%), failures %.2f%% (%v of %v), cross-zone %.1f%%, lat p95 %.1f ms, evicted %v",
				name, seed, 100*m["util_used_cpu_mean"], 100*m["util_alloc_cpu_mean"], 100*m["failure_rate"], m["pods_failed"], m["pods_arrived"], 100*m["cross_zone_traffic"], m["latency_p95_ms"], m["pods_evicted"])
			t.Log(line)
			for _, b := range family.Bands() {
				if v := m[b.Measure]; !(v >= b.Lo && v <= b.Hi) {
					t.Errorf("%s: %s %.4f outside [%.2f, %.2f]", line, b.Measure, v, b.Lo, b.Hi)
				}
			}
		}
	}
}
