package kubefmt

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/edgesched/edgesched/sim"
)

// The Kubernetes conventions EdgePolicy reads and writes. They are the
// contract with node labelling (device plugins, the agent), with workload
// authors, and with the end-to-end harness; docs/edge-plugin.md documents
// each of them. Do not rename them without a migration.
const (
	// ResourceGPU is the extended resource counting a node's whole GPU
	// devices (allocatable), and a pod's request for whole devices.
	ResourceGPU v1.ResourceName = "nvidia.com/gpu"
	// ResourceGPUMilli is the GPU share capacity of a node (1000 per
	// device), and a pod's GPU request in milli-GPU: below 1000 it is a
	// share of one device, otherwise a multiple of 1000 (whole devices).
	ResourceGPUMilli v1.ResourceName = "edgesched.io/gpu-milli"

	// LabelGPUModel is the node label naming the GPU model of all of the
	// node's devices (e.g. "T4", "A100"; sim.KnownGPUModels lists the
	// known ones, other names are accepted).
	LabelGPUModel = "edgesched.io/gpu-model"
	// LabelZone is the node's zone (failure and network domain).
	LabelZone = v1.LabelTopologyZone
	// LabelArch is the node's CPU architecture.
	LabelArch = v1.LabelArchStable

	// AnnotationGPUMilli is a pod's GPU share of one device in milli-GPU,
	// in (0, 1000), for pods that share a device without requesting the
	// ResourceGPUMilli extended resource.
	AnnotationGPUMilli = "edgesched.io/gpu-milli"
	// AnnotationGPUModels lists the GPU models a pod accepts (comma
	// separated); absent or empty accepts any model.
	AnnotationGPUModels = "edgesched.io/gpu-models"
	// AnnotationGPUDevices records the device indices (comma separated,
	// 0-based, in [0, node's device count)) a bound pod uses. EdgePolicy
	// sets it in Bind; a device plugin or the node agent may read it.
	AnnotationGPUDevices = "edgesched.io/gpu-devices"
	// AnnotationQoS overrides the pod's QoS class for the policy: LS,
	// Burstable, BE or Guaranteed (the openb classes). Without it the
	// Kubernetes QoS class is used (BestEffort maps to BE).
	AnnotationQoS = "edgesched.io/qos"
	// AnnotationCPUUsage is a pod's measured CPU use as a share of its
	// request (a float in [0, 64]); without it the simulator's default
	// usage model (sim.DefaultUsage of the pod name) is assumed.
	AnnotationCPUUsage = "edgesched.io/cpu-usage"
	// AnnotationFailureRate is a node's expected failures per day (float
	// >= 0), set by whoever tracks node health; absent means 0.
	AnnotationFailureRate = "edgesched.io/failure-rate"
	// AnnotationWattsPerCore is the power (watts, float >= 0) a node draws
	// per busy core for placed work; absent, the simulator's default for
	// its architecture (sim.DefaultPower: amd64 8 W, arm64 2 W).
	AnnotationWattsPerCore = "edgesched.io/watts-per-core"
	// AnnotationWattsPerGPU is the power (watts, float >= 0) a node draws
	// per busy GPU; absent or 0, its GPU model's board power (sim.GPUWatts).
	AnnotationWattsPerGPU = "edgesched.io/watts-per-gpu"
)

// Labels and annotations on the objects the site leader writes (the
// Lease; the ledger, handover and dependency-graph ConfigMaps), so that
// kubectl -l edgesched.io/site=S lists one site's.
const (
	// LabelSite names the site (edge-agent's --site).
	LabelSite = "edgesched.io/site"
	// LabelComponent names the leader component that owns the object.
	LabelComponent = "edgesched.io/component"
	// AnnotationAgent names the agent (its node) that last wrote it.
	AnnotationAgent = "edgesched.io/agent"
)

// DefaultNamespace is edgesched's namespace on a site: the Helm chart's
// release namespace, the shipped scheduler config's ConfigMaps (model,
// dependency graph, topology), edge-agent's --namespace and edgectl
// topology configmap's --namespace all default to it.
const DefaultNamespace = "edgesched-system"

// The model ConfigMap: the site leader's model installer writes the
// signed int8 artifact there and EdgePolicy (args modelConfigMap and
// modelConfigMapKey) watches it.
const (
	DefaultModelConfigMapNamespace = DefaultNamespace
	DefaultModelConfigMapName      = "edgesched-model"
	DefaultModelConfigMapKey       = "model.esa"
)

// DefaultTelemetryMaxAge is how old a node's telemetry summary
// (AnnotationTelemetry) may be before the scheduler treats it as missing:
// EdgePolicy's telemetryMaxAge and edge-agent's --stale-after default to
// it.
const DefaultTelemetryMaxAge = 2 * time.Minute

// GPURequest is a pod's GPU demand in the simulator's terms.
type GPURequest struct {
	GPUs   int32
	Milli  int64
	Models []string // accepted models; empty accepts any
}

// Accepts reports whether a pod accepting r.Models runs on GPU model m.
func (r *GPURequest) Accepts(m string) bool {
	return len(r.Models) == 0 || slices.Contains(r.Models, m)
}

// PodGPURequest reads a pod's GPU demand from its containers' requests
// (init containers are ignored: they do not hold devices while the pod
// runs) and annotations.
func PodGPURequest(p *v1.Pod) (GPURequest, error) {
	var whole, milli int64
	for i := range p.Spec.Containers {
		r := p.Spec.Containers[i].Resources
		if q, ok := r.Requests[ResourceGPU]; ok {
			whole += q.Value()
		} else if q, ok := r.Limits[ResourceGPU]; ok { // extended resources: limit implies request
			whole += q.Value()
		}
		if q, ok := r.Requests[ResourceGPUMilli]; ok {
			milli += q.Value()
		} else if q, ok := r.Limits[ResourceGPUMilli]; ok {
			milli += q.Value()
		}
	}
	var req GPURequest
	if s, ok := p.Annotations[AnnotationGPUMilli]; ok && milli == 0 {
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || v <= 0 || v >= sim.MilliGPU {
			return req, fmt.Errorf("annotation %s=%q: want an integer in (0, %d)", AnnotationGPUMilli, s, sim.MilliGPU)
		}
		if whole > 0 {
			return req, fmt.Errorf("annotation %s with a %s request: a shared GPU is one device", AnnotationGPUMilli, ResourceGPU)
		}
		milli = v
	}
	switch {
	case whole < 0 || milli < 0 || whole > sim.MaxGPUsPerNode || milli > sim.MaxGPUsPerNode*sim.MilliGPU:
		return req, fmt.Errorf("gpu request out of range: %d devices, %d milli-GPU", whole, milli)
	case whole > 0 && milli > 0 && milli != whole*sim.MilliGPU:
		return req, fmt.Errorf("%s=%d and %s=%d disagree (want %d = 1000 x devices)", ResourceGPU, whole, ResourceGPUMilli, milli, whole*sim.MilliGPU)
	case whole > 0:
		req.GPUs, req.Milli = int32(whole), sim.MilliGPU
	case milli > 0 && milli < sim.MilliGPU:
		req.GPUs, req.Milli = 1, milli
	case milli > 0 && milli%sim.MilliGPU != 0:
		return req, fmt.Errorf("%s=%d: above 1000 the request must take whole devices (a multiple of 1000)", ResourceGPUMilli, milli)
	case milli > 0:
		req.GPUs, req.Milli = int32(milli/sim.MilliGPU), sim.MilliGPU
	}
	if s := strings.TrimSpace(p.Annotations[AnnotationGPUModels]); s != "" {
		if req.GPUs == 0 {
			return req, fmt.Errorf("annotation %s on a pod without a GPU request", AnnotationGPUModels)
		}
		for _, m := range strings.Split(s, ",") {
			if m = strings.TrimSpace(m); m != "" {
				req.Models = append(req.Models, m)
			}
		}
	}
	return req, nil
}

// PodQoS maps a pod to the simulator's QoS class.
func PodQoS(p *v1.Pod) sim.QoS {
	if s, ok := p.Annotations[AnnotationQoS]; ok {
		if q, err := sim.ParseQoS(s); err == nil {
			return q
		}
	}
	switch p.Status.QOSClass {
	case v1.PodQOSBestEffort:
		return sim.QoSBE
	case v1.PodQOSGuaranteed:
		return sim.QoSGuaranteed
	}
	return sim.QoSBurstable
}

// PodCPUUsage is a pod's AnnotationCPUUsage; ok is false when it is
// absent or not a share in [0, 64].
func PodCPUUsage(p *v1.Pod) (float64, bool) {
	s, ok := p.Annotations[AnnotationCPUUsage]
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v > 64 || math.IsNaN(v) {
		return 0, false
	}
	return v, true
}

// PodUsage is the CPU use of a pod as a share of its request: its
// AnnotationCPUUsage, else the simulator's default usage model.
func PodUsage(p *v1.Pod) float64 {
	if v, ok := PodCPUUsage(p); ok {
		return v
	}
	return sim.DefaultUsage(p.Name)
}

// NodeGPUs returns a node's device count and model: the device count is
// the allocatable nvidia.com/gpu, or edgesched.io/gpu-milli / 1000 when
// only the share capacity is published. A node with devices but no model
// label gets model "unknown".
func NodeGPUs(n *v1.Node) (int, string) {
	var count int64
	if q, ok := n.Status.Allocatable[ResourceGPU]; ok {
		count = q.Value()
	} else if q, ok := n.Status.Allocatable[ResourceGPUMilli]; ok {
		count = q.Value() / sim.MilliGPU
	}
	count = min(max(count, 0), sim.MaxGPUsPerNode)
	if count == 0 {
		return 0, ""
	}
	m := strings.TrimSpace(n.Labels[LabelGPUModel])
	if m == "" {
		m = "unknown"
	}
	return int(count), m
}

// PodDevices parses AnnotationGPUDevices; ok is false when it is absent
// or malformed (the caller then derives an assignment).
func PodDevices(p *v1.Pod, n int32, devices int) ([]int, bool) {
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

// FormatDevices renders device indices for AnnotationGPUDevices.
func FormatDevices(d []int) string {
	var b strings.Builder
	for i, v := range d {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(v))
	}
	return b.String()
}
