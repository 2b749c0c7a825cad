package extender

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// This file runs the extender as a server: Start, which
// `edge-scheduler extender` (its command line is internal/schedcmd),
// tests and embedding programs call, and InformerSource, the production
// ClusterSource.

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

// Wait blocks until the informers Start started have stopped, after its
// ctx ended.
func (s *InformerSource) Wait() {
	for _, f := range s.factories {
		f.Shutdown()
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

// Config configures Start.
type Config struct {
	// Listen is the TCP address ("127.0.0.1:8888"; port 0 picks one).
	Listen string
	// Args are the policy's (as EdgePolicy's plugin args).
	Args edgeplugin.Args
	// Source is the cluster state; nil builds an InformerSource from
	// Kubeconfig (empty: in-cluster configuration).
	Source     ClusterSource
	Kubeconfig string
	// Options: URL prefix of the verbs and body cap.
	Options Options
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
	DefaultQPS   = 200
	DefaultBurst = 400
)

// Server is a running extender.
type Server struct {
	ext  *Extender
	addr string
	tls  bool
	done chan struct{}
	err  error
}

// Start loads the policy, starts the cluster source, binds
// cfg.Listen and serves until ctx ends (then shuts down gracefully). It
// returns once the listener is bound: Addr is usable at once. The
// informers sync in the background (/readyz reports it). Everything it
// starts runs under a context of its own: when Start fails (the address
// is taken, no API client), it stops what it had started (the model
// watch, the informers) before returning; Done closes once the server and
// all of them have stopped.
func Start(parent context.Context, cfg Config) (_ *Server, err error) {
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
	args, err := edgeplugin.DecodeArgs(&cfg.Args) // a copy, defaulted and validated
	if err != nil {
		return nil, err
	}
	// New has no scheduler handle (and so no API client) here: the
	// dependency graph's and the site topology's watches are started below
	// with the extender's own.
	watches := *args
	args.DependenciesConfigMap, args.TopologyConfigMap, args.PolicyConfigMap = "", "", ""
	// ctx ends with parent, or when Start fails, or once the server has
	// stopped serving; stop cancels it and waits for what runs under it.
	ctx, cancel := context.WithCancel(parent)
	var waits []func()
	stop := func() {
		cancel()
		for _, wait := range waits {
			wait()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	pl, err := edgeplugin.New(ctx, args, nil) // loads keys, target and model, watches the model file
	if err != nil {
		return nil, err
	}
	p := pl.(*edgeplugin.EdgePolicy)
	waits = append(waits, p.Wait)
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
		rc.QPS, rc.Burst = cmp.Or(cfg.QPS, DefaultQPS), cmp.Or(cfg.Burst, DefaultBurst)
		if client, err = kubernetes.NewForConfig(rc); err != nil {
			return nil, fmt.Errorf("edgesched extender: client: %w", err)
		}
		return client, nil
	}
	var feedClient kubernetes.Interface
	if edgeplugin.WatchesConfigMaps(&watches) {
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
		waits = append(waits, is.Wait)
		src = is
	}
	opts := cfg.Options
	if opts.Client == nil {
		// the bind verb uses the extender's client when it has one (a
		// kubeconfig or in-cluster configuration was used)
		opts.Client = client
	}
	ext := New(p, src, opts)
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
	s := &Server{ext: ext, addr: ln.Addr().String(), tls: tlsConf != nil, done: make(chan struct{})}
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
			p.StartFeeds(dctx, feedClient, &watches)()
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
			stop() // the model watch and the informers
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
func (s *Server) Addr() string { return s.addr }

// URL is the urlPrefix for the KubeSchedulerConfiguration's extender.
func (s *Server) URL() string {
	scheme := "http"
	if s.tls {
		scheme = "https"
	}
	return scheme + "://" + s.addr + s.ext.prefix
}

// Extender is the served handler.
func (s *Server) Extender() *Extender { return s.ext }

// Done is closed once the server has stopped.
func (s *Server) Done() <-chan struct{} { return s.done }

// Wait blocks until the server has stopped and returns why (nil after a
// clean shutdown).
func (s *Server) Wait() error {
	<-s.done
	return s.err
}
