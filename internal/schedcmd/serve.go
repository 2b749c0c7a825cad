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

	"golang.org/x/sync/singleflight"
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
// path (e.g. a ClusterRole with nonResourceURLs ["/metrics"], verbs
// ["get"], or cluster-admin). Client certificates are not read:
// Prometheus and the kubelet's probes use tokens or nothing.

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

	mu     sync.Mutex
	cache  map[[sha256.Size]byte]review
	flight singleflight.Group
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

// authorize is the status a request gets: 200, 401 (no token, or one
// the API server does not authenticate), 403 (not allowed) or 500 (a
// review failed). Definite answers are cached for reviewTTL; concurrent
// requests with the same token and path share one review; a failed
// review is not cached.
func (e *endpoints) authorize(r *http.Request) int {
	h := r.Header.Get("Authorization")
	if len(h) < len("Bearer ") || !strings.EqualFold(h[:len("Bearer ")], "Bearer ") {
		return http.StatusUnauthorized
	}
	token := strings.TrimSpace(h[len("Bearer "):])
	if token == "" || e.authn == nil || e.authz == nil {
		return http.StatusUnauthorized
	}
	verb := strings.ToLower(r.Method)
	key := sha256.Sum256([]byte(verb + " " + r.URL.Path + " " + token))
	if status, ok := e.cached(key); ok {
		return status
	}
	v, _, _ := e.flight.Do(string(key[:]), func() (any, error) {
		// detached from the request: a client that hangs up does not
		// fail the review the others wait for
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
		defer cancel()
		status, definite := e.review(ctx, token, verb, r.URL.Path)
		if definite {
			e.store(key, status)
		}
		return status, nil
	})
	return v.(int)
}

// cached is the cached answer for key, if one is current.
func (e *endpoints) cached(key [sha256.Size]byte) (int, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.cache[key]
	if !ok || !e.now().Before(c.expires) {
		return 0, false
	}
	return c.status, true
}

// store caches status for key. A full cache first drops its expired
// answers; if none has expired, the answer is not cached (a flood of
// made-up tokens cannot evict the answers of real clients).
func (e *endpoints) store(key [sha256.Size]byte, status int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	if e.cache == nil {
		e.cache = make(map[[sha256.Size]byte]review)
	}
	if len(e.cache) >= reviewCacheSize {
		for k, c := range e.cache {
			if !now.Before(c.expires) {
				delete(e.cache, k)
			}
		}
		if len(e.cache) >= reviewCacheSize {
			return
		}
	}
	e.cache[key] = review{status: status, expires: now.Add(reviewTTL)}
}

// review asks the API server who token is and whether they may do verb
// on path: the status, and whether it is a definite answer (not a failed
// review).
func (e *endpoints) review(ctx context.Context, token, verb, path string) (int, bool) {
	tr, err := e.authn.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		e.logger.Error(err, "TokenReview failed", "path", path)
		return http.StatusUnauthorized, false
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, true
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
		return http.StatusInternalServerError, false
	}
	if !sar.Status.Allowed {
		e.logger.V(4).Info("Request forbidden", "path", path, "user", u.Username, "reason", sar.Status.Reason)
		return http.StatusForbidden, true
	}
	return http.StatusOK, true
}

// certReloadEvery is how often the serving certificate's files are
// checked for a new version (a rotated Secret or cert-manager).
const certReloadEvery = 10 * time.Second

// certSource is the certificate the secure port presents. With files
// given (--tls-cert-file) it reloads them when they change, checked at
// most every certReloadEvery on a handshake; a pair that fails to load
// keeps the last good one (and is logged). Otherwise it is a self-signed
// certificate for localhost and 127.0.0.1, kept in a directory (and
// reused from it) when one is set.
type certSource struct {
	certFile, keyFile string
	logger            klog.Logger
	now               func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string // the files' digest when loaded
	checked time.Time
}

// newCertSource loads the first certificate (an error names the problem).
func newCertSource(certFile, keyFile, certDir string, logger klog.Logger) (*certSource, error) {
	cs := &certSource{certFile: certFile, keyFile: keyFile, logger: logger, now: time.Now}
	if certFile == "" {
		c, err := selfSigned(certDir)
		if err != nil {
			return nil, err
		}
		cs.cert = &c
		return cs, nil
	}
	stamp, err := fileStamp(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	cs.cert, cs.stamp, cs.checked = &c, stamp, cs.now()
	return cs, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (cs *certSource) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.certFile == "" || cs.now().Sub(cs.checked) < certReloadEvery {
		return cs.cert, nil
	}
	cs.checked = cs.now()
	stamp, err := fileStamp(cs.certFile, cs.keyFile)
	if err != nil || stamp == cs.stamp {
		return cs.cert, nil
	}
	c, err := tls.LoadX509KeyPair(cs.certFile, cs.keyFile)
	if err != nil {
		// a rotation caught half-written: keep serving the last good pair
		cs.logger.Error(err, "Serving certificate not reloaded", "cert", cs.certFile)
		return cs.cert, nil
	}
	cs.cert, cs.stamp = &c, stamp
	cs.logger.Info("Serving certificate reloaded", "cert", cs.certFile)
	return cs.cert, nil
}

// maxCertFileBytes caps each certificate or key file read.
const maxCertFileBytes = 1 << 20

// fileStamp is a digest of the files' contents (read whole: they are
// small, and a modification time may not change within a second).
func fileStamp(files ...string) (string, error) {
	h := sha256.New()
	for _, f := range files {
		data, err := readCapped(f, maxCertFileBytes)
		if err != nil {
			return "", err
		}
		h.Write(data)
		h.Write([]byte{0})
	}
	return string(h.Sum(nil)), nil
}

// selfSigned is a self-signed certificate for localhost and 127.0.0.1:
// the one in certDir when it holds one, else a new one, written there
// (key, then certificate, each through a temporary file renamed into
// place, so a crash leaves no pair half-written) when certDir is set.
func selfSigned(certDir string) (tls.Certificate, error) {
	var certPath, keyPath string
	if certDir != "" {
		certPath, keyPath = filepath.Join(certDir, Name+".crt"), filepath.Join(certDir, Name+".key")
		c, err := tls.LoadX509KeyPair(certPath, keyPath)
		switch {
		case err == nil:
			return c, nil
		case !errors.Is(err, os.ErrNotExist):
			return tls.Certificate{}, fmt.Errorf("self-signed certificate in --cert-dir: %w (delete %s and %s to make a new one)", err, certPath, keyPath)
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
		// the key first: a certificate on disk always has its key
		for _, f := range []struct {
			path string
			data []byte
		}{{keyPath, keyPEM}, {certPath, certPEM}} {
			if err := writeReplace(f.path, f.data); err != nil {
				return tls.Certificate{}, fmt.Errorf("--cert-dir: %w", err)
			}
		}
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// writeReplace writes data to path through a new 0600 temporary file in
// the same directory renamed over it (a symlink at path is replaced, not
// followed).
func writeReplace(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
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
func startSecure(addr string, certs *certSource, h http.Handler, logger klog.Logger) (*secureServer, error) {
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
			TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate},
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
