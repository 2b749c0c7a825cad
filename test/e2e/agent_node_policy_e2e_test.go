//go:build unix

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
)

// checkAgentOwnNode: with the chart installed, the agent's
// ServiceAccount, through a token bound to a pod on node own-1 (as the
// kubelet mounts it), may write own-1's telemetry and flows annotations
// and nothing else: not own-2's (RBAC alone allows it), not a label, not
// another annotation, not the spec; and a token bound to no pod (no node
// name in it) may change no Node. An administrator is not held to it.
func checkAgentOwnNode(ctx context.Context, t *testing.T, cp *ControlPlane) {
	for _, n := range []string{"own-1", "own-2"} {
		if _, err := cp.Client.CoreV1().Nodes().Create(ctx, NodeObject(sim.NodeSpec{Name: n, CPU: 4000, Memory: 8192}), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	no := false
	pod, err := cp.Client.CoreV1().Pods(chartNamespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-on-own-1"},
		Spec: corev1.PodSpec{NodeName: "own-1", ServiceAccountName: "edgesched-agent", AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{Name: "agent", Image: "edge-agent:e2e"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := func(bound *authenticationv1.BoundObjectReference) kubernetes.Interface {
		t.Helper()
		exp := int64(3600)
		tok, err := cp.Client.CoreV1().ServiceAccounts(chartNamespace).CreateToken(ctx, "edgesched-agent",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp, BoundObjectRef: bound}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := kubernetes.NewForConfig(&rest.Config{Host: cp.URL, BearerToken: tok.Status.Token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	agent := token(&authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID})
	unbound := token(nil)
	patch := func(c kubernetes.Interface, node string, meta map[string]any, spec map[string]any) error {
		body := map[string]any{"metadata": meta}
		if spec != nil {
			body["spec"] = spec
		}
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, raw, metav1.PatchOptions{})
		return err
	}
	annotation := func(k, v string) map[string]any { return map[string]any{"annotations": map[string]string{k: v}} }
	// the policy takes effect once the apiserver has compiled it
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return apierrors.IsInvalid(patch(agent, "own-2", annotation(kubefmt.AnnotationTelemetry, "{}"), nil)) ||
			apierrors.IsForbidden(patch(agent, "own-2", annotation(kubefmt.AnnotationTelemetry, "{}"), nil)), nil
	}); err != nil {
		t.Fatalf("the agent's write to another node was never refused: %v", err)
	}
	for _, tc := range []struct {
		name       string
		client     kubernetes.Interface
		node       string
		meta, spec map[string]any
		refused    string // "": allowed
	}{
		{"own telemetry", agent, "own-1", annotation(kubefmt.AnnotationTelemetry, `{"v":1}`), nil, ""},
		{"own flows", agent, "own-1", annotation(kubefmt.FlowsAnnotation, `{"v":1}`), nil, ""},
		{"another node's telemetry", agent, "own-2", annotation(kubefmt.AnnotationTelemetry, `{"v":1}`), nil, "may change only its own Node, not own-2"},
		{"own label", agent, "own-1", map[string]any{"labels": map[string]string{"topology.kubernetes.io/zone": "elsewhere"}}, nil, "may change only its Node's edgesched.io/telemetry"},
		{"own other annotation", agent, "own-1", annotation("edgesched.io/watts-per-core", "0.1"), nil, "may change only its Node's edgesched.io/telemetry"},
		{"own spec", agent, "own-1", map[string]any{}, map[string]any{"unschedulable": true}, "may change only its Node's edgesched.io/telemetry"},
		{"own finalizer", agent, "own-1", map[string]any{"finalizers": []string{"example.com/hold"}}, nil, "may change only its Node's edgesched.io/telemetry"},
		{"a token bound to no pod", unbound, "own-1", annotation(kubefmt.AnnotationTelemetry, `{"v":2}`), nil, "only with a token bound to its pod"},
		{"an administrator's label", cp.Client, "own-1", map[string]any{"labels": map[string]string{"edgesched.io/test": "admin"}}, nil, ""},
	} {
		err := patch(tc.client, tc.node, tc.meta, tc.spec)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%s: %v, want a refusal naming %q", tc.name, err, tc.refused)
		}
	}
	n, err := cp.Client.CoreV1().Nodes().Get(ctx, "own-1", metav1.GetOptions{})
	if err != nil || n.Annotations[kubefmt.AnnotationTelemetry] != `{"v":1}` || n.Labels["topology.kubernetes.io/zone"] == "elsewhere" || n.Spec.Unschedulable {
		t.Errorf("own-1 after the writes: annotations %v, labels %v, unschedulable %v (%v)", n.Annotations, n.Labels, n.Spec.Unschedulable, err)
	}
}
