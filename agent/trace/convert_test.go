package trace

import (
	"slices"
	"testing"

	"github.com/edgesched/edgesched/internal/testutil/kubefixture"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
)

// TestRecordReadsAsPlugin: the recorder reads the shared fixture's pods
// and node exactly as the scheduler plugin does (kubefmt.SimPod and
// SimNode; edge-plugin's TestConvertReadsAsRecorder checks the plugin's
// side on the same fixture): the sim.Pod a record holds is the plugin's,
// with the CPU use when the pod gives it, and the node record holds the
// plugin's node, failure rate included.
func TestRecordReadsAsPlugin(t *testing.T) {
	for _, p := range kubefixture.Pods() {
		t.Run(p.Name, func(t *testing.T) {
			want, models, werr := kubefmt.SimPod(p)
			rec, err := PodRecord(p)
			if (err != nil) != (werr != nil) || (err != nil) != (p.Name == kubefixture.Malformed) {
				t.Fatalf("record error %v, conversion error %v", err, werr)
			}
			got := sim.Pod{CPU: rec.CPUMilli, Mem: rec.MemoryMiB, GPUs: rec.GPUs, GPUMilli: rec.GPUMilli, QoS: rec.QoS,
				Priority: rec.Priority, Service: -1, Usage: want.Usage, Delete: sim.NoDeletion}
			if _, given := kubefmt.PodCPUUsage(p); given {
				got.Usage = rec.CPUUsage
			}
			if got != want || !slices.Equal(rec.GPUModels, models) {
				t.Fatalf("recorded %+v %q\nplugin reads %+v %q", got, rec.GPUModels, want, models)
			}
			if rec.Service != kubefmt.ServiceOf(p) || rec.Service == "" {
				t.Fatalf("service %q, want %q", rec.Service, kubefmt.ServiceOf(p))
			}
		})
	}
	n := kubefixture.Node()
	want, ok := kubefmt.SimNode(n)
	rec := NodeRecord(n)
	got := sim.NodeSpec{Name: rec.Name, CPU: rec.CPUMilli, Memory: rec.MemoryMiB, GPUs: int(rec.GPUs), GPUModel: rec.GPUModel,
		Zone: rec.Zone, Arch: rec.Arch, FailureRate: rec.FailureRate}
	if !ok || got.Name != want.Name || got.CPU != want.CPU || got.Memory != want.Memory || got.GPUs != want.GPUs ||
		got.GPUModel != want.GPUModel || got.Zone != want.Zone || got.Arch != want.Arch || got.FailureRate != want.FailureRate {
		t.Fatalf("recorded node %+v, plugin reads %+v (ok %v)", got, want, ok)
	}
	if rec.FailureRate != 0.25 {
		t.Fatalf("failure rate %v, want the annotation's 0.25", rec.FailureRate)
	}
}
