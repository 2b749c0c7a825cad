package schedcmd

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
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
	certutil "k8s.io/client-go/util/cert"
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
		if sar.Spec.User == "flaky" {
			return true, nil, errors.New("etcd timeout")
		}
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
	rv := &reviewer{tokens: map[string]string{"admin-token": "admin", "viewer-token": "viewer", "flaky-token": "flaky"}, allowed: map[string]bool{"admin": true}}
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
		{"access review fails", "/metrics", "flaky-token", http.StatusInternalServerError},
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
	// a failed review is not cached: the next request asks again
	checks := rv.accessChecks.Load()
	get("/metrics", "flaky-token")
	if got := rv.accessChecks.Load(); got != checks+1 {
		t.Errorf("a failed SubjectAccessReview was cached: %d -> %d", checks, got)
	}
	// the scheme's name is case-insensitive (RFC 7235)
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Authorization", "bearer admin-token")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Errorf("lower-case bearer: %d", w.Code)
	}
}

// TestReviewCacheFull: a full cache keeps its current answers (a flood of
// made-up tokens cannot evict a real client's) and makes room by
// dropping expired ones.
func TestReviewCacheFull(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	ep := &endpoints{now: func() time.Time { return now }}
	key := func(i int) [32]byte { return sha256.Sum256([]byte(strconv.Itoa(i))) }
	for i := range reviewCacheSize {
		ep.store(key(i), http.StatusUnauthorized)
	}
	ep.store(key(-1), http.StatusOK)
	if _, ok := ep.cached(key(-1)); ok {
		t.Fatal("a full cache of current answers took another")
	}
	if s, ok := ep.cached(key(7)); !ok || s != http.StatusUnauthorized {
		t.Fatalf("an answer was evicted: %d %v", s, ok)
	}
	now = now.Add(reviewTTL)
	if _, ok := ep.cached(key(7)); ok {
		t.Fatal("an expired answer was served")
	}
	ep.store(key(-1), http.StatusOK)
	if s, ok := ep.cached(key(-1)); !ok || s != http.StatusOK || len(ep.cache) != 1 {
		t.Fatalf("after expiry: %d %v, %d cached; want the new answer alone", s, ok, len(ep.cache))
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

// TestSelfSignedCert: a self-signed certificate is written to --cert-dir
// (key mode 0600, no temporary files left) and the same one is served
// after a restart; a damaged pair is an error that says how to recover.
func TestSelfSignedCert(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	first, err := newCertSource("", "", dir, klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	second, err := newCertSource("", "", dir, klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	c1, _ := first.GetCertificate(nil)
	c2, _ := second.GetCertificate(nil)
	if !bytes.Equal(c1.Certificate[0], c2.Certificate[0]) {
		t.Error("the certificate in --cert-dir was not reused")
	}
	fi, err := os.Stat(filepath.Join(dir, Name+".key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v, want mode 0600", fi, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("--cert-dir holds %d files, want the certificate and its key", len(ents))
	}
	// another key beside the certificate: refused, naming the files
	other := filepath.Join(t.TempDir(), "other")
	if _, err := newCertSource("", "", other, klog.Background()); err != nil {
		t.Fatal(err)
	}
	key, _ := os.ReadFile(filepath.Join(other, Name+".key"))
	if err := os.WriteFile(filepath.Join(dir, Name+".key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := newCertSource("", "", dir, klog.Background()); err == nil || !strings.Contains(err.Error(), "delete "+filepath.Join(dir, Name+".crt")) {
		t.Errorf("mismatched pair: %v", err)
	}
	if _, err := newCertSource(filepath.Join(dir, Name+".crt"), filepath.Join(dir, "missing.key"), "", klog.Background()); err == nil || !strings.Contains(err.Error(), "serving certificate") {
		t.Errorf("missing key: %v", err)
	}
}

// TestCertReload: a certificate given as files is reloaded when they
// change (checked at most every certReloadEvery); a pair caught
// half-written keeps the last good one.
func TestCertReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func(crt, key []byte) {
		t.Helper()
		if err := os.WriteFile(keyFile, key, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(certFile, crt, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pair := func(host string) ([]byte, []byte) {
		t.Helper()
		crt, key, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return crt, key
	}
	crtA, keyA := pair("a.example")
	write(crtA, keyA)
	cs, err := newCertSource(certFile, keyFile, "", klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	cs.now = func() time.Time { return now }
	cs.checked = now
	serves := func(want string) {
		t.Helper()
		c, err := cs.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		x, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(x.Subject.CommonName, want) {
			t.Fatalf("serves %q, want %s", x.Subject.CommonName, want)
		}
	}
	serves("a.example")
	crtB, keyB := pair("b.example")
	write(crtB, keyB)
	serves("a.example") // not checked again yet
	now = now.Add(certReloadEvery)
	serves("b.example")
	// a rotation caught half-written (the new key, the old certificate)
	crtC, _ := pair("c.example")
	write(crtC, keyB)
	now = now.Add(certReloadEvery)
	serves("b.example")
}

// TestStartSecure: the endpoints answer over TLS; a port in use is an
// error at start (the e2e harness retries another port on it).
func TestStartSecure(t *testing.T) {
	cert, err := newCertSource("", "", "", klog.Background())
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
