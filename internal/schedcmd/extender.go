package schedcmd

import (
	"context"
	"flag"
	"strconv"
	"time"

	"github.com/edgesched/edgesched/edge-plugin/extender"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
	edgecli "github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/kubefmt"
)

// `edge-scheduler extender`'s command line: the server itself (the
// extender protocol, informers, TLS) is edge-plugin/extender's Start.

// extenderFlags are `edge-scheduler extender`'s flags beyond the server
// configuration: the zero value is none given.
type extenderFlags struct {
	// modelKeys are --model-keys: files or directories of *.pub.
	modelKeys []string
	// namespace is --namespace, of a ConfigMap named without one.
	namespace string
	// the ConfigMap flags as given ([NAMESPACE/]NAME)
	dependencies, policy, topology string
	reload, telemetryMaxAge        time.Duration
	targetThreshold                float64
	qps                            float64
	verbosity                      int
}

// newExtender is `edge-scheduler extender`: it serves until the command's
// context ends. Its errors are usage errors (package internal/cli) for a
// bad command line, failures otherwise.
func newExtender() *cobra.Command { return newExtenderCommand(runExtender) }

// newExtenderCommand is the extender's command line; run serves.
func newExtenderCommand(run func(ctx context.Context, cfg extender.Config, verbosity int) error) *cobra.Command {
	var (
		cfg extender.Config
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
				return edgecli.Usagef("unexpected argument %q", args[0])
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
	fs.StringSliceVar(&f.modelKeys, "model-keys", nil, "trusted model-signing public keys: files or directories of *.pub, comma-separated or repeated (required; the plugin's modelKeys)")
	fs.StringVar(&cfg.Args.TargetWorkload, "target-workload", edgeplugin.DefaultTargetWorkload, "typical-pod distribution for the fragmentation features (openb:NAME or a CSV path)")
	fs.Float64Var(&f.targetThreshold, "target-threshold", edgeplugin.DefaultTargetThreshold, "popularity share kept in the target workload, in (0, 1]")
	fs.DurationVar(&f.reload, "reload-interval", edgeplugin.DefaultReloadInterval, "how often the model file is checked (1s..1h)")
	fs.DurationVar(&f.telemetryMaxAge, "telemetry-max-age", edgeplugin.DefaultTelemetryMaxAge, "staleness bound of the nodes' edgesched.io/telemetry annotations (10s..1h); older summaries fall back to the usage model")
	fs.StringVar(&f.namespace, "namespace", kubefmt.DefaultNamespace, "namespace of a ConfigMap named without one")
	fs.StringVar(&f.dependencies, "dependencies-configmap", "", "[NAMESPACE/]NAME of the site's service dependency graph ConfigMap (the plugin's dependenciesConfigMap; empty: none)")
	fs.StringVar(&f.policy, "policy-configmap", "", "[NAMESPACE/]NAME of the scheduling policy ConfigMap (the plugin's policyConfigMap; empty: no policy; docs/policy-language.md)")
	fs.StringVar(&f.topology, "topology-configmap", "", "[NAMESPACE/]NAME of the site topology ConfigMap: carbon zones and RTTs (the plugin's topologyConfigMap; empty: defaults)")
	fs.StringVar(&cfg.Options.Prefix, "prefix", "", "URL path prefix of the verbs (the verbs are PREFIX/filter and PREFIX/prioritize)")
	fs.Int64Var(&cfg.Options.MaxBodyBytes, "max-body-bytes", extender.DefaultMaxBodyBytes, "largest request body accepted")
	fs.DurationVar(&cfg.Options.BindWait, "bind-wait", extender.DefaultBindWait, "how long a filter call for a GPU pod (or a pod a scheduling policy applies to) waits for the bindings of pods prioritized before it (negative: no wait)")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert", "", "serve HTTPS with this certificate (PEM; with --tls-key)")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key", "", "private key of --tls-cert (PEM)")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "how long to let in-flight calls finish on SIGTERM")
	fs.Float64Var(&f.qps, "kube-api-qps", extender.DefaultQPS, "API requests per second of the extender's client (informers and bindings)")
	fs.IntVar(&cfg.Burst, "kube-api-burst", extender.DefaultBurst, "API request burst of the extender's client")
	fs.IntVarP(&f.verbosity, "v", "v", 0, "log verbosity (klog)")
	edgecli.DeprecatedAlias(fs, "keys", "model-keys")
	fs.Bool("version", false, "print the version, commit and build date and exit")
	return cmd
}

// apply checks the flags and completes cfg with them.
func (f *extenderFlags) apply(cfg *extender.Config) error {
	if f.qps <= 0 || cfg.Burst <= 0 {
		return edgecli.Usagef("--kube-api-qps and --kube-api-burst must be positive")
	}
	cfg.QPS = float32(f.qps)
	if cfg.Args.ModelPath == "" {
		return edgecli.Usagef("--model is required")
	}
	if len(f.modelKeys) == 0 {
		return edgecli.Usagef("--model-keys is required (models are only accepted signed)")
	}
	cfg.Args.ModelKeys = f.modelKeys
	cfg.Args.ReloadInterval = &metav1.Duration{Duration: f.reload}
	cfg.Args.TelemetryMaxAge = &metav1.Duration{Duration: f.telemetryMaxAge}
	cfg.Args.TargetThreshold = &f.targetThreshold
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
			return edgecli.Usagef("%s: %w", r.flag, err)
		}
		*r.arg = ns + "/" + name
	}
	return nil
}

// runExtender serves cfg until ctx ends.
func runExtender(ctx context.Context, cfg extender.Config, verbosity int) error {
	kfs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(kfs)
	_ = kfs.Set("v", strconv.Itoa(verbosity))
	defer klog.Flush()

	s, err := extender.Start(ctx, cfg)
	if err != nil {
		return err
	}
	klog.InfoS("EdgePolicy extender serving", "url", s.URL(), "filter", s.Extender().FilterPath(), "prioritize", s.Extender().PrioritizePath())
	if err := s.Wait(); err != nil {
		return err
	}
	klog.InfoS("EdgePolicy extender stopped")
	return nil
}
