// Package agentcmd is edge-agent's command line: flags, logging, the
// Kubernetes client and the eBPF loader, wired to package agent.
// cmd/edge-agent only calls Main with a context that SIGTERM and SIGINT
// cancel; the agent then stops gracefully.
//
// Exit codes (docs/cli.md): 0 after a graceful stop, -h, --version or
// the version verb; 2 for a bad command line (unknown command or flag, bad
// value, missing node name, unknown cgroup, unreadable kubeconfig); 1 when
// the agent fails while running.
package agentcmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgesched/edgesched/agent"
	"github.com/edgesched/edgesched/agent/telemetry/bpf"
	"github.com/edgesched/edgesched/agent/telemetry/procfs"
	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/kube"
	"github.com/edgesched/edgesched/internal/memlimit"
	"github.com/edgesched/edgesched/internal/natsflags"
	"github.com/edgesched/edgesched/kubefmt"
)

// NodeNameEnv is the environment variable --node-name defaults to (set
// from the downward API in the DaemonSet).
const NodeNameEnv = "NODE_NAME"

// Exit codes (package cli, docs/cli.md).
const (
	ExitOK    = cli.ExitOK
	ExitError = cli.ExitFailure
	ExitUsage = cli.ExitUsage
)

func usagef(format string, args ...any) error { return cli.Usagef(format, args...) }

// Main runs edge-agent with args until ctx ends; it returns the process
// exit code. The version and the help go to stdout, everything else to
// stderr.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Execute(ctx, NewCommand(), args, stdout, stderr)
}

// NewCommand is edge-agent's command line: the agent itself, and the
// version and completion verbs.
func NewCommand() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "edge-agent [flags]",
		Short: "Sample this node and publish its telemetry for the edge-scheduler",
		Long: `edge-agent runs on every K3s node: it samples the node (eBPF probes with a
/proc fallback), writes the telemetry annotation the edge-scheduler reads, and
serves /metrics and /healthz. With --site it also records the site trace and
takes part in the site's leader election: the leader trains, exchanges updates
with the coordinator and installs models (docs/agent.md, docs/site-leader.md).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), cmd.Flags(), &o, cmd.ErrOrStderr())
		},
	}
	addFlags(cmd.Flags(), &o)
	cli.AddVersion(cmd, "edge-agent")
	cli.EnforceContract(cmd)
	return cmd
}

// options are the parsed flags.
type options struct {
	nodeName, kubeconfig, dataDir, metricsAddr string
	sampleInterval, annotateInterval           time.Duration
	telemetryMaxAge                            time.Duration
	tracefs                                    string
	noEBPF, noAnnotate                         bool
	cgroup, procRoot, sysRoot                  string
	seed                                       uint64
	logLevel                                   string

	// Site leader (site.go).
	site, namespace, natsURL, siteKey, modelConfigMap, modelConfigMapKey string
	modelKeys                                                            []string
	leaseDuration, traceRetention, modelMaxAge, freezeAfter              time.Duration
	traceMaxEvents                                                       int
	nats                                                                 natsauth.ClientConfig // resolved from natsFlags
	natsFlags                                                            *natsflags.Flags
	dependenciesConfigMap                                                string
	dependenciesInterval                                                 time.Duration
	dependenciesEmbeddings                                               bool
}

// deprecatedFlags maps each old flag name to the name that replaced it
// (docs/cli.md, "One name per concept"); the old names still work, hidden,
// with a warning.
var deprecatedFlags = map[string]string{
	"data-dir":      "data",
	"trusted-keys":  "model-keys",
	"stale-after":   "telemetry-max-age",
	"max-model-age": "model-max-age",
}

// addFlags defines edge-agent's flags on fs.
func addFlags(fs *pflag.FlagSet, o *options) {
	d := agent.DefaultConfig()
	fs.StringVar(&o.nodeName, "node-name", os.Getenv(NodeNameEnv), "the Node this agent reports for (default $"+NodeNameEnv+"); required unless --no-annotate")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; empty means the in-cluster service account")
	fs.StringVar(&o.dataDir, "data", "/var/lib/edgesched", "directory of the agent's local state (site trace, outbox, models)")
	fs.StringVar(&o.metricsAddr, "metrics-addr", ":9560", "serve /metrics and /healthz on this address (empty: no server)")
	fs.DurationVar(&o.sampleInterval, "sample-interval", d.SampleInterval, "period of sampling /proc and the eBPF probes")
	fs.DurationVar(&o.annotateInterval, "annotate-interval", d.AnnotateInterval, "least time between two writes of the node's telemetry annotation (also the summary window)")
	fs.DurationVar(&o.telemetryMaxAge, "telemetry-max-age", d.StaleAfter, "the scheduler plugin's telemetry staleness bound (its telemetryMaxAge): an unchanged summary is rewritten at half of it")
	fs.StringVar(&o.tracefs, "tracefs", bpf.DefaultTracefsPath, "tracefs mount point (mounted there when missing)")
	fs.BoolVar(&o.noEBPF, "no-ebpf", false, "do not load the eBPF probes: sample /proc only")
	fs.BoolVar(&o.noAnnotate, "no-annotate", false, "do not write the node annotation (no Kubernetes client; metrics only)")
	fs.StringVar(&o.cgroup, "cgroup", "", "report the CPU and memory of this cgroup (e.g. /kubepods/pod1, as in /proc/PID/cgroup) against its limits instead of the whole host")
	fs.StringVar(&o.procRoot, "proc-root", "/proc", "procfs mount (the host's /proc when the agent runs in a container)")
	fs.StringVar(&o.sysRoot, "sys-root", "/sys", "sysfs mount (cgroups under SYS-ROOT/fs/cgroup)")
	fs.Uint64Var(&o.seed, "seed", 0, "the run's seed, root of every random stream (retry jitter, training): each component gets its own derived from it (0: drawn at start; logged and in edgesched_agent_info)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")

	// Site leader flags (site.go, docs/site-leader.md).
	fs.StringVar(&o.site, "site", "", "site name: record the site trace and run leader election among the site's agents (Lease edgesched-site-SITE); the leader trains, exchanges updates with the coordinator and installs models")
	fs.StringVar(&o.namespace, "namespace", kubefmt.DefaultNamespace, "namespace of the site Lease, the site ledger and of a ConfigMap named without one")
	fs.DurationVar(&o.leaseDuration, "lease-duration", 15*time.Second, "site leader Lease duration (renew deadline and retry period scale with it: 10s and 2s at 15s)")
	fs.StringVar(&o.siteKey, "site-key", "", "the site's private key that signs its updates (required with --site)")
	fs.StringVar(&o.modelConfigMap, "model-configmap", kubefmt.DefaultModelConfigMapName, "ConfigMap the scheduler plugin loads models from: [NAMESPACE/]NAME (NAME alone: in --namespace)")
	fs.StringVar(&o.modelConfigMapKey, "model-configmap-key", defaultModelConfigMapKey, "key of the model artifact in that ConfigMap (EdgePolicy's modelConfigMapKey)")
	fs.StringSliceVar(&o.modelKeys, "model-keys", nil, "the coordinator's model-signing public keys: files or directories of *.pub (*.retired refused), comma-separated or repeated (required with --site)")
	fs.DurationVar(&o.modelMaxAge, "model-max-age", 0, "freeze protection: refuse to install a model whose signed creation time is older than this, and report the installed one frozen once it is (0: off)")
	fs.DurationVar(&o.freezeAfter, "freeze-after", 0, "freeze detection: report the model feed frozen when rounds have trained from a model version this site has not installed for this long (0: off)")
	fs.DurationVar(&o.traceRetention, "trace-retention", 168*time.Hour, "how long the site trace keeps events")
	fs.IntVar(&o.traceMaxEvents, "trace-max-events", 1000000, "most events the site trace keeps")
	fs.StringVar(&o.dependenciesConfigMap, "dependencies-configmap", kubefmt.DefaultDependenciesConfigMapName, "ConfigMap the site leader writes the service dependency graph into (EdgePolicy's dependenciesConfigMap): [NAMESPACE/]NAME (NAME alone: in --namespace); empty: not written")
	fs.DurationVar(&o.dependenciesInterval, "dependencies-interval", time.Minute, "how often the site leader recomputes the service dependency graph from the trace (an unchanged graph is rewritten every 10 intervals)")
	fs.BoolVar(&o.dependenciesEmbeddings, "dependencies-embeddings", false, "the site leader also writes GraphSAGE embeddings and partners of the graph's services into its ConfigMap (embeddings.json), with the GraphSAGE weights of the installed model (the shipped pre-trained pair until a model carries its own); the edge-sage model reads the partners (its dep_affinity feature)")
	// -s/--server (the coordinator's NATS URL or the site's leaf node;
	// required with --site), --context, --creds, --nkey, --tlsca, ...
	o.natsFlags = natsflags.AddPFlags(fs, natsflags.Options{LegacyServerFlag: true})
	for old, name := range deprecatedFlags {
		cli.DeprecatedAlias(fs, old, name)
	}
}

// run runs the agent the parsed flags fs (into o) describe until ctx
// ends; the log goes to stderr.
func run(ctx context.Context, fs *pflag.FlagSet, o *options, stderr io.Writer) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return usagef("--log-level: %v", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if ml, err := memlimit.Apply(memlimit.DefaultConfig()); err != nil {
		log.Warn("memory limit not applied", "err", err)
	} else if ml.Source != "" {
		log.Info("Go memory limit", "bytes", ml.Limit, "from", ml.Source)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--sample-interval", o.sampleInterval}, {"--annotate-interval", o.annotateInterval}, {"--telemetry-max-age", o.telemetryMaxAge},
		{"--lease-duration", o.leaseDuration}, {"--trace-retention", o.traceRetention}, {"--dependencies-interval", o.dependenciesInterval}} {
		if d.v <= 0 {
			return usagef("%s %v: must be positive", d.name, d.v)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--model-max-age", o.modelMaxAge}, {"--freeze-after", o.freezeAfter}} {
		if d.v < 0 {
			return usagef("%s %v: must not be negative (0 turns it off)", d.name, d.v)
		}
	}
	// The relations between the interval flags, named as typed
	// (agent.Config.Validate checks them too, in its field names). The
	// summary is sampled at least once per window (--annotate-interval);
	// the staleness bound matters only to an agent that writes the
	// annotation: with --no-annotate nothing is rewritten at half of it.
	if o.sampleInterval > o.annotateInterval {
		return usagef("--sample-interval %v is longer than --annotate-interval %v (the summary window): sample at least once per window", o.sampleInterval, o.annotateInterval)
	}
	if !o.noAnnotate && o.annotateInterval >= o.telemetryMaxAge/2 {
		return usagef("--annotate-interval %v must be below half of --telemetry-max-age %v (an unchanged summary is rewritten at half of it, so it never goes stale): lower --annotate-interval or raise --telemetry-max-age",
			o.annotateInterval, o.telemetryMaxAge)
	}
	if o.traceMaxEvents <= 0 {
		return usagef("--trace-max-events %d: must be positive", o.traceMaxEvents)
	}
	if o.dataDir == "" {
		return usagef("--data must not be empty")
	}
	if err := o.checkConfigMaps(); err != nil {
		return err
	}
	// One seed for the run: logged at start by the agent and exported in
	// edgesched_agent_info; every component's is derived from it.
	o.seed = agent.ResolveSeed(o.seed)
	if !o.noEBPF {
		if err := (bpf.Config{TracefsPath: o.tracefs}).Validate(); err != nil {
			return usagef("--tracefs: %v", err)
		}
	}
	cfg := agent.Config{
		NodeName:         o.nodeName,
		Logger:           log,
		Proc:             procfs.Config{ProcRoot: o.procRoot, SysRoot: o.sysRoot, Cgroup: o.cgroup},
		SampleInterval:   o.sampleInterval,
		AnnotateInterval: o.annotateInterval,
		StaleAfter:       o.telemetryMaxAge,
		MetricsAddr:      o.metricsAddr,
		Seed:             o.seed,
		// the agent adds its own series; the Go, process and build
		// collectors are every daemon's (cli.RegisterProcessMetrics)
		Registry: prometheus.NewRegistry(),
	}
	if err := cli.RegisterProcessMetrics(cfg.Registry, "edge-agent"); err != nil {
		return err
	}
	var client kube.Interface
	var err error
	if !o.noAnnotate || o.site != "" {
		if o.nodeName == "" {
			return usagef("--node-name (or $%s) is required to write the node's annotation and to run the site leader (or pass --no-annotate)", NodeNameEnv)
		}
		if client, err = kubeClient(o.kubeconfig); err != nil {
			return cli.Usage(err)
		}
	}
	if !o.noAnnotate {
		cfg.Client = client
	}
	if !o.noEBPF {
		bc := bpf.DefaultConfig()
		bc.TracefsPath = o.tracefs
		cfg.LoadProbes = func(log *slog.Logger) (agent.Probes, error) {
			p, err := bpf.Load(bc, log)
			if err != nil {
				return nil, err
			}
			return p, nil
		}
	}
	if o.site == "" {
		if set := siteFlagsSet(fs); len(set) > 0 {
			return usagef("%s given without --site", strings.Join(set, " "))
		}
	} else {
		sp, err := buildSite(o, client, cfg.Registry, log)
		if err != nil {
			return cli.Usage(err)
		}
		defer sp.close(log)
		cfg.Components = append(cfg.Components, sp.components...)
		cfg.OnProbeSnapshot = sp.onSnapshot
		log.Info("site leader enabled", "site", o.site, "namespace", o.namespace, "nats", o.natsURL, "lease", o.leaseDuration)
	}
	if err := cfg.Validate(); err != nil {
		return cli.Usage(err)
	}
	a, err := agent.New(cfg)
	if err != nil {
		return cli.Usage(err)
	}
	return a.Run(ctx)
}

// siteFlagsSet lists the site-leader flags given on the command line
// (by the names given).
func siteFlagsSet(fs *pflag.FlagSet) []string {
	site := map[string]bool{"namespace": true, "lease-duration": true, "site-key": true,
		"model-configmap": true, "model-configmap-key": true, "model-keys": true, "trace-retention": true, "trace-max-events": true,
		"model-max-age": true, "freeze-after": true, "dependencies-configmap": true, "dependencies-interval": true, "dependencies-embeddings": true}
	for _, n := range natsflags.Names() {
		site[n] = true
	}
	for old, name := range deprecatedFlags {
		site[old] = site[name]
	}
	var set []string
	fs.Visit(func(f *pflag.Flag) {
		if site[f.Name] {
			set = append(set, "--"+f.Name)
		}
	})
	return set
}

// kubeClient builds the agent's API clients (package kube: core/v1 and
// coordination/v1 only, not client-go's clientset, which would link every
// API group into the binary) from a kubeconfig file, or the in-cluster
// configuration when path is empty.
func kubeClient(path string) (kube.Interface, error) {
	var rc *rest.Config
	var err error
	if path == "" {
		if rc, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("in-cluster Kubernetes config (pass --kubeconfig outside a pod, or --no-annotate): %w", err)
		}
	} else if rc, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", path, err)
	}
	rc.UserAgent = "edge-agent"
	client, err := kube.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return client, nil
}
