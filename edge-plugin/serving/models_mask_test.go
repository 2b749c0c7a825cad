package serving

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
)

// TestGPUMaskOf: the GPU models a pod accepts become the simulator's
// GPUMask in the view's env, as the simulator's own pods carry them (the
// v2 features pod_gpu_spec and pod_model_choice read it; without it the
// plugin scored such pods as accepting any model and lost parity with the
// simulator). Bits are the env's model indices, whatever their order in
// the annotation; models the env does not know are left out.
func TestGPUMaskOf(t *testing.T) {
	cl := &sim.Cluster{Name: "t", GPUModels: sim.KnownGPUModels(), Nodes: []sim.NodeSpec{{Name: "a", CPU: 1000, Memory: 1024, Arch: sim.ArchAMD64, Zone: "z"}}, Zones: []sim.Zone{{Name: "z"}}}
	env, err := sim.NewEnv(cl, &sim.Workload{Name: "w"}, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bit := func(name string) uint64 {
		i, ok := env.ModelIndex(name)
		if !ok {
			t.Fatalf("env lacks %s", name)
		}
		return 1 << uint(i)
	}
	tests := []struct {
		annotation string
		want       uint64
	}{
		{"", 0},
		{"T4", bit("T4")},
		{"V100M32,T4", bit("T4") | bit("V100M32")},
		{"T4,NoSuchGPU", bit("T4")},
	}
	for _, tc := range tests {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{kubefmt.AnnotationGPUMilli: "500"}}}
		if tc.annotation != "" {
			p.Annotations[kubefmt.AnnotationGPUModels] = tc.annotation
		}
		if got := gpuMaskOf(env, podModels(p)); got != tc.want {
			t.Errorf("%q: mask %b, want %b", tc.annotation, got, tc.want)
		}
	}
}
