package kubefixture

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgesched/edgesched/kubefmt"
)

// NodeName is the name of Node's node.
const NodeName = "edge-gpu-1"

// Node is a GPU node of 4 A100 devices in zone-a (arm64) with a failure
// rate of 0.25 a day.
func Node() *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: NodeName,
			Labels:      map[string]string{kubefmt.LabelGPUModel: "A100", kubefmt.LabelZone: "zone-a", kubefmt.LabelArch: "arm64"},
			Annotations: map[string]string{kubefmt.AnnotationFailureRate: "0.25"}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU:           resource.MustParse("32"),
			v1.ResourceMemory:        resource.MustParse("128Gi"),
			kubefmt.ResourceGPU:      resource.MustParse("4"),
			kubefmt.ResourceGPUMilli: resource.MustParse("4000"),
		}},
	}
}

// pod is a pod of one container requesting cpu and mem, bound to Node.
func pod(name, cpu, mem string, extra v1.ResourceList, annotations map[string]string) *v1.Pod {
	req := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
	for k, q := range extra {
		req[k] = q
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), Annotations: annotations,
			Labels: map[string]string{kubefmt.LabelService: name}},
		Spec: v1.PodSpec{NodeName: NodeName, Containers: []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{Requests: req}}}},
	}
}

// Pods are pods bound to Node that fit it together (one device shared by
// two of them, two devices whole), and one with a malformed GPU request
// (Malformed names it).
func Pods() []*v1.Pod {
	prio := int32(1000)
	share := pod("infer", "1500m", "3Gi", nil, map[string]string{
		kubefmt.AnnotationGPUMilli: "250", kubefmt.AnnotationGPUModels: "A100, H100",
		kubefmt.AnnotationQoS: "LS", kubefmt.AnnotationCPUUsage: "0.5"})
	share.Spec.Priority = &prio
	milli := pod("embed", "500m", "1000Mi", v1.ResourceList{kubefmt.ResourceGPUMilli: resource.MustParse("500")},
		map[string]string{kubefmt.AnnotationGPUModels: "A100"})
	milli.Status.QOSClass = v1.PodQOSGuaranteed
	whole := pod("train", "8", "32Gi", v1.ResourceList{kubefmt.ResourceGPU: resource.MustParse("2")},
		map[string]string{kubefmt.AnnotationCPUUsage: "1.25"})
	whole.Spec.InitContainers = []v1.Container{{Name: "fetch", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("12"), v1.ResourceMemory: resource.MustParse("1Gi")}}}}
	whole.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	plain := pod("web", "250m", "300M", nil, nil)
	plain.Status.QOSClass = v1.PodQOSBestEffort
	bad := pod(Malformed, "100m", "64Mi", nil, map[string]string{kubefmt.AnnotationGPUMilli: "1500"})
	return []*v1.Pod{share, milli, whole, plain, bad}
}

// Malformed is the name of the pod of Pods whose GPU request is
// malformed (a shared GPU of 1500 milli).
const Malformed = "broken"
