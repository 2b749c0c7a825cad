package schedcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	// client-go's metrics (rest_client_*, workqueue_*,
	// leader_election_*) and kubernetes_build_info in the legacy
	// registry, as kube-scheduler's main registers them
	"k8s.io/apimachinery/pkg/util/uuid"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler"
	kubeconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
)

// The scheduler mode: kube-scheduler's scheduler (k8s.io/kubernetes/pkg/scheduler)
// with EdgePolicy in its out-of-tree registry, run the way kube-scheduler's
// app runs it (informers synced and event handlers delivered before
// /readyz answers 200, leader election through a Lease, events recorded
// to the API server), without the app itself: its generic API server
// machinery is most of kube-scheduler's binary (docs/edge-plugin.md,
// "Binary size").

// errLostLease is a scheduler that stopped leading while its context was
// still live: it exits, and its replacement elects again.
var errLostLease = errors.New("leader election lost")

// outOfTreeRegistry is the plugins edge-scheduler adds to the in-tree ones.
func outOfTreeRegistry() frameworkruntime.Registry {
	return frameworkruntime.Registry{edgeplugin.Name: edgeplugin.New}
}

// runScheduler schedules with o until ctx ends (nil) or the lease is lost
// (errLostLease).
func runScheduler(ctx context.Context, o *schedulerOptions) error {
	logger := klog.FromContext(ctx)
	cfg, err := o.loadConfig()
	if err != nil {
		return err
	}
	kc, err := restConfig(cfg.ClientConnection.Kubeconfig, cfg.ClientConnection)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(rest.AddUserAgent(kc, "scheduler"))
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	eventClient, err := kubernetes.NewForConfig(kc)
	if err != nil {
		return fmt.Errorf("event client: %w", err)
	}
	dynClient, err := dynamic.NewForConfig(kc)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	logger.Info("Starting edge-scheduler", "version", versionLine())
	// kubernetes_feature_enabled, as kube-scheduler
	utilfeature.DefaultMutableFeatureGate.AddMetrics()
	logger.Info("Golang settings", "GOGC", os.Getenv("GOGC"), "GOMAXPROCS", runtime.GOMAXPROCS(0), "GOTRACEBACK", os.Getenv("GOTRACEBACK"))

	broadcaster := events.NewEventBroadcasterAdapterWithContext(ctx, eventClient)
	informerName, err := cache.NewInformerName(Name)
	if err != nil {
		return fmt.Errorf("informer name: %w", err)
	}
	informers := scheduler.NewInformerFactory(client, 0, informerName)
	dynInformers := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynClient, 0, corev1.NamespaceAll, nil)
	sched, err := scheduler.New(ctx, client, informers, dynInformers,
		func(name string) events.EventRecorderLogger { return broadcaster.NewRecorder(name) },
		scheduler.WithComponentConfigVersion(cfg.TypeMeta.APIVersion),
		scheduler.WithKubeConfig(kc),
		scheduler.WithProfiles(cfg.Profiles...),
		scheduler.WithPercentageOfNodesToScore(cfg.PercentageOfNodesToScore),
		scheduler.WithFrameworkOutOfTreeRegistry(outOfTreeRegistry()),
		scheduler.WithPodMaxBackoffSeconds(cfg.PodMaxBackoffSeconds),
		scheduler.WithPodInitialBackoffSeconds(cfg.PodInitialBackoffSeconds),
		scheduler.WithExtenders(cfg.Extenders...),
		scheduler.WithParallelism(cfg.Parallelism),
	)
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}

	var elector *leaderelection.LeaderElectionConfig
	if cfg.LeaderElection.LeaderElect {
		if elector, err = leaderElection(cfg, kc, broadcaster); err != nil {
			return err
		}
	}

	broadcaster.StartRecordingToSink(ctx.Done())
	defer broadcaster.Shutdown()

	// the secure port's checks, as kube-scheduler's: the lease watchdog
	// in all, and /readyz also waits for the handlers' initial sync
	synced := make(chan struct{})
	var live, ready []check
	if elector != nil {
		wd := elector.WatchDog
		live = append(live, check{"leaderElection", func() error { return wd.Check(nil) }})
		ready = append(ready, live...)
	}
	ready = append(ready,
		check{"shutdown", func() error {
			if ctx.Err() != nil {
				return errors.New("process is shutting down")
			}
			return nil
		}},
		check{"sched-handler-sync", func() error {
			select {
			case <-synced:
				return nil
			default:
				return errors.New("handlers are not fully synchronized")
			}
		}})
	var srv *secureServer
	if o.SecurePort > 0 {
		authn, authz, err := reviewClients(o, kc)
		if err != nil {
			return err
		}
		certs, err := newCertSource(o.TLSCertFile, o.TLSKeyFile, o.CertDir, logger)
		if err != nil {
			return err
		}
		if cfg.EnableProfiling && cfg.EnableContentionProfiling {
			runtime.SetBlockProfileRate(1)
		}
		ep := &endpoints{live: live, ready: ready, profiling: cfg.EnableProfiling, authn: authn, authz: authz, logger: logger, now: time.Now}
		if srv, err = startSecure(hostPort(o.BindAddress, o.SecurePort), certs, ep.handler(), logger); err != nil {
			return err
		}
		defer func() {
			if err := srv.Shutdown(); err != nil {
				logger.Error(err, "Secure server stopped")
			}
		}()
	}

	startInformers := func(ctx context.Context) {
		informers.Start(ctx.Done())
		dynInformers.Start(ctx.Done())
		informers.WaitForCacheSync(ctx.Done())
		dynInformers.WaitForCacheSync(ctx.Done())
		if err := sched.WaitForHandlersSync(ctx); err != nil {
			logger.Error(err, "Handlers are not fully synchronized")
		}
		close(synced)
		logger.V(3).Info("Handlers synced")
	}
	if elector == nil || !cfg.DelayCacheUntilActive {
		startInformers(ctx)
	}
	if elector == nil {
		sched.Run(ctx)
		return nil
	}
	lost := false
	elector.Callbacks = leaderelection.LeaderCallbacks{
		OnStartedLeading: func(ctx context.Context) {
			if cfg.DelayCacheUntilActive {
				logger.Info("Starting informers and waiting for sync")
				startInformers(ctx)
			}
			sched.Run(ctx)
		},
		OnStoppedLeading: func() { lost = ctx.Err() == nil },
	}
	le, err := leaderelection.NewLeaderElector(*elector)
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(ctx) // returns after OnStoppedLeading
	if lost {
		return errLostLease
	}
	logger.Info("Requested to terminate, exiting")
	return nil
}

// leaderElection is the lease configuration of cfg, with an identity
// unique to this process and the first profile's name on its events.
func leaderElection(cfg *kubeconfig.KubeSchedulerConfiguration, kc *rest.Config, broadcaster events.EventBroadcasterAdapter) (*leaderelection.LeaderElectionConfig, error) {
	le := cfg.LeaderElection
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("leader election identity: %w", err)
	}
	name := corev1.DefaultSchedulerName
	if len(cfg.Profiles) > 0 {
		name = cfg.Profiles[0].SchedulerName
	}
	lock, err := resourcelock.NewFromKubeconfig(le.ResourceLock, le.ResourceNamespace, le.ResourceName,
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID()), EventRecorder: broadcaster.DeprecatedNewLegacyRecorder(name)},
		kc, le.RenewDeadline.Duration)
	if err != nil {
		return nil, fmt.Errorf("leader election lock: %w", err)
	}
	return &leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration.Duration,
		RenewDeadline:   le.RenewDeadline.Duration,
		RetryPeriod:     le.RetryPeriod.Duration,
		WatchDog:        leaderelection.NewLeaderHealthzAdaptor(20 * time.Second),
		Name:            "kube-scheduler",
		ReleaseOnCancel: true,
	}, nil
}

// Rate limits of the review clients (kube-scheduler's delegated
// authentication and authorization use the same): their own, so that
// requests to /metrics, made-up tokens included, never take the
// scheduler client's.
const (
	reviewQPS   = 200
	reviewBurst = 400
)

// reviewClients are the clients of the TokenReviews and
// SubjectAccessReviews: the kubeconfigs given, else the scheduler's
// (kc), each with its own rate limit.
func reviewClients(o *schedulerOptions, kc *rest.Config) (authn, authz kubernetes.Interface, err error) {
	pick := func(flag, path string) (kubernetes.Interface, error) {
		rc := rest.CopyConfig(kc)
		if path != "" {
			if rc, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
				return nil, fmt.Errorf("--%s: %w", flag, err)
			}
		}
		rc.QPS, rc.Burst = reviewQPS, reviewBurst
		return kubernetes.NewForConfig(rest.AddUserAgent(rc, Name+"-reviews"))
	}
	if authn, err = pick("authentication-kubeconfig", o.AuthenticationKubeconfig); err != nil {
		return nil, nil, err
	}
	if authz, err = pick("authorization-kubeconfig", o.AuthorizationKubeconfig); err != nil {
		return nil, nil, err
	}
	return authn, authz, nil
}
