package schedcmd

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// The scheduler's HTTPS endpoints, as kube-scheduler serves them on its
// secure port: /livez, /readyz and /healthz for anyone; /metrics (and
// /debug/pprof with enableProfiling) for a client whose bearer token a
// TokenReview accepts and whom a SubjectAccessReview allows to GET the
// path (the system:kube-scheduler role does; so does cluster-admin).
// Client certificates are not read: Prometheus and the kubelet's probes
// use tokens or nothing.

// reviewTTL is how long a TokenReview or SubjectAccessReview answer is
// reused (kube-scheduler's delegated authentication and authorization
// cache theirs for 10 s); reviewCacheSize bounds the cache.
const (
	reviewTTL       = 10 * time.Second
	reviewCacheSize = 1024
)

// check is one named health check: nil is healthy.
type check struct {
	name string
	fn   func() error
}

// endpoints are the handlers of the secure port.
type endpoints struct {
	// live, ready: the checks of /livez (and /healthz) and /readyz
	live, ready []check
	// profiling serves /debug/pprof (the configuration's enableProfiling)
	profiling bool
	// authn, authz are the review clients; nil refuses every guarded path
	authn, authz kubernetes.Interface
	logger       klog.Logger
	now          func() time.Time

	mu    sync.Mutex
	cache map[[sha256.Size]byte]review
}

// review is a cached answer: allowed, or the status to refuse with.
type review struct {
	status  int
	expires time.Time
}

// handler is the endpoints' mux.
func (e *endpoints) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/livez", e.health(func() []check { return e.live }))
	mux.HandleFunc("/healthz", e.health(func() []check { return e.live }))
	mux.HandleFunc("/readyz", e.health(func() []check { return e.ready }))
	mux.Handle("/metrics", e.guard(legacyregistry.Handler()))
	if e.profiling {
		pp := http.NewServeMux()
		pp.HandleFunc("/debug/pprof/", pprof.Index)
		pp.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		pp.HandleFunc("/debug/pprof/profile", pprof.Profile)
		pp.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		pp.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.Handle("/debug/pprof/", e.guard(pp))
	}
	return mux
}

// health answers 200 "ok" when every check passes, 500 with the failing
// checks otherwise; ?verbose lists each check.
func (e *endpoints) health(checks func() []check) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		failed := false
		for _, c := range checks() {
			if err := c.fn(); err != nil {
				failed = true
				fmt.Fprintf(&b, "[-]%s failed: %v\n", c.name, err)
			} else {
				fmt.Fprintf(&b, "[+]%s ok\n", c.name)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		switch {
		case failed:
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, b.String(), "check failed\n")
		case r.URL.Query().Has("verbose"):
			fmt.Fprint(w, b.String(), "ok\n")
		default:
			fmt.Fprint(w, "ok")
		}
	}
}

// guard lets a request through to next when its bearer token is
// authenticated and the user may GET the path.
func (e *endpoints) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := e.authorize(r)
		if status != http.StatusOK {
			http.Error(w, http.StatusText(status), status)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authorize is the status a request gets: 200, 401 (no or a rejected
// token) or 403 (not allowed, or the reviews failed).
func (e *endpoints) authorize(r *http.Request) int {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	token = strings.TrimSpace(token)
	if !ok || token == "" || e.authn == nil || e.authz == nil {
		return http.StatusUnauthorized
	}
	verb := strings.ToLower(r.Method)
	key := sha256.Sum256([]byte(verb + " " + r.URL.Path + " " + token))
	now := e.now()
	e.mu.Lock()
	if c, ok := e.cache[key]; ok && now.Before(c.expires) {
		e.mu.Unlock()
		return c.status
	}
	e.mu.Unlock()
	status := e.review(r.Context(), token, verb, r.URL.Path)
	e.mu.Lock()
	if e.cache == nil || len(e.cache) >= reviewCacheSize {
		e.cache = make(map[[sha256.Size]byte]review)
	}
	e.cache[key] = review{status: status, expires: now.Add(reviewTTL)}
	e.mu.Unlock()
	return status
}

// review asks the API server who token is and whether they may do verb
// on path.
func (e *endpoints) review(ctx context.Context, token, verb, path string) int {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr, err := e.authn.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		e.logger.Error(err, "TokenReview failed", "path", path)
		return http.StatusUnauthorized
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized
	}
	u := tr.Status.User
	extra := make(map[string]authzv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := e.authz.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		e.logger.Error(err, "SubjectAccessReview failed", "path", path, "user", u.Username)
		return http.StatusForbidden
	}
	if !sar.Status.Allowed {
		e.logger.V(4).Info("Request forbidden", "path", path, "user", u.Username, "reason", sar.Status.Reason)
		return http.StatusForbidden
	}
	return http.StatusOK
}

// servingCert is the certificate the secure port presents: the files
// given, else a self-signed one for localhost and 127.0.0.1, kept in
// certDir (and reused from it) when that is set.
func servingCert(certFile, keyFile, certDir string) (tls.Certificate, error) {
	if certFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("serving certificate: %w", err)
		}
		return c, nil
	}
	var certPath, keyPath string
	if certDir != "" {
		certPath, keyPath = filepath.Join(certDir, Name+".crt"), filepath.Join(certDir, Name+".key")
		if c, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil {
			return c, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return tls.Certificate{}, fmt.Errorf("self-signed certificate in --cert-dir: %w", err)
		}
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed certificate: %w", err)
	}
	if certDir != "" {
		if err := os.MkdirAll(certDir, 0o700); err != nil {
			return tls.Certificate{}, fmt.Errorf("--cert-dir: %w", err)
		}
		if err := certutil.WriteCert(certPath, certPEM); err != nil {
			return tls.Certificate{}, fmt.Errorf("--cert-dir: %w", err)
		}
		if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
			return tls.Certificate{}, fmt.Errorf("--cert-dir: %w", err)
		}
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// secureServer listens on addr with cert and serves h until Shutdown.
type secureServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// addr is the address listened on.
func (s *secureServer) addr() string { return s.ln.Addr().String() }

// startSecure listens on addr (an address in use is an error now, not
// later) and serves h over TLS in a goroutine that Shutdown waits for.
func startSecure(addr string, cert tls.Certificate, h http.Handler, logger klog.Logger) (*secureServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("secure port: %w", err)
	}
	s := &secureServer{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       90 * time.Second,
			MaxHeaderBytes:    1 << 20,
			TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}},
		},
		ln:   ln,
		done: make(chan error, 1),
	}
	logger.Info("Serving securely", "address", ln.Addr().String())
	go func() {
		err := s.srv.ServeTLS(ln, "", "")
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return s, nil
}

// Shutdown stops the server, letting requests in flight finish for up to
// 5 s (kube-scheduler's shutdown timeout).
func (s *secureServer) Shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; err == nil {
		err = serr
	}
	return err
}

// hostPort joins a bind address and a port.
func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
