package family_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/scenario"
	"github.com/edgesched/edgesched/sim/scenario/apps"
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
	res, err := engine.Run(context.Background(), env, pol, engine.DefaultRunConfig(engine.Replay))
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

// TestFamiliesGenerate: a family is a function of its seed; another seed
// draws another fleet; every fleet has several sites, each with a core
// and an edge zone, arm64 and amd64 nodes, GPUs, flapping uplinks and
// failure rates; training families draw no held-out app or grid, and
// rail-stations no app seen in training.
func TestFamiliesGenerate(t *testing.T) {
	heldGrids := map[string]bool{"NYIS": true, "PJM": true, "AZPS": true}
	for _, name := range family.Names() {
		info, err := family.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := family.Generate(name, 7)
		b, _ := family.Generate(name, 7)
		c, _ := family.Generate(name, 8)
		if string(a) != string(b) || string(a) == string(c) {
			t.Errorf("%s: not a function of the seed", name)
		}
		for _, g := range info.Grids {
			if heldGrids[g] != (info.Role == family.HeldOut) {
				t.Errorf("%s (%s) draws grid %s", name, info.Role, g)
			}
		}
		for _, app := range info.Apps {
			if info.Role == family.Training && apps.HeldOut(app) {
				t.Errorf("training family %s draws held-out app %s", name, app)
			}
			if name == "rail-stations" && !apps.HeldOut(app) {
				t.Errorf("rail-stations draws %s, seen in training", app)
			}
		}
		for _, seed := range []uint64{3} { // seeds 1 and 2 load in TestCalibration
			l, err := scenario.LoadWith("builtin:"+name, scenario.Options{Seed: &seed})
			if err != nil {
				t.Fatal(err)
			}
			if l.Seed != seed || !l.Generated {
				t.Errorf("%s seed %d: loaded seed %d, generated %v", name, seed, l.Seed, l.Generated)
			}
			c := l.Cluster
			arch := map[sim.Arch]int{}
			sites := map[string]bool{}
			var gpus, failing int
			for _, n := range c.Nodes {
				arch[n.Arch]++
				sites[n.Labels["edgesched.io/site"]] = true
				gpus += n.GPUs
				if n.FailureRate > 0 {
					failing++
				}
			}
			var flapping int
			for _, z := range c.Zones {
				if z.Uplink.FlapsPerDay > 0 && z.Uplink.LossRate > 0 {
					flapping++
				}
			}
			if len(sites) < 2 || len(c.Zones) != 2*len(sites) || flapping != len(sites) || arch[sim.ArchARM64] == 0 || arch[sim.ArchAMD64] == 0 ||
				gpus == 0 || failing != len(c.Nodes) || !c.Disruptions.NodeFailures || len(c.LoadProfiles) == 0 {
				t.Errorf("%s seed %d: %d sites, %d zones (%d flapping), arch %v, %d gpus, %d failing nodes", name, seed, len(sites), len(c.Zones), flapping, arch, gpus, failing)
			}
			for _, cz := range c.CarbonZones {
				if len(cz.Curve) < 48 {
					t.Errorf("%s: carbon zone %s has %d hours", name, cz.Name, len(cz.Curve))
				}
			}
		}
	}
	if _, err := family.Generate("nosuch", 1); !errors.Is(err, family.ErrUnknown) {
		t.Errorf("unknown family: %v", err)
	}
}

// TestVersions: NAME@v1 is the first calibration byte for byte (the
// hashes are of the generator's output before versions existed, commit
// 37f839f, so models trained on it are reproduced); a bare NAME is the
// latest version; version 2 keeps the fleet and the apps' requests (the
// same node pools, the apps' pods asking the same CPU) and changes their
// use and the jobs' arrivals; a version that does not exist, or is
// spelled otherwise than vN, is refused.
func TestVersions(t *testing.T) {
	v1 := map[string]string{ // sha256 of `edgectl scenario show builtin:NAME --seed 1` at 37f839f
		"factory-lines": "e7d4d3beab49ff07464035e587e436ce33716e6e2950d27f00e07e8a0d74c0a5",
		"media-campus":  "e9515b097c5e729437965a54dd123a9d11981aabdf99400e7c7f176cb89d9058",
		"rail-stations": "41d5685b73667009d0d00199d3ad4ebf5041c2e9a3b212a9b7f1e18a6769da2d",
		"retail-stores": "d05a2bb929fb7a9bdeff99e8a39fb133e1ea19648ea93bade7e7d1de025b649b",
		"telco-pops":    "09e6a24adfb812d003714d16584688b2cde94051bf27e689220d8b5276b188f0",
	}
	if len(v1) != len(family.Names()) {
		t.Fatalf("hashes for %d families, have %d", len(v1), len(family.Names()))
	}
	for _, name := range family.Names() {
		old, err := family.Generate(name+"@v1", 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(old)); got != v1[name] {
			t.Errorf("%s@v1 seed 1: sha256 %s, want %s (version 1 must not change)", name, got, v1[name])
		}
		latest, _ := family.Generate(name, 1)
		v2, _ := family.Generate(fmt.Sprintf("%s@v%d", name, family.Latest), 1)
		if !bytes.Equal(latest, v2) || bytes.Equal(latest, old) {
			t.Errorf("%s: the bare name is not version %d alone", name, family.Latest)
		}
		info, err := family.Lookup(name + "@v1")
		if err != nil || info.Version != 1 || len(info.Bands) != 3 {
			t.Errorf("Lookup(%s@v1) = version %d, %d bands, %v", name, info.Version, len(info.Bands), err)
		}
		info, err = family.Lookup(name)
		if err != nil || info.Version != family.Latest || len(info.Bands) != 4 || info.Bands[3].Measure != "latency_capped_share" {
			t.Errorf("Lookup(%s) = version %d, bands %v, %v", name, info.Version, info.Bands, err)
		}
		// Same fleet and apps: the node pools and the apps' CPU requests are
		// drawn alike in both versions (the jobs' arrivals may differ).
		a := shapes(t, name+"@v1")
		b := shapes(t, name)
		if a.nodes != b.nodes || a.appCPU != b.appCPU {
			t.Errorf("%s: v1 %d nodes, apps request %d milli-CPU; latest %d, %d", name, a.nodes, a.appCPU, b.nodes, b.appCPU)
		}
	}
	for _, bad := range []string{"retail-stores@v0", "retail-stores@v3", "retail-stores@2", "retail-stores@vx", "retail-stores@", "retail-stores@v01", "retail-stores@v+1", "retail-stores@V1", "retail-stores@v1@v2", "nosuch@v1"} {
		if _, err := family.Generate(bad, 1); !errors.Is(err, family.ErrUnknown) {
			t.Errorf("Generate(%q): %v, want ErrUnknown", bad, err)
		}
	}
}

type fleetShape struct {
	nodes  int
	appCPU int64
}

// shapes loads a family's seed 1 and counts its nodes and the CPU its
// apps' pods request.
func shapes(t *testing.T, name string) fleetShape {
	t.Helper()
	seed := uint64(1)
	l, err := scenario.LoadWith("builtin:"+name, scenario.Options{Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	out := fleetShape{nodes: len(l.Cluster.Nodes)}
	for i := range l.Workload.Pods {
		if p := &l.Workload.Pods[i]; p.Service != "" {
			out.appCPU += p.CPU
		}
	}
	return out
}

// TestTelemetryIsNotRequests: on a loaded family, at the middle of a
// k8s-default replay, nodes of one pool whose requests are within 5
// points of each other differ widely in what they measure: the use the
// requests hide (usage drawn per pod, profiles, interference).
func TestTelemetryIsNotRequests(t *testing.T) {
	seed := uint64(1)
	l, err := scenario.LoadWith("builtin:retail-stores", scenario.Options{Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	env, err := sim.NewEnv(l.Cluster, l.Workload, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.DefaultRunConfig(engine.Replay)
	var spread, runq float64
	var checked bool
	cfg.OnOutcome = func(st *sim.State, _ *sim.Pod, _ int) {
		if checked || st.Now < 24*3600 {
			return
		}
		checked = true
		for i := range st.Nodes {
			for j := range st.Nodes {
				a, b := &st.Nodes[i], &st.Nodes[j]
				if a.CPU != b.CPU || a.Arch != b.Arch || a.GPUs != b.GPUs {
					continue
				}
				ra, rb := float64(a.CPU-a.CPUFree)/float64(a.CPU), float64(b.CPU-b.CPUFree)/float64(b.CPU)
				if math.Abs(ra-rb) > 0.05 {
					continue
				}
				ta, tb := st.Telemetry(i), st.Telemetry(j)
				spread = max(spread, math.Abs(ta.CPU-tb.CPU))
				if ta.RunQueueP99Us > 0 && tb.RunQueueP99Us > 0 {
					runq = max(runq, ta.RunQueueP99Us/tb.RunQueueP99Us)
				}
			}
		}
	}
	pol, _ := baseline.Lookup(baseline.K8sDefault)
	if _, err := engine.Run(context.Background(), env, pol, cfg); err != nil {
		t.Fatal(err)
	}
	t.Logf("twin nodes (requests within 5 points): CPU measured differs by up to %.2f, run-queue p99 by up to %.1fx", spread, runq)
	if !checked || spread < 0.2 || runq < 3 {
		t.Errorf("telemetry barely differs between nodes with equal requests: CPU %.2f, run-queue %.1fx", spread, runq)
	}
}
