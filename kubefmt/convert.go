package kubefmt

import (
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/edgesched/edgesched/sim"
)

// The one reading of a Pod and a Node in the simulator's terms: the
// scheduler plugin scores with it and the agent's trace recorder records
// with it, so the site's twin replays pods and nodes exactly as the
// plugin saw them.

const mib = 1 << 20

// PodRequests is a pod's effective CPU (milli-CPU) and memory (bytes)
// request as the scheduler counts it: the sum of its containers', at
// least any init container's, plus the pod overhead.
func PodRequests(p *v1.Pod) (cpu, mem int64) {
	for i := range p.Spec.Containers {
		r := p.Spec.Containers[i].Resources.Requests
		cpu += r.Cpu().MilliValue()
		mem += r.Memory().Value()
	}
	for i := range p.Spec.InitContainers { // the effective request is the max of init and the sum
		r := p.Spec.InitContainers[i].Resources.Requests
		cpu = max(cpu, r.Cpu().MilliValue())
		mem = max(mem, r.Memory().Value())
	}
	if p.Spec.Overhead != nil {
		cpu += p.Spec.Overhead.Cpu().MilliValue()
		mem += p.Spec.Overhead.Memory().Value()
	}
	return cpu, mem
}

// SimPod converts a pod into the simulator's pod: its requests
// (PodRequests, memory rounded up to MiB), GPU request (PodGPURequest),
// QoS class (PodQoS), priority, CPU use (PodUsage) and the architecture
// its kubernetes.io/arch node selector asks for (PodArch: the policy's
// architecture features read it), without a service
// (Service -1: the caller indexes ServiceOf in its environment) and never
// deleted. models are the GPU models it accepts (nil: any), which the
// caller turns into sim.Pod.GPUMask in its environment. A malformed GPU
// request is returned as the error, with the pod converted without GPUs.
//
// Other spec fields the kube-scheduler's own plugins enforce (other node
// selectors, limits) are not read here: see PodCPULimit.
func SimPod(p *v1.Pod) (sp sim.Pod, models []string, err error) {
	cpu, mem := PodRequests(p)
	req, err := PodGPURequest(p)
	sp = sim.Pod{
		CPU: cpu, Mem: (mem + mib - 1) / mib, GPUs: req.GPUs, GPUMilli: req.Milli,
		QoS: PodQoS(p), Service: -1, Usage: PodUsage(p), Delete: sim.NoDeletion, Arch: PodArch(p),
	}
	if p.Spec.Priority != nil {
		sp.Priority = *p.Spec.Priority
	}
	return sp, req.Models, err
}

// PodArch is the architecture a pod's kubernetes.io/arch node selector
// asks for (sim.ArchAny without one, or with one the simulator does not
// know). The scheduler leaves it to the kube-scheduler's NodeAffinity
// filter; the twin, which has no kube-scheduler, enforces it itself.
func PodArch(p *v1.Pod) sim.Arch {
	if a, ok := p.Spec.NodeSelector[LabelArch]; ok {
		if arch, err := sim.ParseArch(a); err == nil {
			return arch
		}
	}
	return sim.ArchAny
}

// PodCPULimit is the sum of a pod's containers' CPU limits in milli-CPU,
// or 0 when any container has none (the pod is then not CPU-limited).
func PodCPULimit(p *v1.Pod) int64 {
	var limit int64
	for i := range p.Spec.Containers {
		q, ok := p.Spec.Containers[i].Resources.Limits[v1.ResourceCPU]
		if !ok {
			return 0
		}
		limit += q.MilliValue()
	}
	return limit
}

// NodeFailureRate is a node's AnnotationFailureRate; absent, malformed or
// outside [0, sim.MaxFailureDay] reads as 0.
func NodeFailureRate(n *v1.Node) float64 {
	s, ok := n.Annotations[AnnotationFailureRate]
	if !ok {
		return 0
	}
	if v, err := strconv.ParseFloat(s, 64); err == nil && v >= 0 && v <= sim.MaxFailureDay {
		return v
	}
	return 0
}

// NodePower is a node's power model from AnnotationWattsPerCore and
// AnnotationWattsPerGPU, nil when neither is set; either absent, malformed
// or outside [0, sim.MaxWatts] keeps its default (sim.DefaultPower of
// arch; a GPU's is its model's, sim.PowerModel's zero WattsPerGPU).
func NodePower(n *v1.Node, arch sim.Arch) *sim.PowerModel {
	perCore, okCore := annotationWatts(n, AnnotationWattsPerCore)
	perGPU, okGPU := annotationWatts(n, AnnotationWattsPerGPU)
	if !okCore && !okGPU {
		return nil
	}
	pw := sim.DefaultPower(arch)
	if okCore {
		pw.WattsPerCore = perCore
	}
	if okGPU {
		pw.WattsPerGPU = perGPU
	}
	return &pw
}

func annotationWatts(n *v1.Node, key string) (float64, bool) {
	s, ok := n.Annotations[key]
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil && v >= 0 && v <= sim.MaxWatts
}

// SimNode converts a node's static attributes into the simulator's node:
// allocatable CPU (milli) and memory (MiB, rounded down), GPUs and model
// (NodeGPUs), zone, architecture (amd64 when the label is absent or
// unknown), failure rate (NodeFailureRate) and power (NodePower). ok is false for a node the
// simulator cannot model: no CPU or memory, or more than sim.MaxQuantity.
func SimNode(n *v1.Node) (spec sim.NodeSpec, ok bool) {
	a := n.Status.Allocatable
	spec = sim.NodeSpec{Name: n.Name, CPU: a.Cpu().MilliValue(), Memory: a.Memory().Value() / mib, Zone: n.Labels[LabelZone]}
	spec.GPUs, spec.GPUModel = NodeGPUs(n)
	arch, err := sim.ParseArch(n.Labels[LabelArch])
	if err != nil || arch == sim.ArchAny {
		arch = sim.ArchAMD64
	}
	spec.Arch = arch
	spec.FailureRate = NodeFailureRate(n)
	spec.Power = NodePower(n, arch)
	ok = spec.CPU > 0 && spec.Memory > 0 && spec.CPU <= sim.MaxQuantity && spec.Memory <= sim.MaxQuantity
	return spec, ok
}
