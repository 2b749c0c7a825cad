package schedcmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/klog/v2"
	kubeconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	kubescheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"

	edgecli "github.com/edgesched/edgesched/internal/cli"
)

// The scheduler mode's command line: kube-scheduler's flags that a
// deployment of edge-scheduler uses, under kube-scheduler's names, and
// the KubeSchedulerConfiguration (--config) for everything else.

// DefaultSecurePort is kube-scheduler's HTTPS port (/livez, /readyz,
// /healthz, /metrics).
const DefaultSecurePort = 10259

// maxConfigBytes caps the --config file read.
const maxConfigBytes = 4 << 20

// schedulerOptions are the scheduler mode's flags. The zero value is not
// useful: start from defaultSchedulerOptions.
type schedulerOptions struct {
	// ConfigFile is --config, a KubeSchedulerConfiguration; empty means
	// kube-scheduler's defaults (one profile, default-scheduler, without
	// EdgePolicy).
	ConfigFile string
	// Kubeconfig is --kubeconfig: used when the configuration's
	// clientConnection.kubeconfig is empty. Both empty: in-cluster.
	Kubeconfig string
	// AuthenticationKubeconfig and AuthorizationKubeconfig are the
	// clients for the TokenReviews and SubjectAccessReviews that guard
	// /metrics; empty means the scheduler's own client.
	AuthenticationKubeconfig, AuthorizationKubeconfig string
	// LeaderElection holds the --leader-elect* flags; each applies only
	// when given (leaderChanged), over the configuration's leaderElection.
	LeaderElect                               bool
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	LeaseName, LeaseNamespace, LeaseLock      string
	// BindAddress and SecurePort are where the HTTPS endpoints listen;
	// SecurePort 0 serves none.
	BindAddress string
	SecurePort  int
	// TLSCertFile and TLSKeyFile are the serving certificate; empty means
	// a self-signed one, kept in CertDir when that is set (reused on
	// restart) and in memory otherwise.
	TLSCertFile, TLSKeyFile, CertDir string
	// FeatureGates is --feature-gates, kube-scheduler's feature gates
	// (key=bool pairs).
	FeatureGates map[string]bool

	// flags is the set the options were bound to (for Changed).
	flags *pflag.FlagSet
}

// defaultSchedulerOptions are kube-scheduler's defaults.
func defaultSchedulerOptions() *schedulerOptions {
	return &schedulerOptions{
		LeaderElect:    true,
		LeaseDuration:  15 * time.Second,
		RenewDeadline:  10 * time.Second,
		RetryPeriod:    2 * time.Second,
		LeaseName:      "kube-scheduler",
		LeaseNamespace: "kube-system",
		LeaseLock:      "leases",
		BindAddress:    "0.0.0.0",
		SecurePort:     DefaultSecurePort,
	}
}

// addFlags binds o to fs, with klog's -v and --vmodule.
func (o *schedulerOptions) addFlags(fs *pflag.FlagSet) {
	o.flags = fs
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "KubeSchedulerConfiguration file (kubescheduler.config.k8s.io/v1); enable EdgePolicy in a profile there (deploy/edge-scheduler/scheduler-config.yaml)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file, when the configuration's clientConnection.kubeconfig is empty (both empty: in-cluster)")
	fs.StringVar(&o.AuthenticationKubeconfig, "authentication-kubeconfig", o.AuthenticationKubeconfig, "kubeconfig for the TokenReviews that authenticate /metrics requests (empty: the scheduler's client)")
	fs.StringVar(&o.AuthorizationKubeconfig, "authorization-kubeconfig", o.AuthorizationKubeconfig, "kubeconfig for the SubjectAccessReviews that authorize /metrics requests (empty: the scheduler's client)")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "elect a leader through a Lease before scheduling (over the configuration's leaderElection.leaderElect)")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "how long a non-leader waits after the last renewal before taking the lease")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "how long the leader retries renewing before it stops leading")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "how long to wait between attempts to take or renew the lease")
	fs.StringVar(&o.LeaseName, "leader-elect-resource-name", o.LeaseName, "name of the Lease")
	fs.StringVar(&o.LeaseNamespace, "leader-elect-resource-namespace", o.LeaseNamespace, "namespace of the Lease")
	fs.StringVar(&o.LeaseLock, "leader-elect-resource-lock", o.LeaseLock, "kind of the lock object (client-go supports leases only)")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "address of the HTTPS endpoints (/livez, /readyz, /healthz, /metrics)")
	fs.IntVar(&o.SecurePort, "secure-port", o.SecurePort, "port of the HTTPS endpoints (0: none)")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "serving certificate (PEM, with --tls-private-key-file; empty: self-signed)")
	fs.StringVar(&o.TLSKeyFile, "tls-private-key-file", o.TLSKeyFile, "private key of --tls-cert-file (PEM)")
	fs.StringVar(&o.CertDir, "cert-dir", o.CertDir, "directory that keeps the self-signed certificate across restarts (ignored with --tls-cert-file; empty: in memory)")
	fs.Var(cliflag.NewMapStringBool(&o.FeatureGates), "feature-gates", "kube-scheduler feature gates, comma-separated key=true|false")
	// klog's verbosity, as kube-scheduler spells it (-v, --v, --vmodule)
	gfs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(gfs)
	for _, name := range []string{"v", "vmodule"} {
		pf := pflag.PFlagFromGoFlag(gfs.Lookup(name))
		if name == "v" {
			pf.Shorthand = "v"
		}
		fs.AddFlag(pf)
	}
}

// validate checks the flags on their face (a usage error) and applies
// the feature gates.
func (o *schedulerOptions) validate() error {
	if o.SecurePort < 0 || o.SecurePort > 65535 {
		return edgecli.Usagef("--secure-port %d is not a port (0 to 65535)", o.SecurePort)
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		return edgecli.Usagef("--tls-cert-file and --tls-private-key-file go together")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--leader-elect-lease-duration", o.LeaseDuration}, {"--leader-elect-renew-deadline", o.RenewDeadline}, {"--leader-elect-retry-period", o.RetryPeriod}} {
		if d.v <= 0 {
			return edgecli.Usagef("%s must be positive, got %s", d.name, d.v)
		}
	}
	if len(o.FeatureGates) > 0 {
		if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(o.FeatureGates); err != nil {
			return edgecli.Usagef("--feature-gates: %w", err)
		}
	}
	return nil
}

// loadConfig reads --config (kube-scheduler's defaults without one),
// applies the leader-election flags given, and validates the result as
// kube-scheduler does. EdgePolicy's args are decoded and defaulted here,
// strictly: they are in kube-scheduler's scheme (edge-plugin/apis).
func (o *schedulerOptions) loadConfig() (*kubeconfig.KubeSchedulerConfiguration, error) {
	var cfg *kubeconfig.KubeSchedulerConfiguration
	if o.ConfigFile == "" {
		d, err := latest.Default()
		if err != nil {
			return nil, fmt.Errorf("default configuration: %w", err)
		}
		cfg = d
	} else {
		data, err := readCapped(o.ConfigFile, maxConfigBytes)
		if err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
		obj, gvk, err := kubescheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("--config %s: %w", o.ConfigFile, err)
		}
		c, ok := obj.(*kubeconfig.KubeSchedulerConfiguration)
		if !ok {
			return nil, fmt.Errorf("--config %s: a %s, not a KubeSchedulerConfiguration", o.ConfigFile, gvk)
		}
		c.TypeMeta.APIVersion = gvk.GroupVersion().String()
		cfg = c
	}
	le := &cfg.LeaderElection
	for _, f := range []struct {
		name  string
		apply func()
	}{
		{"leader-elect", func() { le.LeaderElect = o.LeaderElect }},
		{"leader-elect-lease-duration", func() { le.LeaseDuration.Duration = o.LeaseDuration }},
		{"leader-elect-renew-deadline", func() { le.RenewDeadline.Duration = o.RenewDeadline }},
		{"leader-elect-retry-period", func() { le.RetryPeriod.Duration = o.RetryPeriod }},
		{"leader-elect-resource-name", func() { le.ResourceName = o.LeaseName }},
		{"leader-elect-resource-namespace", func() { le.ResourceNamespace = o.LeaseNamespace }},
		{"leader-elect-resource-lock", func() { le.ResourceLock = o.LeaseLock }},
	} {
		if o.flags != nil && o.flags.Changed(f.name) {
			f.apply()
		}
	}
	if cfg.ClientConnection.Kubeconfig == "" {
		cfg.ClientConnection.Kubeconfig = o.Kubeconfig
	}
	if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	return cfg, nil
}

// restConfig is the client configuration of kubeconfig (empty:
// in-cluster) with the configuration's client settings, as kube-scheduler
// makes it (no compression).
func restConfig(kubeconfig string, cc componentbaseconfig.ClientConnectionConfiguration) (*rest.Config, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		if kubeconfig == "" {
			return nil, fmt.Errorf("no kubeconfig given and not in a cluster: %w", err)
		}
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	rc.DisableCompression = true
	rc.AcceptContentTypes = cc.AcceptContentTypes
	rc.ContentType = cc.ContentType
	rc.QPS = cc.QPS
	rc.Burst = int(cc.Burst)
	return rc, nil
}

// errTooLarge is a file over its reader's cap.
var errTooLarge = errors.New("file too large")

// readCapped reads the file at path, at most limit bytes.
func readCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: %w (over %d bytes)", path, errTooLarge, limit)
	}
	return data, nil
}
