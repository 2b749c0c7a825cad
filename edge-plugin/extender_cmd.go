package edgeplugin

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/kubefmt"
)

// This file runs the extender as a server: `edge-scheduler extender`
// (NewExtenderCommand), StartExtenderServer for tests and embedding programs,
// and InformerSource, the production ClusterSource.

// InformerSource is a ClusterSource backed by client-go informers: all
// nodes, and the pods assigned to a node that are not finished (field
// selector spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed),
// indexed by node. Reads are from the informers' memory only.
type InformerSource struct {
	nodes, pods cache.SharedIndexInformer
	factories   []informers.SharedInformerFactory
}

const podNodeIndex = "edgesched.io/node-name"

// NewInformerSource prepares the informers; Start runs them.
func NewInformerSource(client kubernetes.Interface) (*InformerSource, error) {
	nf := informers.NewSharedInformerFactory(client, 0)
	pf := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "spec.nodeName!=,status.phase!=" + string(v1.PodSucceeded) + ",status.phase!=" + string(v1.PodFailed)
	}))
	s := &InformerSource{nodes: nf.Core().V1().Nodes().Informer(), pods: pf.Core().V1().Pods().Informer(), factories: []informers.SharedInformerFactory{nf, pf}}
	// Keep only what the policy reads: managed fields and image lists are
	// most of an object's memory.
	if err := s.nodes.SetTransform(func(o any) (any, error) {
		if n, ok := o.(*v1.Node); ok {
			n.ManagedFields, n.Status.Images = nil, nil
		}
		return o, nil
	}); err != nil {
		return nil, err
	}
	if err := s.pods.SetTransform(func(o any) (any, error) {
		if p, ok := o.(*v1.Pod); ok {
			p.ManagedFields = nil
		}
		return o, nil
	}); err != nil {
		return nil, err
	}
	if err := s.pods.AddIndexers(cache.Indexers{podNodeIndex: func(o any) ([]string, error) {
		if p, ok := o.(*v1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	return s, nil
}

// Start runs the informers until ctx ends (it does not wait for sync).
func (s *InformerSource) Start(ctx context.Context) {
	for _, f := range s.factories {
		f.Start(ctx.Done())
	}
}

// Synced implements ClusterSource.
func (s *InformerSource) Synced() bool { return s.nodes.HasSynced() && s.pods.HasSynced() }

// ListNodes implements ClusterSource.
func (s *InformerSource) ListNodes() []*v1.Node {
	objs := s.nodes.GetStore().List()
	out := make([]*v1.Node, 0, len(objs))
	for _, o := range objs {
		if n, ok := o.(*v1.Node); ok {
			out = append(out, n)
		}
	}
	return out
}

// GetNode implements ClusterSource.
func (s *InformerSource) GetNode(name string) (*v1.Node, bool) {
	o, ok, err := s.nodes.GetStore().GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	n, ok := o.(*v1.Node)
	return n, ok
}

// PodsOnNode implements ClusterSource.
func (s *InformerSource) PodsOnNode(name string) []*v1.Pod {
	objs, err := s.pods.GetIndexer().ByIndex(podNodeIndex, name)
	if err != nil {
		return nil
	}
	out := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
			out = append(out, p)
		}
	}
	return out
}

// ExtenderServerConfig configures StartExtenderServer.
type ExtenderServerConfig struct {
	// Listen is the TCP address ("127.0.0.1:8888"; port 0 picks one).
	Listen string
	// Args are the policy's (as EdgePolicy's plugin args).
	Args Args
	// Source is the cluster state; nil builds an InformerSource from
	// Kubeconfig (empty: in-cluster configuration).
	Source     ClusterSource
	Kubeconfig string
	// Options: URL prefix of the verbs and body cap.
	Options ExtenderOptions
	// TLSCertFile and TLSKeyFile serve HTTPS when both are set.
	TLSCertFile, TLSKeyFile string
	// ShutdownTimeout bounds the graceful shutdown (default 10s).
	ShutdownTimeout time.Duration
	// QPS and Burst limit the API client (the informers and the bind
	// verb's Bindings). Zero means DefaultExtenderQPS and
	// DefaultExtenderBurst: client-go's own defaults (5 and 10) held the
	// bind verb to 5 pods/s and made the scheduler's 5 s httpTimeout expire
	// under a saturated batch (test/e2e TestScale).
	QPS   float32
	Burst int
}

// The extender's API client limits, as the shipped scheduler
// configuration's clientConnection (deploy/edge-scheduler).
const (
	DefaultExtenderQPS   = 200
	DefaultExtenderBurst = 400
)

// ExtenderServer is a running extender.
type ExtenderServer struct {
	ext  *Extender
	addr string
	tls  bool
	done chan struct{}
	err  error
}

// StartExtenderServer loads the policy, starts the cluster source, binds
// cfg.Listen and serves until ctx ends (then shuts down gracefully). It
// returns once the listener is bound: Addr is usable at once. The
// informers sync in the background (/readyz reports it).
func StartExtenderServer(ctx context.Context, cfg ExtenderServerConfig) (*ExtenderServer, error) {
	if (cfg.TLSCertFile == "") != (cfg.TLSKeyFile == "") {
		return nil, errors.New("edgesched extender: --tls-cert and --tls-key go together")
	}
	var tlsConf *tls.Config
	if cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("edgesched extender: TLS key pair: %w", err)
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	args := cfg.Args
	// New has no scheduler handle (and so no API client) here: the
	// dependency graph's and the site topology's watches are started below
	// with the extender's own.
	refs, err := args.feedRefs()
	if err != nil {
		return nil, err
	}
	policyNS, policyName, err := args.policyRef()
	if err != nil {
		return nil, err
	}
	args.DependenciesConfigMap, args.TopologyConfigMap, args.PolicyConfigMap = "", "", ""
	pl, err := New(ctx, &args, nil) // validates, loads keys, target and model, watches the model file
	if err != nil {
		return nil, err
	}
	p := pl.(*EdgePolicy)
	var client kubernetes.Interface
	newClient := func() (kubernetes.Interface, error) {
		if client != nil {
			return client, nil
		}
		rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("edgesched extender: kubeconfig: %w", err)
		}
		rc.UserAgent = "edge-scheduler-extender"
		rc.QPS, rc.Burst = cmp.Or(cfg.QPS, DefaultExtenderQPS), cmp.Or(cfg.Burst, DefaultExtenderBurst)
		if client, err = kubernetes.NewForConfig(rc); err != nil {
			return nil, fmt.Errorf("edgesched extender: client: %w", err)
		}
		return client, nil
	}
	var feedClient kubernetes.Interface
	if refs.any() || policyName != "" {
		if feedClient, err = newClient(); err != nil {
			return nil, err
		}
	}
	src := cfg.Source
	if src == nil {
		client, err := newClient()
		if err != nil {
			return nil, err
		}
		is, err := NewInformerSource(client)
		if err != nil {
			return nil, fmt.Errorf("edgesched extender: informers: %w", err)
		}
		is.Start(ctx)
		src = is
	}
	opts := cfg.Options
	if opts.Client == nil {
		// the bind verb uses the extender's client when it has one (a
		// kubeconfig or in-cluster configuration was used)
		opts.Client = client
	}
	ext := NewExtender(p, src, opts)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("edgesched extender: listen: %w", err)
	}
	srv := &http.Server{
		Handler:           ext.Handler(),
		TLSConfig:         tlsConf,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	s := &ExtenderServer{ext: ext, addr: ln.Addr().String(), tls: tlsConf != nil, done: make(chan struct{})}
	serveErr := make(chan error, 1)
	go func() {
		var err error
		if tlsConf != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		serveErr <- err
	}()
	// The dependency graph's and site topology's watches run once the
	// listener is bound, until the server has stopped (their first lists
	// are waited for in the background: requests meanwhile score without
	// them).
	dctx, stopDeps := context.WithCancel(ctx)
	depsDone := make(chan struct{})
	if feedClient != nil {
		go func() { // owned by the server: waited for before Done closes
			defer close(depsDone)
			wait := func() {}
			if refs.any() {
				wait = p.startFeeds(dctx, feedClient, refs)
			}
			if policyName != "" {
				_, wp := startPolicySource(dctx, feedClient, p.policy, policyNS, policyName)
				defer wp()
			}
			wait()
		}()
	} else {
		close(depsDone)
	}
	timeout := cfg.ShutdownTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	go func() {
		defer close(s.done)
		defer func() {
			stopDeps()
			<-depsDone
		}()
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), timeout)
			err := srv.Shutdown(sctx)
			cancel()
			if serr := <-serveErr; err == nil {
				err = serr
			}
			s.err = err
		case s.err = <-serveErr:
			_ = srv.Close()
		}
	}()
	return s, nil
}

// Addr is the bound address (host:port).
func (s *ExtenderServer) Addr() string { return s.addr }

// URL is the urlPrefix for the KubeSchedulerConfiguration's extender.
func (s *ExtenderServer) URL() string {
	scheme := "http"
	if s.tls {
		scheme = "https"
	}
	return scheme + "://" + s.addr + s.ext.prefix
}

// Extender is the served handler.
func (s *ExtenderServer) Extender() *Extender { return s.ext }

// Done is closed once the server has stopped.
func (s *ExtenderServer) Done() <-chan struct{} { return s.done }

// Wait blocks until the server has stopped and returns why (nil after a
// clean shutdown).
func (s *ExtenderServer) Wait() error {
	<-s.done
	return s.err
}

// extenderFlags are `edge-scheduler extender`'s flags beyond the server
// configuration: the zero value is none given.
type extenderFlags struct {
	// modelKeys are --model-keys: files or directories of *.pub.
	modelKeys []string
	// namespace is --namespace, of a ConfigMap named without one.
	namespace string
	// the ConfigMap flags as given ([NAMESPACE/]NAME)
	dependencies, policy, topology string
	reload                         time.Duration
	qps                            float64
	verbosity                      int
}

// NewExtenderCommand is `edge-scheduler extender`: it serves until the
// command's context ends. Its errors are usage errors (package
// internal/cli) for a bad command line, failures otherwise.
func NewExtenderCommand() *cobra.Command { return newExtenderCommand(runExtender) }

// newExtenderCommand is the extender's command line; run serves.
func newExtenderCommand(run func(ctx context.Context, cfg ExtenderServerConfig, verbosity int) error) *cobra.Command {
	var (
		cfg ExtenderServerConfig
		f   extenderFlags
	)
	cmd := &cobra.Command{
		Use:   "extender --model FILE --model-keys KEYS [flags]",
		Short: "Serve EdgePolicy over the kube-scheduler HTTP extender protocol (K3s)",
		Long: `Serves EdgePolicy's decisions over the kube-scheduler HTTP extender protocol
(POST PREFIX/filter, PREFIX/prioritize and PREFIX/bind; node names with
nodeCacheCapable: true, the Node objects from its informer cache, or full Node
objects with false), for schedulers that cannot load the plugin,
such as K3s's embedded kube-scheduler. Also serves /healthz, /readyz (node and
pod informers synced) and /metrics. See docs/edge-plugin.md, "Extender mode".`,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cli.Usagef("unexpected argument %q", args[0])
			}
			if err := f.apply(&cfg); err != nil {
				return err
			}
			return run(cmd.Context(), cfg, f.verbosity)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:8888", "address to serve the extender on (host:port)")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig for the node and pod informers (empty: in-cluster service account)")
	fs.StringVar(&cfg.Args.ModelPath, "model", "", "signed int8 model artifact (.esa) to load and watch (required)")
	fs.StringSliceVar(&f.modelKeys, "model-keys", nil, "trusted model-signing public keys: files or directories of *.pub, comma-separated or repeated (required; the plugin's publicKeys)")
	fs.StringVar(&cfg.Args.TargetWorkload, "target-workload", DefaultTargetWorkload, "typical-pod distribution for the fragmentation features (openb:NAME or a CSV path)")
	fs.Float64Var(&cfg.Args.TargetThreshold, "target-threshold", DefaultTargetThreshold, "popularity share kept in the target workload, in (0, 1]")
	fs.DurationVar(&f.reload, "reload-interval", DefaultReloadInterval, "how often the model file is checked (1s..1h)")
	fs.StringVar(&cfg.Args.TelemetryMaxAge, "telemetry-max-age", DefaultTelemetryMaxAge.String(), "staleness bound of the nodes' edgesched.io/telemetry annotations (10s..1h); older summaries fall back to the usage model")
	fs.StringVar(&f.namespace, "namespace", kubefmt.DefaultNamespace, "namespace of a ConfigMap named without one")
	fs.StringVar(&f.dependencies, "dependencies-configmap", "", "[NAMESPACE/]NAME of the site's service dependency graph ConfigMap (the plugin's dependenciesConfigMap; empty: none)")
	fs.StringVar(&f.policy, "policy-configmap", "", "[NAMESPACE/]NAME of the scheduling policy ConfigMap (the plugin's policyConfigMap; empty: no policy; docs/policy-language.md)")
	fs.StringVar(&f.topology, "topology-configmap", "", "[NAMESPACE/]NAME of the site topology ConfigMap: carbon zones and RTTs (the plugin's topologyConfigMap; empty: defaults)")
	fs.StringVar(&cfg.Options.Prefix, "prefix", "", "URL path prefix of the verbs (the verbs are PREFIX/filter and PREFIX/prioritize)")
	fs.Int64Var(&cfg.Options.MaxBodyBytes, "max-body-bytes", DefaultMaxBodyBytes, "largest request body accepted")
	fs.DurationVar(&cfg.Options.BindWait, "bind-wait", DefaultBindWait, "how long a filter call for a GPU pod (or a pod a scheduling policy applies to) waits for the bindings of pods prioritized before it (negative: no wait)")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert", "", "serve HTTPS with this certificate (PEM; with --tls-key)")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key", "", "private key of --tls-cert (PEM)")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "how long to let in-flight calls finish on SIGTERM")
	fs.Float64Var(&f.qps, "kube-api-qps", DefaultExtenderQPS, "API requests per second of the extender's client (informers and bindings)")
	fs.IntVar(&cfg.Burst, "kube-api-burst", DefaultExtenderBurst, "API request burst of the extender's client")
	fs.IntVarP(&f.verbosity, "v", "v", 0, "log verbosity (klog)")
	cli.DeprecatedAlias(fs, "keys", "model-keys")
	fs.Bool("version", false, "print the version, commit and build date and exit")
	return cmd
}

// apply checks the flags and completes cfg with them.
func (f *extenderFlags) apply(cfg *ExtenderServerConfig) error {
	if f.qps <= 0 || cfg.Burst <= 0 {
		return cli.Usagef("--kube-api-qps and --kube-api-burst must be positive")
	}
	cfg.QPS = float32(f.qps)
	if cfg.Args.ModelPath == "" {
		return cli.Usagef("--model is required")
	}
	if len(f.modelKeys) == 0 {
		return cli.Usagef("--model-keys is required (models are only accepted signed)")
	}
	cfg.Args.PublicKeys = f.modelKeys
	cfg.Args.ReloadInterval = f.reload.String()
	// the plugin's args name every ConfigMap NAMESPACE/NAME
	for _, r := range []struct {
		flag, ref string
		arg       *string
	}{{"--dependencies-configmap", f.dependencies, &cfg.Args.DependenciesConfigMap}, {"--policy-configmap", f.policy, &cfg.Args.PolicyConfigMap},
		{"--topology-configmap", f.topology, &cfg.Args.TopologyConfigMap}} {
		if r.ref == "" {
			continue
		}
		ns, name, err := kubefmt.ParseConfigMapRef(r.ref, f.namespace)
		if err != nil {
			return cli.Usagef("%s: %w", r.flag, err)
		}
		*r.arg = ns + "/" + name
	}
	return nil
}

// runExtender serves cfg until ctx ends.
func runExtender(ctx context.Context, cfg ExtenderServerConfig, verbosity int) error {
	kfs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(kfs)
	_ = kfs.Set("v", strconv.Itoa(verbosity))
	defer klog.Flush()

	s, err := StartExtenderServer(ctx, cfg)
	if err != nil {
		return err
	}
	klog.InfoS("EdgePolicy extender serving", "url", s.URL(), "filter", s.ext.FilterPath(), "prioritize", s.ext.PrioritizePath())
	if err := s.Wait(); err != nil {
		return err
	}
	klog.InfoS("EdgePolicy extender stopped")
	return nil
}
