package schedcmd

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
)

// reviewer is a fake API server's TokenReviews and SubjectAccessReviews:
// tokens maps a token to its user; allowed is the users that may GET
// /metrics. It counts the reviews asked. (A unit test's fake: the e2e
// tests scrape /metrics of the real binary through a real API server.)
type reviewer struct {
	tokens       map[string]string
	allowed      map[string]bool
	tokenReviews atomic.Int32
	accessChecks atomic.Int32
}

func (rv *reviewer) client() *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		rv.tokenReviews.Add(1)
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		if tr.Spec.Token == "broken" {
			return true, nil, errors.New("connection refused")
		}
		user, ok := rv.tokens[tr.Spec.Token]
		tr.Status = authnv1.TokenReviewStatus{Authenticated: ok, User: authnv1.UserInfo{Username: user, Groups: []string{"system:authenticated"}}}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		rv.accessChecks.Add(1)
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
		na := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = na != nil && na.Verb == "get" && na.Path == "/metrics" && rv.allowed[sar.Spec.User]
		return true, sar, nil
	})
	return cs
}

// TestEndpointsGuard: /metrics answers only an authenticated user the API
// server allows to GET it; health paths answer anyone; reviews are reused
// for reviewTTL and asked again after it.
func TestEndpointsGuard(t *testing.T) {
	rv := &reviewer{tokens: map[string]string{"admin-token": "admin", "viewer-token": "viewer"}, allowed: map[string]bool{"admin": true}}
	cs := rv.client()
	now := time.Unix(1_700_000_000, 0)
	ep := &endpoints{authn: cs, authz: cs, logger: klog.Background(), now: func() time.Time { return now }}
	h := ep.handler()
	get := func(path, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	for _, tc := range []struct {
		name, path, token string
		want              int
	}{
		{"no token", "/metrics", "", http.StatusUnauthorized},
		{"unknown token", "/metrics", "made-up", http.StatusUnauthorized},
		{"review fails", "/metrics", "broken", http.StatusUnauthorized},
		{"user not allowed", "/metrics", "viewer-token", http.StatusForbidden},
		{"user allowed", "/metrics", "admin-token", http.StatusOK},
		{"livez for anyone", "/livez", "", http.StatusOK},
		{"readyz for anyone", "/readyz", "", http.StatusOK},
		{"healthz for anyone", "/healthz", "", http.StatusOK},
		{"no profiling unless enabled", "/debug/pprof/", "admin-token", http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if w := get(tc.path, tc.token); w.Code != tc.want {
				t.Fatalf("GET %s: %d %s, want %d", tc.path, w.Code, w.Body.String(), tc.want)
			}
		})
	}
	if body := get("/metrics", "admin-token").Body.String(); !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics is not kube's legacy registry (no go_goroutines):\n%.300s", body)
	}
	// the allowed admin was reviewed once (two GETs): the second answer
	// came from the cache
	asked := rv.tokenReviews.Load()
	get("/metrics", "admin-token")
	if got := rv.tokenReviews.Load(); got != asked {
		t.Errorf("a cached token was reviewed again: %d -> %d TokenReviews", asked, got)
	}
	now = now.Add(reviewTTL + time.Second)
	get("/metrics", "admin-token")
	if got := rv.tokenReviews.Load(); got != asked+1 {
		t.Errorf("after the TTL: %d TokenReviews, want %d", got, asked+1)
	}
}

// TestHealthChecks: a failing check makes its path answer 500 and names
// itself; ?verbose lists every check.
func TestHealthChecks(t *testing.T) {
	var ready atomic.Bool
	ep := &endpoints{
		live: []check{{"ping", func() error { return nil }}},
		ready: []check{{"sched-handler-sync", func() error {
			if ready.Load() {
				return nil
			}
			return errors.New("not yet")
		}}},
		now: time.Now, logger: klog.Background(),
	}
	h := ep.handler()
	get := func(path string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		return w.Code, w.Body.String()
	}
	if code, body := get("/readyz"); code != http.StatusInternalServerError || !strings.Contains(body, "[-]sched-handler-sync failed: not yet") {
		t.Fatalf("/readyz before sync: %d %q", code, body)
	}
	if code, body := get("/livez"); code != http.StatusOK || body != "ok" {
		t.Fatalf("/livez: %d %q", code, body)
	}
	ready.Store(true)
	if code, body := get("/readyz?verbose"); code != http.StatusOK || !strings.Contains(body, "[+]sched-handler-sync ok") {
		t.Fatalf("/readyz?verbose after sync: %d %q", code, body)
	}
}

// TestServingCert: a self-signed certificate is written to --cert-dir
// and the same one is served after a restart; a cert file without its
// key is an error naming the problem.
func TestServingCert(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	first, err := servingCert("", "", dir)
	if err != nil {
		t.Fatal(err)
	}
	second, err := servingCert("", "", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Certificate[0], second.Certificate[0]) {
		t.Error("the certificate in --cert-dir was not reused")
	}
	fi, err := os.Stat(filepath.Join(dir, Name+".key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v, want mode 0600", fi, err)
	}
	if _, err := servingCert(filepath.Join(dir, Name+".crt"), filepath.Join(dir, "missing.key"), ""); err == nil || !strings.Contains(err.Error(), "serving certificate") {
		t.Errorf("missing key: %v", err)
	}
}

// TestStartSecure: the endpoints answer over TLS; a port in use is an
// error at start (the e2e harness retries another port on it).
func TestStartSecure(t *testing.T) {
	cert, err := servingCert("", "", "")
	if err != nil {
		t.Fatal(err)
	}
	ep := &endpoints{now: time.Now, logger: klog.Background()}
	s, err := startSecure("127.0.0.1:0", cert, ep.handler(), klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	addr := s.addr()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := hc.Get("https://" + addr + "/livez")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil {
		t.Fatalf("GET /livez: %d, TLS %v", resp.StatusCode, resp.TLS != nil)
	}
	if _, err := startSecure(addr, cert, ep.handler(), klog.Background()); !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("second listener on %s: %v, want address already in use", addr, err)
	}
	if err := s.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("still listening after Shutdown")
	}
}
