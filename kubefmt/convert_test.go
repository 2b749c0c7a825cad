package kubefmt

import (
	"reflect"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgesched/edgesched/sim"
)

func TestSimPod(t *testing.T) {
	prio := int32(7)
	withInit := pod(v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Mi")}, nil)
	withInit.Spec.InitContainers = []v1.Container{{Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}}}}
	withInit.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("1")}
	withInit.Spec.Priority = &prio
	armOnly := pod(v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}, nil)
	armOnly.Spec.NodeSelector = map[string]string{LabelArch: "arm64", "disk": "ssd"}
	cases := []struct {
		name    string
		pod     *v1.Pod
		want    sim.Pod
		models  []string
		wantErr bool
	}{
		{"requests and rounding", pod(v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("1000Ki")},
			map[string]string{AnnotationCPUUsage: "0.5"}),
			sim.Pod{CPU: 250, Mem: 1, QoS: sim.QoSBurstable, Service: -1, Usage: 0.5, Delete: sim.NoDeletion}, nil, false},
		{"init containers, overhead, priority", withInit,
			sim.Pod{CPU: 3100, Mem: 2, QoS: sim.QoSBurstable, Service: -1, Usage: sim.DefaultUsage("p"), Priority: 7, Delete: sim.NoDeletion}, nil, false},
		{"shared GPU with models and QoS", pod(nil, map[string]string{AnnotationGPUMilli: "300", AnnotationGPUModels: "T4,,A100", AnnotationQoS: "LS"}),
			sim.Pod{GPUs: 1, GPUMilli: 300, QoS: sim.QoSLS, Service: -1, Usage: sim.DefaultUsage("p"), Delete: sim.NoDeletion}, []string{"T4", "A100"}, false},
		{"arm64 node selector: the pod needs arm64", armOnly,
			sim.Pod{CPU: 2000, QoS: sim.QoSBurstable, Service: -1, Usage: sim.DefaultUsage("p"), Arch: sim.ArchARM64, Delete: sim.NoDeletion}, nil, false},
		{"malformed GPU request: no GPUs", pod(nil, map[string]string{AnnotationGPUMilli: "x"}),
			sim.Pod{QoS: sim.QoSBurstable, Service: -1, Usage: sim.DefaultUsage("p"), Delete: sim.NoDeletion}, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, models, err := SimPod(tc.pod)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if got != tc.want || !slices.Equal(models, tc.models) {
				t.Fatalf("got %+v %q\nwant %+v %q", got, models, tc.want, tc.models)
			}
		})
	}
}

func TestPodArchAndCPULimit(t *testing.T) {
	limited := func(limits ...string) *v1.Pod {
		p := pod(nil, nil)
		p.Spec.Containers = nil
		for _, l := range limits {
			c := v1.Container{}
			if l != "" {
				c.Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse(l)}
			}
			p.Spec.Containers = append(p.Spec.Containers, c)
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		pod   *v1.Pod
		limit int64
	}{
		{"every container limited", limited("500m", "2"), 2500},
		{"one without a limit", limited("500m", ""), 0},
		{"no containers", limited(), 0},
	} {
		if got := PodCPULimit(tc.pod); got != tc.limit {
			t.Errorf("%s: PodCPULimit %d, want %d", tc.name, got, tc.limit)
		}
	}
	for sel, want := range map[string]sim.Arch{"arm64": sim.ArchARM64, "amd64": sim.ArchAMD64, "sparc": sim.ArchAny, "": sim.ArchAny} {
		p := pod(nil, nil)
		if sel != "" {
			p.Spec.NodeSelector = map[string]string{LabelArch: sel}
		}
		if got := PodArch(p); got != want {
			t.Errorf("PodArch(%q) = %v, want %v", sel, got, want)
		}
	}
}

func TestSimNode(t *testing.T) {
	node := func(cpu, mem string, labels, annotations map[string]string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels, Annotations: annotations},
			Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem),
				ResourceGPUMilli: resource.MustParse("2000")}}}
	}
	cases := []struct {
		name string
		node *v1.Node
		want sim.NodeSpec
		ok   bool
	}{
		{"labels and failure rate", node("4", "8Gi", map[string]string{LabelZone: "z1", LabelArch: "arm64", LabelGPUModel: "T4"},
			map[string]string{AnnotationFailureRate: "0.5"}),
			sim.NodeSpec{Name: "n", CPU: 4000, Memory: 8192, GPUs: 2, GPUModel: "T4", Zone: "z1", Arch: sim.ArchARM64, FailureRate: 0.5}, true},
		{"defaults: amd64, unknown model, no failures", node("1", "1Gi", nil, nil),
			sim.NodeSpec{Name: "n", CPU: 1000, Memory: 1024, GPUs: 2, GPUModel: "unknown", Arch: sim.ArchAMD64}, true},
		{"failure rate out of range reads 0", node("1", "1Gi", nil, map[string]string{AnnotationFailureRate: "1e9"}),
			sim.NodeSpec{Name: "n", CPU: 1000, Memory: 1024, GPUs: 2, GPUModel: "unknown", Arch: sim.ArchAMD64}, true},
		{"malformed failure rate reads 0", node("1", "1Gi", nil, map[string]string{AnnotationFailureRate: "NaN"}),
			sim.NodeSpec{Name: "n", CPU: 1000, Memory: 1024, GPUs: 2, GPUModel: "unknown", Arch: sim.ArchAMD64}, true},
		{"power annotations over the arm64 defaults (idle 3 W kept)", node("4", "8Gi", map[string]string{LabelArch: "arm64", LabelGPUModel: "Orin"},
			map[string]string{AnnotationWattsPerCore: "1.5", AnnotationWattsPerGPU: "25"}),
			sim.NodeSpec{Name: "n", CPU: 4000, Memory: 8192, GPUs: 2, GPUModel: "Orin", Arch: sim.ArchARM64,
				Power: &sim.PowerModel{IdleWatts: 3, WattsPerCore: 1.5, WattsPerGPU: 25}}, true},
		{"per-core watts only: the GPU's stays its model's (0)", node("1", "1Gi", nil, map[string]string{AnnotationWattsPerCore: "6"}),
			sim.NodeSpec{Name: "n", CPU: 1000, Memory: 1024, GPUs: 2, GPUModel: "unknown", Arch: sim.ArchAMD64,
				Power: &sim.PowerModel{IdleWatts: 60, WattsPerCore: 6}}, true},
		{"malformed or out-of-range watts keep the defaults", node("1", "1Gi", nil,
			map[string]string{AnnotationWattsPerCore: "NaN", AnnotationWattsPerGPU: "-1"}),
			sim.NodeSpec{Name: "n", CPU: 1000, Memory: 1024, GPUs: 2, GPUModel: "unknown", Arch: sim.ArchAMD64}, true},
		{"no memory: not modelled", node("1", "0", nil, nil),
			sim.NodeSpec{Name: "n", CPU: 1000, GPUs: 2, GPUModel: "unknown", Arch: sim.ArchAMD64}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := SimNode(tc.node)
			if ok != tc.ok || got.Name != tc.want.Name || got.CPU != tc.want.CPU || got.Memory != tc.want.Memory || got.GPUs != tc.want.GPUs ||
				got.GPUModel != tc.want.GPUModel || got.Zone != tc.want.Zone || got.Arch != tc.want.Arch || got.FailureRate != tc.want.FailureRate ||
				!reflect.DeepEqual(got.Power, tc.want.Power) {
				t.Fatalf("got %+v %v, want %+v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
