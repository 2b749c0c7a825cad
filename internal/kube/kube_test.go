package kube

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// request is what the test server saw.
type request struct {
	method, path, query, contentType, body string
}

// apiServer answers every request with reply (JSON) and records it. The
// real kube-apiserver is exercised by test/e2e (TestSiteLeader and
// TestAgentEndToEnd run the agent's clients against it); this checks the
// requests' shape and the error mapping.
type apiServer struct {
	mu     sync.Mutex
	seen   []request
	status int
	reply  any
}

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.seen = append(s.seen, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), string(b)})
	status, reply := s.status, s.reply
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(reply)
}

func (s *apiServer) last() request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[len(s.seen)-1]
}

func (s *apiServer) answer(status int, reply any) {
	s.mu.Lock()
	s.status, s.reply = status, reply
	s.mu.Unlock()
}

func newTestClients(t *testing.T) (*Clients, *apiServer) {
	t.Helper()
	s := &apiServer{status: http.StatusOK}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := NewForConfig(&rest.Config{Host: srv.URL, UserAgent: "kube-test"})
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

var (
	node  = &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	cm    = &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "ns"}}
	lease = &coordinationv1.Lease{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}, ObjectMeta: metav1.ObjectMeta{Name: "l1", Namespace: "ns"}}
)

// TestRequests: every call's verb, path, query and body, and the decoded
// reply.
func TestRequests(t *testing.T) {
	c, s := newTestClients(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		reply    any
		call     func() (string, error) // returns the decoded object's name
		want     request
		wantName string // of the decoded reply
	}{
		{"node get", node, func() (string, error) { n, err := c.Nodes().Get(ctx, "n1", metav1.GetOptions{}); return n.Name, err },
			request{method: "GET", path: "/api/v1/nodes/n1"}, "n1"},
		{"node list", &corev1.NodeList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NodeList"}, Items: []corev1.Node{*node}},
			func() (string, error) {
				l, err := c.Nodes().List(ctx, metav1.ListOptions{LabelSelector: "a=b"})
				if err != nil || len(l.Items) != 1 {
					return "", err
				}
				return l.Items[0].Name, err
			},
			request{method: "GET", path: "/api/v1/nodes", query: "labelSelector=a%3Db"}, "n1"},
		{"node patch", node, func() (string, error) {
			n, err := c.Nodes().Patch(ctx, "n1", types.MergePatchType, []byte(`{"metadata":{}}`), metav1.PatchOptions{FieldManager: "edge-agent"})
			return n.Name, err
		}, request{method: "PATCH", path: "/api/v1/nodes/n1", query: "fieldManager=edge-agent", contentType: "application/merge-patch+json", body: `{"metadata":{}}`}, "n1"},
		{"configmap create", cm, func() (string, error) {
			o, err := c.ConfigMaps("ns").Create(ctx, cm, metav1.CreateOptions{})
			return o.Name, err
		},
			request{method: "POST", path: "/api/v1/namespaces/ns/configmaps"}, "c1"},
		{"configmap update", cm, func() (string, error) {
			o, err := c.ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{})
			return o.Name, err
		},
			request{method: "PUT", path: "/api/v1/namespaces/ns/configmaps/c1"}, "c1"},
		{"configmap delete", &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusSuccess},
			func() (string, error) { return "c1", c.ConfigMaps("ns").Delete(ctx, "c1", metav1.DeleteOptions{}) },
			request{method: "DELETE", path: "/api/v1/namespaces/ns/configmaps/c1"}, "c1"},
		{"lease get", lease, func() (string, error) {
			l, err := c.Leases("ns").Get(ctx, "l1", metav1.GetOptions{})
			return l.Name, err
		},
			request{method: "GET", path: "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l1"}, "l1"},
		{"lease update", lease, func() (string, error) {
			l, err := c.Leases("ns").Update(ctx, lease, metav1.UpdateOptions{})
			return l.Name, err
		},
			request{method: "PUT", path: "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l1"}, "l1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.answer(http.StatusOK, tc.reply)
			name, err := tc.call()
			if err != nil {
				t.Fatal(err)
			}
			got := s.last()
			if got.method != tc.want.method || got.path != tc.want.path || got.query != tc.want.query || name != tc.wantName {
				t.Fatalf("sent %s %s?%s, decoded %q; want %s %s?%s", got.method, got.path, got.query, name, tc.want.method, tc.want.path, tc.want.query)
			}
			if tc.want.contentType != "" && (got.contentType != tc.want.contentType || got.body != tc.want.body) {
				t.Fatalf("body %q as %q, want %q as %q", got.body, got.contentType, tc.want.body, tc.want.contentType)
			}
		})
	}
}

// TestErrors: the apiserver's Status replies become client-go's API
// errors, which the ledger, the installer and the election test for.
func TestErrors(t *testing.T) {
	c, s := newTestClients(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		status int
		reason metav1.StatusReason
		is     func(error) bool
	}{
		{"not found", http.StatusNotFound, metav1.StatusReasonNotFound, apierrors.IsNotFound},
		{"conflict", http.StatusConflict, metav1.StatusReasonConflict, apierrors.IsConflict},
		{"already exists", http.StatusConflict, metav1.StatusReasonAlreadyExists, apierrors.IsAlreadyExists},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.answer(tc.status, &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
				Reason: tc.reason, Code: int32(tc.status), Message: "test"})
			_, err := c.Leases("ns").Update(ctx, lease, metav1.UpdateOptions{})
			if !tc.is(err) {
				t.Fatalf("err = %v, want reason %s", err, tc.reason)
			}
		})
	}
}

// TestWatch: a watch request and the decoded event stream.
func TestWatch(t *testing.T) {
	var gotQuery string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotQuery = r.URL.Path + "?" + r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		pod := corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "shop"}}
		raw, _ := json.Marshal(pod)
		_ = json.NewEncoder(w).Encode(metav1.WatchEvent{Type: string(watch.Added), Object: runtime.RawExtension{Raw: raw}})
	}))
	defer srv.Close()
	c, err := NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	sec := int64(30)
	w, err := c.Pods("shop").Watch(context.Background(), metav1.ListOptions{ResourceVersion: "7", TimeoutSeconds: &sec})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		if p, ok := ev.Object.(*corev1.Pod); ev.Type != watch.Added || !ok || p.Name != "p1" {
			t.Fatalf("event %v %T %v", ev.Type, ev.Object, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}
	if gotQuery != "/api/v1/namespaces/shop/pods?resourceVersion=7&timeout=30s&timeoutSeconds=30&watch=true" {
		t.Fatalf("watch request %s", gotQuery)
	}
}

func TestNewForConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		rc   *rest.Config
	}{
		{"nil", nil},
		{"QPS without burst", &rest.Config{Host: "https://127.0.0.1:1", QPS: 5}},
		{"bad TLS file", &rest.Config{Host: "https://127.0.0.1:1", TLSClientConfig: rest.TLSClientConfig{CAFile: "/nonexistent/ca.crt"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewForConfig(tc.rc); !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
		})
	}
}
