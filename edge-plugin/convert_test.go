package edgeplugin

import (
	"slices"
	"testing"

	"github.com/edgesched/edgesched/internal/testutil/kubefixture"
	"github.com/edgesched/edgesched/kubefmt"
)

// TestConvertReadsAsRecorder: the plugin converts the shared fixture's
// node and pods with kubefmt.SimNode and SimPod, the conversion the
// agent's trace recorder records with (agent/trace's
// TestRecordReadsAsPlugin checks the recorder's side on the same
// fixture), failure rate included; the malformed pod is skipped.
func TestConvertReadsAsRecorder(t *testing.T) {
	n, pods := kubefixture.Node(), kubefixture.Pods()
	e := convertNode(nodeInfo(n, pods...), &reservations{})
	want, ok := kubefmt.SimNode(n)
	if !ok || !e.ok || e.spec.Name != want.Name || e.spec.CPU != want.CPU || e.spec.Memory != want.Memory || e.spec.GPUs != want.GPUs ||
		e.spec.GPUModel != want.GPUModel || e.spec.Zone != want.Zone || e.spec.Arch != want.Arch || e.spec.FailureRate != want.FailureRate {
		t.Fatalf("node %+v, kubefmt reads %+v", e.spec, want)
	}
	if e.spec.FailureRate != 0.25 {
		t.Fatalf("failure rate %v, want the annotation's 0.25", e.spec.FailureRate)
	}
	left := slices.Clone(e.pods)
	for _, p := range pods {
		sp, _, err := kubefmt.SimPod(p)
		if p.Name == kubefixture.Malformed {
			if err == nil {
				t.Fatalf("pod %s converts without an error", p.Name)
			}
			continue
		}
		i := slices.IndexFunc(left, func(c convPod) bool { return c.pod == sp && c.service == kubefmt.ServiceOf(p) })
		if i < 0 {
			t.Fatalf("pod %s: kubefmt reads %+v, not among the plugin's %+v", p.Name, sp, left)
		}
		left = slices.Delete(left, i, i+1)
	}
	if len(left) != 0 || e.skipped != 1 {
		t.Fatalf("%d pods left over, %d skipped (want 0 and the malformed one)", len(left), e.skipped)
	}
	// podModels, which masks GPU models for the pod being scheduled,
	// reads the accepted models as the recorder does
	for _, p := range pods {
		if _, models, err := kubefmt.SimPod(p); err == nil && !slices.Equal(podModels(p), models) {
			t.Fatalf("pod %s: models %q, kubefmt reads %q", p.Name, podModels(p), models)
		}
	}
}
