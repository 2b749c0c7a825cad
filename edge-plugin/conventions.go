package edgeplugin

import (
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
)

// The Kubernetes conventions EdgePolicy reads and writes live in package
// kubefmt (shared with the edge agent, which must not link this package);
// docs/edge-plugin.md documents each of them. These names keep the
// plugin's API.
const (
	ResourceGPU           = kubefmt.ResourceGPU
	ResourceGPUMilli      = kubefmt.ResourceGPUMilli
	LabelGPUModel         = kubefmt.LabelGPUModel
	LabelZone             = kubefmt.LabelZone
	LabelArch             = kubefmt.LabelArch
	AnnotationGPUMilli    = kubefmt.AnnotationGPUMilli
	AnnotationGPUModels   = kubefmt.AnnotationGPUModels
	AnnotationGPUDevices  = kubefmt.AnnotationGPUDevices
	AnnotationQoS         = kubefmt.AnnotationQoS
	AnnotationCPUUsage    = kubefmt.AnnotationCPUUsage
	AnnotationFailureRate = kubefmt.AnnotationFailureRate
)

// gpuRequest is a pod's GPU demand in the simulator's terms.
type gpuRequest struct {
	GPUs   int32
	Milli  int64
	Models []string // accepted models; empty accepts any
}

// podGPURequest reads a pod's GPU demand (kubefmt.PodGPURequest).
func podGPURequest(p *v1.Pod) (gpuRequest, error) {
	r, err := kubefmt.PodGPURequest(p)
	return gpuRequest{GPUs: r.GPUs, Milli: r.Milli, Models: r.Models}, err
}

// accepts reports whether a pod accepting models runs on GPU model m.
func (r *gpuRequest) accepts(m string) bool {
	return (&kubefmt.GPURequest{Models: r.Models}).Accepts(m)
}

// podDevices parses AnnotationGPUDevices; ok is false when it is absent
// or malformed (the caller then derives an assignment).
func podDevices(p *v1.Pod, n int32, devices int) ([]int, bool) {
	s, ok := p.Annotations[AnnotationGPUDevices]
	if !ok {
		return nil, false
	}
	parts := strings.Split(s, ",")
	if int32(len(parts)) != n {
		return nil, false
	}
	out := make([]int, 0, len(parts))
	for _, x := range parts {
		v, err := strconv.Atoi(strings.TrimSpace(x))
		if err != nil || v < 0 || v >= devices {
			return nil, false
		}
		for _, y := range out {
			if y == v {
				return nil, false
			}
		}
		out = append(out, v)
	}
	return out, true
}

// formatDevices renders device indices for AnnotationGPUDevices.
func formatDevices(d []int) string {
	var b strings.Builder
	for i, v := range d {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(v))
	}
	return b.String()
}

// podModels returns the GPU models pod p accepts (nil: any, or a malformed
// request, which PreScore refuses anyway).
func podModels(p *v1.Pod) []string {
	r, err := podGPURequest(p)
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
