//go:build unix

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options configures Start. The zero value is a working configuration;
// every zero field takes the default its comment names.
type Options struct {
	// ReadyTimeout bounds the start of kine and kube-apiserver (until
	// /readyz answers 200). Zero means 90 s.
	ReadyTimeout time.Duration
	// StopGrace is the time between SIGTERM and SIGKILL at cleanup. Zero
	// means DefaultStopGrace.
	StopGrace time.Duration
	// Token is the bearer token of the admin user (group system:masters).
	// Empty means a random token.
	Token string
	// ServiceClusterIPRange is kube-apiserver's --service-cluster-ip-range.
	// Empty means 10.96.0.0/12.
	ServiceClusterIPRange string
	// KineArgs are appended to kine's flags.
	KineArgs []string
	// APIServerArgs are appended to kube-apiserver's flags (a repeated flag
	// overrides the harness's value).
	APIServerArgs []string
	// QPS and Burst of the returned client. Zero means 200 and 400 (client-go's
	// defaults, 5 and 10, would throttle node registration).
	QPS   float32
	Burst int
}

// DefaultOptions returns the zero Options with its defaults filled in.
func DefaultOptions() Options {
	var o Options
	o.setDefaults()
	return o
}

func (o *Options) setDefaults() {
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 90 * time.Second
	}
	if o.StopGrace == 0 {
		o.StopGrace = DefaultStopGrace
	}
	if o.ServiceClusterIPRange == "" {
		o.ServiceClusterIPRange = "10.96.0.0/12"
	}
	if o.QPS == 0 {
		o.QPS = 200
	}
	if o.Burst == 0 {
		o.Burst = 400
	}
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	var errs []error
	if o.ReadyTimeout < 0 {
		errs = append(errs, fmt.Errorf("ReadyTimeout %s is negative", o.ReadyTimeout))
	}
	if o.StopGrace < 0 {
		errs = append(errs, fmt.Errorf("StopGrace %s is negative", o.StopGrace))
	}
	if strings.ContainsAny(o.Token, ",\n\r\" ") {
		errs = append(errs, errors.New("Token must not contain commas, quotes, spaces or newlines (it goes into a token CSV file)"))
	}
	if o.ServiceClusterIPRange != "" {
		if _, _, err := net.ParseCIDR(o.ServiceClusterIPRange); err != nil {
			errs = append(errs, fmt.Errorf("ServiceClusterIPRange: %v", err))
		}
	}
	if o.QPS < 0 || o.Burst < 0 {
		errs = append(errs, errors.New("QPS and Burst must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("e2e options: %w", err)
	}
	return nil
}

// ControlPlane is a running kine + kube-apiserver pair on loopback. Its
// processes stop when the test that started it ends.
type ControlPlane struct {
	// Dir is the temporary directory holding the SQLite database, keys,
	// certificates, the kubeconfig and the process logs.
	Dir string
	// URL is the apiserver's https address on 127.0.0.1.
	URL string
	// Token is the admin bearer token (group system:masters).
	Token string
	// KineEndpoint is the etcd address kine serves (http://127.0.0.1:PORT).
	KineEndpoint string
	// Config is a client configuration for the admin user; TLS is not
	// verified (the serving certificate is self-signed, on loopback).
	Config *rest.Config
	// Client is a clientset built from Config.
	Client kubernetes.Interface

	Kine      *Process
	APIServer *Process

	opts           Options
	kubeconfigOnce sync.Once
	kubeconfig     string
	kubeconfigErr  error
}

// Start builds (or reuses) kine and kube-apiserver, starts them on free
// loopback ports with state in t.TempDir(), waits until the apiserver's
// /readyz answers 200, and returns the running control plane. It skips t
// when the programs cannot be built here and fails t when start-up fails.
func Start(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	skipIfUnavailable(t)
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	opts.setDefaults()
	bins := Build(t, KinePkg, APIServerPkg)
	if opts.Token == "" {
		opts.Token = randomHex(16)
	}
	cp := &ControlPlane{Dir: t.TempDir(), Token: opts.Token, opts: opts}
	if err := cp.writeSecrets(); err != nil {
		t.Fatalf("e2e: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.ReadyTimeout)
	defer cancel()
	start := time.Now()
	const attempts = 3
	for attempt := 1; ; attempt++ {
		err := cp.start(ctx, t, attempt, bins[0], bins[1])
		if err == nil {
			break
		}
		bindErr := errors.Is(err, errAddrInUse)
		if cp.Kine != nil {
			cp.Kine.Stop()
		}
		if cp.APIServer != nil {
			cp.APIServer.Stop()
		}
		if !bindErr || attempt == attempts || ctx.Err() != nil {
			t.Fatalf("e2e: control plane did not start: %v", err)
		}
		t.Logf("e2e: %v; retrying with other ports", err)
	}
	t.Logf("e2e: control plane ready at %s in %s (kine %s)", cp.URL, time.Since(start).Round(time.Millisecond), cp.KineEndpoint)

	cp.Config = &rest.Config{
		Host:            cp.URL,
		BearerToken:     cp.Token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             opts.QPS,
		Burst:           opts.Burst,
		UserAgent:       "edgesched-e2e",
	}
	client, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatalf("e2e: client: %v", err)
	}
	cp.Client = client
	return cp
}

var errAddrInUse = errors.New("address already in use")

// start runs one attempt: kine, then kube-apiserver, each on fresh ports.
func (cp *ControlPlane) start(ctx context.Context, t testing.TB, attempt int, kineBin, apiBin string) error {
	kinePort, err := FreePort()
	if err != nil {
		return err
	}
	suffix := ""
	if attempt > 1 {
		suffix = "-" + strconv.Itoa(attempt)
	}
	dbDir := filepath.Join(cp.Dir, "kine"+suffix)
	if err := os.MkdirAll(dbDir, 0o755); err != nil {
		return err
	}
	kineAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(kinePort))
	kineArgs := append([]string{
		"--endpoint", "sqlite://" + filepath.Join(dbDir, "state.db") + "?_journal=WAL&cache=shared",
		"--listen-address", kineAddr,
		"--metrics-bind-address", "0", // "0" disables kine's metrics listener (default :8080 on all interfaces)
	}, cp.opts.KineArgs...)
	cp.Kine, err = StartProcess(t, cp.Dir, "kine"+suffix, cp.opts.StopGrace, kineBin, kineArgs...)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, cp.Kine, "kine to listen", func(ctx context.Context) (bool, error) {
		d := net.Dialer{Timeout: time.Second}
		c, err := d.DialContext(ctx, "tcp", kineAddr)
		if err != nil {
			return false, nil
		}
		c.Close()
		return true, nil
	}); err != nil {
		return err
	}
	cp.KineEndpoint = "http://" + kineAddr

	apiPort, err := FreePort()
	if err != nil {
		return err
	}
	cp.URL = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort))
	apiArgs := append([]string{
		"--etcd-servers=" + cp.KineEndpoint,
		"--storage-backend=etcd3",
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + filepath.Join(cp.Dir, "certs"),
		"--service-account-key-file=" + filepath.Join(cp.Dir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(cp.Dir, "sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--token-auth-file=" + filepath.Join(cp.Dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=" + cp.opts.ServiceClusterIPRange,
		// No endpoints for the "kubernetes" service: a loopback address is
		// not a valid endpoint, and nothing in the tests needs it.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}, cp.opts.APIServerArgs...)
	cp.APIServer, err = StartProcess(t, cp.Dir, "kube-apiserver"+suffix, cp.opts.StopGrace, apiBin, apiArgs...)
	if err != nil {
		return err
	}
	hc := insecureHTTPClient()
	return waitFor(ctx, cp.APIServer, "kube-apiserver /readyz", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, hc, cp.URL+"/readyz", cp.Token), nil
	})
}

// writeSecrets writes the service-account key pair and the token file.
func (cp *ControlPlane) writeSecrets() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"sa.pub":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv": []byte(cp.Token + ",admin,admin,system:masters\n"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(cp.Dir, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// Kubeconfig writes (once) a kubeconfig file for the admin token in Dir
// and returns its path, for programs such as kube-scheduler.
func (cp *ControlPlane) Kubeconfig() (string, error) {
	cp.kubeconfigOnce.Do(func() {
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cp.URL, InsecureSkipTLSVerify: true}
		cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cp.Token}
		cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "admin"}
		cfg.CurrentContext = "e2e"
		path := filepath.Join(cp.Dir, "kubeconfig")
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			cp.kubeconfigErr = fmt.Errorf("write kubeconfig: %w", err)
			return
		}
		cp.kubeconfig = path
	})
	return cp.kubeconfig, cp.kubeconfigErr
}

// SchedulerOptions configures StartScheduler. The zero value runs the
// stock kube-scheduler with its default profile ("default-scheduler").
type SchedulerOptions struct {
	// Binary is the scheduler program. Empty means the stock kube-scheduler
	// from k8s.io/kubernetes (built with Build and cached). Any program
	// with kube-scheduler's flags works, e.g. edge-scheduler.
	Binary string
	// Name is used for the log file and messages. Empty means the base name
	// of Binary.
	Name string
	// ConfigFile is passed as --config (a KubeSchedulerConfiguration); its
	// clientConnection.kubeconfig and leaderElection, if set, win over the
	// flags below. Empty means none.
	ConfigFile string
	// Args are appended to the flags.
	Args []string
	// Verbosity is klog's -v. Zero means 2, which logs every binding.
	Verbosity int
	// ReadyTimeout bounds the wait for the scheduler's /readyz. Zero means 60 s.
	ReadyTimeout time.Duration
}

// StartScheduler starts a scheduler against the control plane with a
// kubeconfig file for the admin token, leader election off, and its
// secure port on a free 127.0.0.1 port (the returned Process's URL), and
// waits until its /readyz answers 200 (its informers have synced). It
// fails t if the scheduler does not become ready.
func (cp *ControlPlane) StartScheduler(t testing.TB, o SchedulerOptions) *Process {
	t.Helper()
	if o.Binary == "" {
		o.Binary = Build(t, SchedulerPkg)[0]
	}
	if o.Name == "" {
		o.Name = filepath.Base(o.Binary)
	}
	if o.Verbosity == 0 {
		o.Verbosity = 2
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 60 * time.Second
	}
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.ReadyTimeout)
	defer cancel()
	hc := insecureHTTPClient()
	for attempt := 1; ; attempt++ {
		port, err := FreePort()
		if err != nil {
			t.Fatalf("e2e: %v", err)
		}
		name := o.Name
		if attempt > 1 {
			name += "-" + strconv.Itoa(attempt)
		}
		args := []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			"--cert-dir=" + filepath.Join(cp.Dir, name+"-certs"),
			"-v=" + strconv.Itoa(o.Verbosity),
		}
		if o.ConfigFile != "" {
			args = append(args, "--config="+o.ConfigFile)
		}
		args = append(args, o.Args...)
		p, err := StartProcess(t, cp.Dir, name, cp.opts.StopGrace, o.Binary, args...)
		if err != nil {
			t.Fatalf("e2e: %v", err)
		}
		p.URL = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		start := time.Now()
		err = waitFor(ctx, p, name+" /readyz", func(ctx context.Context) (bool, error) {
			return httpOK(ctx, hc, p.URL+"/readyz", ""), nil
		})
		if err == nil {
			t.Logf("e2e: %s ready in %s", name, time.Since(start).Round(time.Millisecond))
			return p
		}
		p.Stop()
		if !errors.Is(err, errAddrInUse) || attempt == 3 || ctx.Err() != nil {
			t.Fatalf("e2e: %s did not start: %v", o.Name, err)
		}
		t.Logf("e2e: %v; retrying with another port", err)
	}
}

// CreateNamespace creates a namespace and its "default" ServiceAccount
// (no controller-manager runs, and the ServiceAccount admission plugin
// rejects pods whose account is missing). Existing objects are fine.
func CreateNamespace(ctx context.Context, client kubernetes.Interface, name string) error {
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	_, err = client.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service account %s/default: %w", name, err)
	}
	return nil
}

// waitFor polls cond every 100 ms until it holds, ctx ends, or p exits.
// A process that exited after failing to bind reports errAddrInUse.
func waitFor(ctx context.Context, p *Process, what string, cond func(context.Context) (bool, error)) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-p.Done():
			_, err := p.Exited()
			tail := p.LogTail(4 << 10)
			if strings.Contains(tail, "address already in use") {
				return fmt.Errorf("%w: %v", errAddrInUse, err)
			}
			return fmt.Errorf("waiting for %s: %v; log tail:\n%s", what, err, tail)
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (log %s)", what, ctx.Err(), p.LogPath)
		case <-tick.C:
		}
	}
}

func insecureHTTPClient() *http.Client {
	return &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // self-signed, loopback only
			DisableKeepAlives: true,
		},
	}
}

func httpOK(ctx context.Context, hc *http.Client, url, token string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
