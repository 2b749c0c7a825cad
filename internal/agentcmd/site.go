package agentcmd

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgesched/edgesched/agent"
	"github.com/edgesched/edgesched/agent/depgraph"
	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/agent/site"
	"github.com/edgesched/edgesched/agent/telemetry/bpf"
	"github.com/edgesched/edgesched/agent/trace"
	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/internal/kube"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policy/ppo"
	"github.com/edgesched/edgesched/policy/sage"
	"github.com/edgesched/edgesched/quant"
)

// siteParts is the site leader built from the flags: the trace recorder
// (every agent records, so a new leader has the history) and the elector,
// which runs the federated-learning client, the model installer and the
// dependency graph publisher while this agent holds the site Lease.
type siteParts struct {
	components []agent.Component
	onSnapshot func(time.Time, bpf.Snapshot)
	closers    []func() error
}

// close releases what buildSite opened, last opened first; call it after
// the agent's Run returned.
func (s *siteParts) close(log *slog.Logger) {
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil {
			log.Warn("closing the site leader", "err", err)
		}
	}
}

// modelConfigMapRef splits --model-configmap: [NAMESPACE/]NAME, NAME
// alone in --namespace.
func (o *options) modelConfigMapRef() (ns, name string, err error) {
	if ns, name, err = kubefmt.ParseConfigMapRef(o.modelConfigMap, o.namespace); err != nil {
		return "", "", usagef("--model-configmap: %w", err)
	}
	return ns, name, nil
}

// dependenciesConfigMapRef splits --dependencies-configmap:
// [NAMESPACE/]NAME, NAME alone in --namespace ("": not written, no error).
func (o *options) dependenciesConfigMapRef() (ns, name string, err error) {
	if o.dependenciesConfigMap == "" {
		return "", "", nil
	}
	if ns, name, err = kubefmt.ParseConfigMapRef(o.dependenciesConfigMap, o.namespace); err != nil {
		return "", "", usagef("--dependencies-configmap: %w", err)
	}
	return ns, name, nil
}

// checkConfigMaps refuses a --model-configmap or --dependencies-configmap
// whose namespace or name the API would refuse.
func (o *options) checkConfigMaps() error {
	if _, _, err := o.dependenciesConfigMapRef(); err != nil {
		return err
	}
	if o.dependenciesEmbeddings && o.dependenciesConfigMap == "" {
		return usagef("--dependencies-embeddings needs a --dependencies-configmap (the graph it embeds and the ConfigMap it writes to)")
	}
	if o.site == "" {
		return nil // --model-configmap is a site flag: given alone it is refused later
	}
	_, _, err := o.modelConfigMapRef()
	return err
}

// buildSite builds the site leader. It needs the API client, the NATS URL,
// the site's signing key and the coordinator's public keys.
func buildSite(o *options, kc kube.Interface, reg prometheus.Registerer, log *slog.Logger) (_ *siteParts, err error) {
	conn, err := o.natsFlags.Resolve(nil)
	if err != nil {
		return nil, err
	}
	o.natsURL, o.nats = conn.URL, conn.Config
	if o.nats.InboxPrefix == "" {
		o.nats.InboxPrefix = natsauth.SiteInboxPrefix(o.site)
	}
	switch {
	case kc == nil:
		return nil, errors.New("--site needs the Kubernetes API (drop --no-annotate or give --kubeconfig)")
	case o.nodeName == "":
		return nil, fmt.Errorf("--site needs --node-name (or $%s): it is the agent's identity in the site Lease", NodeNameEnv)
	case o.natsURL == "":
		return nil, errors.New("--site needs --server (or $NATS_URL, or a nats --context): the coordinator's NATS URL, or the site's leaf node")
	case o.siteKey == "":
		return nil, errors.New("--site needs --site-key, the site's update-signing key (edgectl auth site create)")
	case len(o.modelKeys) == 0:
		return nil, errors.New("--site needs --model-keys, the coordinator's model-signing public keys")
	case o.leaseDuration <= 0:
		return nil, fmt.Errorf("--lease-duration %s: want > 0", o.leaseDuration)
	case o.traceRetention <= 0 || o.traceMaxEvents <= 0:
		return nil, errors.New("--trace-retention and --trace-max-events must be > 0")
	}
	signer, err := quant.ReadSigner(o.siteKey)
	if err != nil {
		return nil, fmt.Errorf("--site-key: %w", err)
	}
	keys, err := quant.LoadKeyring(o.modelKeys...)
	if err != nil {
		return nil, fmt.Errorf("--model-keys: %w", err)
	}
	natsOpts, err := o.nats.Options()
	if err != nil {
		return nil, fmt.Errorf("NATS connection flags: %w", err)
	}
	p := &siteParts{}
	defer func() {
		if err != nil {
			p.close(log)
		}
	}()

	store, err := trace.OpenStore(trace.StoreConfig{Path: filepath.Join(o.dataDir, "trace.db"),
		MaxAge: o.traceRetention, MaxEvents: o.traceMaxEvents, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open the site trace: %w", err)
	}
	p.closers = append(p.closers, store.Close)
	rc := trace.DefaultRecorderConfig()
	rc.Store, rc.Client, rc.NodeName, rc.Seed, rc.Logger = store, kc, o.nodeName, agent.DeriveSeed(o.seed, seedTrace), log
	rec, err := trace.NewRecorder(rc)
	if err != nil {
		return nil, fmt.Errorf("site trace recorder: %w", err)
	}
	p.onSnapshot = func(at time.Time, s bpf.Snapshot) {
		flows := make([]trace.FlowCount, 0, len(s.Flows))
		for _, f := range s.Flows {
			flows = append(flows, trace.FlowCount{Src: f.Src, Dst: f.Dst, DstPort: f.DstPort, Conns: f.Conns})
		}
		rec.ObserveFlows(at, flows)
	}

	ledger, err := site.NewLedger(site.LedgerConfig{Client: kc, Namespace: o.namespace, Site: o.site, Identity: o.nodeName, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("site ledger: %w", err)
	}
	// The twin replays the recorded trace; PPO's other settings are the
	// defaults, the round's iterations and learning rate come from the
	// coordinator.
	pc := ppo.DefaultConfig()
	pc.Env.Mode = "replay"
	fc := flclient.DefaultConfig()
	fc.Site, fc.Signer, fc.ModelKeys, fc.DataDir = o.site, signer, keys, filepath.Join(o.dataDir, "fl")
	fc.Trainer = &site.TwinTrainer{Trace: store, Dir: filepath.Join(o.dataDir, "twin"), Config: pc}
	fc.Sequencer, fc.Seed, fc.Logger = ledger, agent.DeriveSeed(o.seed, seedFLClient), log
	fc.MaxModelAge, fc.FreezeAfter = o.modelMaxAge, o.freezeAfter
	fl, err := flclient.New(fc)
	if err != nil {
		return nil, fmt.Errorf("federated-learning client: %w", err)
	}
	p.closers = append(p.closers, fl.Close)

	// Connect now, retrying in the background while the server is away:
	// the client's own loops back off while the connection is down.
	natsOpts = append(natsOpts, nats.Name("edge-agent "+o.site+"/"+o.nodeName), nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1), nats.ReconnectWait(2*time.Second), nats.ReconnectJitter(500*time.Millisecond, 2*time.Second))
	nc, err := nats.Connect(o.natsURL, natsOpts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS %s: %w", o.natsURL, err)
	}
	p.closers = append(p.closers, func() error { nc.Close(); return nil })
	flc, err := site.NewFL(site.FLConfig{Client: fl, Conn: nc, Ledger: ledger, Seed: agent.DeriveSeed(o.seed, seedSiteFL), Logger: log})
	if err != nil {
		return nil, err
	}

	ic := site.DefaultInstallerConfig()
	if ic.Namespace, ic.Name, err = o.modelConfigMapRef(); err != nil {
		return nil, err
	}
	ic.Key = o.modelConfigMapKey
	ic.Client, ic.Keys, ic.Source, ic.Identity, ic.Registerer, ic.Seed, ic.Logger = kc, keys, fl, o.nodeName, reg, agent.DeriveSeed(o.seed, seedInstaller), log
	inst, err := site.NewInstaller(ic)
	if err != nil {
		return nil, fmt.Errorf("model installer: %w", err)
	}
	fl.OnModel(func(flclient.Installed) { inst.Notify() })

	leader := []site.Component{flc, inst}
	if o.dependenciesConfigMap != "" {
		dc := depgraph.DefaultConfig()
		if dc.Namespace, dc.Name, err = o.dependenciesConfigMapRef(); err != nil {
			return nil, err
		}
		dc.Client, dc.Trace, dc.Interval, dc.Site, dc.Identity = kc, store, o.dependenciesInterval, o.site, o.nodeName
		dc.Registerer, dc.Seed, dc.Logger = reg, agent.DeriveSeed(o.seed, seedDependencies), log
		if o.dependenciesEmbeddings {
			p, err := sage.Default()
			if err != nil {
				return nil, fmt.Errorf("--dependencies-embeddings: %w", err)
			}
			dc.Encoder, dc.Decoder = p.Encoder, p.Decoder
			log.Info("service embeddings on", "encoder", p.ID())
		}
		deps, err := depgraph.NewPublisher(dc)
		if err != nil {
			return nil, fmt.Errorf("--dependencies-configmap: %w", err)
		}
		leader = append(leader, deps)
		if o.dependenciesEmbeddings {
			// embed with the GraphSAGE weights of the model the site runs
			// (the one installed now, then each new one), so the partners
			// are those its dep_affinity reads
			useModelWeights := func() {
				_, art, err := fl.InstalledInt8()
				if errors.Is(err, flclient.ErrNoModel) {
					return
				}
				if err == nil {
					err = deps.SetWeights(art.Sage())
				}
				if err != nil {
					log.Warn("service embeddings keep their GraphSAGE weights: the installed model's are not at hand", "err", err)
				}
			}
			useModelWeights()
			fl.OnModel(func(flclient.Installed) { useModelWeights() })
		}
	}

	renew, retry := site.ScaledTimings(o.leaseDuration)
	ec := site.DefaultConfig()
	ec.Site, ec.Namespace, ec.Identity, ec.Client = o.site, o.namespace, o.nodeName, kc
	ec.LeaseDuration, ec.RenewDeadline, ec.RetryPeriod = o.leaseDuration, renew, retry
	ec.Leader, ec.Registerer, ec.Seed, ec.Logger = leader, reg, agent.DeriveSeed(o.seed, seedElector), log
	el, err := site.New(ec)
	if err != nil {
		return nil, fmt.Errorf("site leader election: %w", err)
	}
	if err := reg.Register(&modelCollector{trust: fl, leading: el.IsLeader, now: time.Now}); err != nil {
		return nil, fmt.Errorf("register the model freshness metrics: %w", err)
	}
	if err := reg.Register(&traceCollector{stats: rec.Stats}); err != nil {
		return nil, fmt.Errorf("register the site trace metrics: %w", err)
	}
	p.components = []agent.Component{rec, el}
	return p, nil
}

// Names of the seeds derived from the run's (agent.DeriveSeed); the
// annotator's is agent.SeedAnnotator.
const (
	seedTrace     = "trace-recorder"
	seedFLClient  = "fl-client"
	seedSiteFL    = "site-fl"
	seedInstaller = "model-installer"
	seedElector   = "site-elector"
	// seedDependencies: the dependency graph publisher's retry jitter.
	seedDependencies = "dependency-graph"
)

// componentSeeds are the seeds the run's seed gives each component, by
// name (for the start log and tests).
func componentSeeds(seed uint64) map[string]uint64 {
	out := map[string]uint64{}
	for _, name := range []string{agent.SeedAnnotator, seedTrace, seedFLClient, seedSiteFL, seedInstaller, seedElector, seedDependencies} {
		out[name] = agent.DeriveSeed(seed, name)
	}
	return out
}

// trustSource is the FL client's model-trust state (flclient.Client).
type trustSource interface {
	TrustStatus() (flclient.TrustStatus, error)
}

var _ trustSource = (*flclient.Client)(nil)

// Model freshness metrics, read from the FL client at scrape time. Only
// the site leader runs the client, so only it exports them (a standby's
// agent.db holds the state of its last term, not the site's).
var (
	descModelFrozen = prometheus.NewDesc("edgesched_agent_model_frozen",
		"1 while the site's model feed is frozen for that reason (behind_announcements: --freeze-after; model_too_old: --model-max-age), else 0; exported by the site leader.",
		[]string{"reason"}, nil)
	descModelAge = prometheus.NewDesc("edgesched_agent_model_age_seconds",
		"Age of the installed model: now minus its signed creation time; exported by the site leader once a model is installed.", nil, nil)
	descModelVersion = prometheus.NewDesc("edgesched_agent_model_version",
		"Version of the installed model (the rollback floor); exported by the site leader.", nil, nil)
)

// modelCollector exports the model freshness metrics while leading.
type modelCollector struct {
	trust   trustSource
	leading func() bool
	now     func() time.Time
}

func (c *modelCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descModelFrozen
	ch <- descModelAge
	ch <- descModelVersion
}

func (c *modelCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.leading() {
		return
	}
	s, err := c.trust.TrustStatus()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descModelFrozen, fmt.Errorf("model trust status: %w", err))
		return
	}
	for _, reason := range []string{flclient.FrozenBehind, flclient.FrozenAged} {
		v := 0.0
		if s.Frozen != nil && s.Frozen.Reason == reason {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descModelFrozen, prometheus.GaugeValue, v, reason)
	}
	ch <- prometheus.MustNewConstMetric(descModelVersion, prometheus.GaugeValue, float64(s.HighestVersion))
	if !s.ModelCreated.IsZero() {
		ch <- prometheus.MustNewConstMetric(descModelAge, prometheus.GaugeValue, c.now().Sub(s.ModelCreated).Seconds())
	}
}

// Site trace metrics, read from the recorder at scrape time (every agent
// records the trace, leader or not). They count since the recorder's Run
// started.
var (
	descTraceEvents = prometheus.NewDesc("edgesched_agent_trace_events_total",
		"Site trace events by result: recorded, skipped (already recorded), pruned (retention), refused (a record the store's format refuses; logged with the reason), malformed (an annotation or pod that could not be read).",
		[]string{"result"}, nil)
	descTraceWriteErrors = prometheus.NewDesc("edgesched_agent_trace_write_errors_total",
		"Failed site trace store transactions (retried with backoff).", nil, nil)
	descTraceFlows = prometheus.NewDesc("edgesched_agent_trace_flows_published_total",
		"Flows annotations written on this agent's Node.", nil, nil)
)

// traceCollector exports the site trace recorder's counters.
type traceCollector struct{ stats func() trace.RecorderStats }

func (c *traceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descTraceEvents
	ch <- descTraceWriteErrors
	ch <- descTraceFlows
}

func (c *traceCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for _, r := range []struct {
		result string
		n      int
	}{{"recorded", s.Recorded}, {"skipped", s.Skipped}, {"pruned", s.Pruned}, {"refused", s.Refused}, {"malformed", s.Malformed}} {
		ch <- prometheus.MustNewConstMetric(descTraceEvents, prometheus.CounterValue, float64(r.n), r.result)
	}
	ch <- prometheus.MustNewConstMetric(descTraceWriteErrors, prometheus.CounterValue, float64(s.WriteErrors))
	ch <- prometheus.MustNewConstMetric(descTraceFlows, prometheus.CounterValue, float64(s.FlowsPublished))
}

// defaultModelConfigMapKey is the plugin's default modelConfigMapKey.
const defaultModelConfigMapKey = kubefmt.DefaultModelConfigMapKey
