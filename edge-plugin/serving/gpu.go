package serving

import (
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
	v1 "k8s.io/api/core/v1"
)

// podModels returns the GPU models pod p accepts (nil: any, or a malformed
// request, which PreScore refuses anyway).
func podModels(p *v1.Pod) []string {
	r, err := kubefmt.PodGPURequest(p)
	if err != nil {
		return nil
	}
	return r.Models
}

// gpuMaskOf is the simulator's GPUMask of accepted models in env (models
// env does not know are left out: no node has them). A pod naming only
// unknown models gets 0, but Filter has then left no node to score.
func gpuMaskOf(env *sim.Env, models []string) uint64 {
	var mask uint64
	for _, m := range models {
		if i, ok := env.ModelIndex(m); ok && i < 64 {
			mask |= 1 << uint(i)
		}
	}
	return mask
}
