package kubefmt

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgesched/edgesched/sim"
)

func pod(requests v1.ResourceList, annotations map[string]string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: annotations},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: requests}}}}}
}

func TestPodGPURequest(t *testing.T) {
	q := resource.MustParse
	cases := []struct {
		name      string
		req       v1.ResourceList
		ann       map[string]string
		gpus      int32
		milli     int64
		models    int
		wantError string
	}{
		{"none", nil, nil, 0, 0, 0, ""},
		{"whole devices", v1.ResourceList{ResourceGPU: q("2")}, nil, 2, 1000, 0, ""},
		{"share", v1.ResourceList{ResourceGPUMilli: q("250")}, nil, 1, 250, 0, ""},
		{"share by annotation, two models", nil, map[string]string{AnnotationGPUMilli: "300", AnnotationGPUModels: "T4, A10"}, 1, 300, 2, ""},
		{"milli as whole devices", v1.ResourceList{ResourceGPUMilli: q("3000")}, nil, 3, 1000, 0, ""},
		{"disagreeing", v1.ResourceList{ResourceGPU: q("1"), ResourceGPUMilli: q("500")}, nil, 0, 0, 0, "disagree"},
		{"share and devices", v1.ResourceList{ResourceGPU: q("1")}, map[string]string{AnnotationGPUMilli: "300"}, 0, 0, 0, "one device"},
		{"bad annotation", nil, map[string]string{AnnotationGPUMilli: "1000"}, 0, 0, 0, "want an integer"},
		{"not whole", v1.ResourceList{ResourceGPUMilli: q("1500")}, nil, 0, 0, 0, "multiple of 1000"},
		{"models without gpus", nil, map[string]string{AnnotationGPUModels: "T4"}, 0, 0, 0, "without a GPU request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := PodGPURequest(pod(tc.req, tc.ann))
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("got %v, want an error mentioning %q", err, tc.wantError)
				}
				return
			}
			if err != nil || r.GPUs != tc.gpus || r.Milli != tc.milli || len(r.Models) != tc.models {
				t.Fatalf("got %+v, %v; want %d x %d milli, %d models", r, err, tc.gpus, tc.milli, tc.models)
			}
		})
	}
	r := GPURequest{Models: []string{"T4"}}
	if !r.Accepts("T4") || r.Accepts("A100") || !(&GPURequest{}).Accepts("A100") {
		t.Fatal("Accepts")
	}
}

func TestPodQoSAndUsage(t *testing.T) {
	p := pod(nil, map[string]string{AnnotationQoS: "LS", AnnotationCPUUsage: "0.35"})
	if PodQoS(p) != sim.QoSLS || PodUsage(p) != 0.35 {
		t.Fatalf("annotated: %v %v", PodQoS(p), PodUsage(p))
	}
	p = pod(nil, map[string]string{AnnotationCPUUsage: "NaN"})
	p.Status.QOSClass = v1.PodQOSBestEffort
	if _, ok := PodCPUUsage(p); ok || PodQoS(p) != sim.QoSBE || PodUsage(p) != sim.DefaultUsage("p") {
		t.Fatalf("unannotated: %v %v", PodQoS(p), PodUsage(p))
	}
}

func TestNodeGPUs(t *testing.T) {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{ResourceGPUMilli: resource.MustParse("4000")}}}
	if c, m := NodeGPUs(n); c != 4 || m != "unknown" {
		t.Fatalf("share capacity only: %d %q", c, m)
	}
	n.Labels[LabelGPUModel] = "A100"
	n.Status.Allocatable[ResourceGPU] = resource.MustParse("2")
	if c, m := NodeGPUs(n); c != 2 || m != "A100" {
		t.Fatalf("devices: %d %q", c, m)
	}
}
