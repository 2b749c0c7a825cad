package baseline

import (
	"testing"

	"github.com/edgesched/edgesched/sim"
)

// TestCarbonLoad checks CarbonLoad's emission term against DepLoad's
// score: the grid at 100 gCO2/kWh ("green") or 500 ("dirty"); nodes
// g-arm (green, 2 W per core), g-amd (green, 6 W per core), d-arm (dirty,
// 2 W per core) and g-gpu (green, 6 W per core and a 70 W GPU).
func TestCarbonLoad(t *testing.T) {
	c := &sim.Cluster{
		Name:        "carbon",
		CarbonZones: []sim.CarbonZone{{Name: "green", Curve: []float64{100}}, {Name: "dirty", Curve: []float64{500}}},
		Zones:       []sim.Zone{{Name: "g", CarbonZone: "green"}, {Name: "d", CarbonZone: "dirty"}},
		Nodes: []sim.NodeSpec{
			{Name: "g-arm", CPU: 8000, Memory: 16384, Arch: sim.ArchARM64, Zone: "g", Power: &sim.PowerModel{WattsPerCore: 2}},
			{Name: "g-amd", CPU: 8000, Memory: 16384, Arch: sim.ArchAMD64, Zone: "g", Power: &sim.PowerModel{WattsPerCore: 6}},
			{Name: "d-arm", CPU: 8000, Memory: 16384, Arch: sim.ArchARM64, Zone: "d", Power: &sim.PowerModel{WattsPerCore: 2}},
			{Name: "g-gpu", CPU: 8000, Memory: 16384, GPUs: 1, GPUModel: "T4", Arch: sim.ArchAMD64, Zone: "g", Power: &sim.PowerModel{WattsPerCore: 6, WattsPerGPU: 70}},
		},
	}
	w := &sim.Workload{Pods: []sim.PodSpec{{Name: "p", CPU: 1000, Memory: 1024, Delete: sim.NoDeletion}}}
	env, err := sim.NewEnv(c, w, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := sim.NewState(env)
	nodes := []int32{0, 1, 2, 3}
	dep, err := Lookup(DepLoad)
	if err != nil {
		t.Fatal(err)
	}
	depPol, _ := dep.New(env)
	f, err := Lookup(CarbonLoad)
	if err != nil {
		t.Fatal(err)
	}
	pol, _ := f.New(env)
	half := NewCarbonLoad(env, 1)

	for _, tc := range []struct {
		name string
		pod  sim.Pod
		// the emission term before the weight: 100 (r_max - r) / (r_max -
		// r_min) over the rates r = gCO2/kWh x watts for the requests
		want []float64
	}{
		// rates 100x2, 100x6, 500x2 and, for a pod without GPUs, the
		// worst rate on the GPU node: 200, 600, 1000, 1000
		{"cpu pod keeps off the GPU node", sim.Pod{CPU: 1000, Mem: 1024, Service: -1}, []float64{100, 50, 0, 0}},
		// one core and half a GPU: 200, 600, 1000 and 100 x (6 + 35) =
		// 4100 on the GPU node, the only one with the GPU it needs
		{"gpu pod", sim.Pod{CPU: 1000, Mem: 1024, GPUs: 1, GPUMilli: 500, Service: -1}, []float64{100, 100 * 3500 / 3900.0, 100 * 3100 / 3900.0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := make([]float64, len(nodes))
			depPol.Score(st, &tc.pod, nodes, base)
			for _, k := range []struct {
				pol    sim.Policy
				weight float64
			}{{pol, CarbonLoadWeight}, {half, 1}} {
				got := make([]float64, len(nodes))
				k.pol.Score(st, &tc.pod, nodes, got)
				for i := range got {
					got[i] -= base[i]
				}
				want := make([]float64, len(nodes))
				for i := range want {
					want[i] = k.weight * tc.want[i]
				}
				expectScores(t, got, want)
			}
		})
	}
}
