package kubeclientset

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

// TestWrap: the adapter reaches the clientset's objects and passes on
// whether it serves watch-list streams.
func TestWrap(t *testing.T) {
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	w := Wrap(cs)
	ctx := context.Background()
	if n, err := w.Nodes().Get(ctx, "n1", metav1.GetOptions{}); err != nil || n.Name != "n1" {
		t.Fatalf("node %v, %v", n, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "ns"}}
	if _, err := w.ConfigMaps("ns").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("ns").Get(ctx, "c1", metav1.GetOptions{}); err != nil {
		t.Fatalf("the ConfigMap written through the adapter: %v", err)
	}
	if !w.IsWatchListSemanticsUnSupported() {
		t.Fatal("the fake clientset's 'no watch-list' was not passed on")
	}
	real, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if Wrap(real).IsWatchListSemanticsUnSupported() {
		t.Fatal("a real clientset reported as unable to serve watch-list streams")
	}
}
