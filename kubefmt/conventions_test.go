package kubefmt

import (
	"math"
	"slices"
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

// FuzzPodAnnotations: the pod annotations EdgePolicy reads (GPU share,
// accepted GPU models, bound devices, CPU usage, QoS), with a GPU
// request of whole devices and of milli-GPU, never make the readers
// panic, and what they accept is in range: a GPU request of 1 to
// MaxGPUsPerNode devices of (0, 1000] milli each, distinct device
// indices below the node's count that FormatDevices writes back as
// they were read, a CPU usage in [0, 64]. Seeded with the annotations
// of the golden pod EdgePolicy placed (internal/edgectl/testdata).
func FuzzPodAnnotations(f *testing.F) {
	g := goldenAnnotations(f)
	f.Add(g[AnnotationGPUMilli], g[AnnotationGPUModels], g[AnnotationGPUDevices], g[AnnotationCPUUsage], g[AnnotationQoS], int64(0), int64(0), uint8(1), uint8(4))
	f.Add("250", "T4, A10", "0", "0.85", "LS", int64(0), int64(0), uint8(1), uint8(4))
	f.Add("", "", "3,1,0", "", "Guaranteed", int64(3), int64(0), uint8(3), uint8(8))
	f.Add("", "A100", " 1, 1", "64", "be", int64(0), int64(2000), uint8(2), uint8(2))
	f.Add("999", ",,", "-1", "NaN", "x", int64(1), int64(-1000), uint8(0), uint8(0))
	f.Add(" 1 ", "T4", "0,1,2,3,4,5,6,7", "1e-300", "", int64(8), int64(8000), uint8(8), uint8(64))
	f.Fuzz(func(t *testing.T, milli, models, devices, usage, qos string, wholeReq, milliReq int64, n, count uint8) {
		ann := map[string]string{AnnotationGPUMilli: milli, AnnotationGPUModels: models, AnnotationGPUDevices: devices,
			AnnotationCPUUsage: usage, AnnotationQoS: qos}
		for k, v := range ann {
			if v == "" {
				delete(ann, k)
			}
		}
		req := v1.ResourceList{}
		if wholeReq != 0 {
			req[ResourceGPU] = *resource.NewQuantity(wholeReq, resource.DecimalSI)
		}
		if milliReq != 0 {
			req[ResourceGPUMilli] = *resource.NewQuantity(milliReq, resource.DecimalSI)
		}
		p := pod(req, ann)
		if r, err := PodGPURequest(p); err == nil && r.GPUs != 0 {
			if r.GPUs < 0 || r.GPUs > sim.MaxGPUsPerNode || r.Milli <= 0 || r.Milli > sim.MilliGPU || (r.GPUs > 1 && r.Milli != sim.MilliGPU) {
				t.Fatalf("accepted GPU request %+v", r)
			}
			for _, m := range r.Models {
				if m == "" || m != strings.TrimSpace(m) {
					t.Fatalf("accepted GPU model %q", m)
				}
			}
		} else if err == nil && (r.Milli != 0 || len(r.Models) > 0) {
			t.Fatalf("accepted %+v without devices", r)
		}
		if d, ok := PodDevices(p, int32(n), int(count)); ok {
			if len(d) != int(n) {
				t.Fatalf("%q: %d devices, want %d", devices, len(d), n)
			}
			seen := map[int]bool{}
			for _, x := range d {
				if x < 0 || x >= int(count) || seen[x] {
					t.Fatalf("%q: device %d of %d (or twice) accepted", devices, x, count)
				}
				seen[x] = true
			}
			p2 := pod(nil, map[string]string{AnnotationGPUDevices: FormatDevices(d)})
			if d2, ok := PodDevices(p2, int32(n), int(count)); !ok || !slices.Equal(d, d2) {
				t.Fatalf("%q read as %v, written as %q, read back as %v", devices, d, FormatDevices(d), d2)
			}
		}
		if u, ok := PodCPUUsage(p); ok && !(u >= 0 && u <= 64) {
			t.Fatalf("CPU usage %q read as %v", usage, u)
		}
		if u := PodUsage(p); math.IsNaN(u) || u < 0 {
			t.Fatalf("usage %v", u)
		}
		_ = PodQoS(p)
	})
}
