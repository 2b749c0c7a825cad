// Package coordcmd is edge-coordinator's command line: flags, logging,
// the NATS connection, the metrics endpoint and signals, wired to package
// coordinator. cmd/edge-coordinator only calls Main. Exit codes: 0
// success, -h, --version and the version verb; 2 for a bad command line
// (unknown command or flag, a bad or missing value); 1 when the
// coordinator or a store command fails (docs/cli.md).
package coordcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/internal/backoff"
	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/memlimit"
	"github.com/edgesched/edgesched/internal/natsflags"
	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/sage"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/scenario"
)

// FailpointEnv names the environment variable crash tests use: NAME or
// NAME:N makes the process SIGKILL itself the N-th time (default first) it
// reaches failpoint NAME (coordinator.Fail*).
const FailpointEnv = "EDGESCHED_FAILPOINT"

// Main runs edge-coordinator with args until ctx ends; it returns the
// process exit code (docs/cli.md: 0 success, 1 failure, 2 usage error).
// The version and the help go to stdout, everything else to stderr.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Execute(ctx, NewCommand(), args, stdout, stderr)
}

// NewCommand is edge-coordinator's command line: the coordinator, the
// regional aggregator (region), the store's verbs (backup, check,
// restore), version and completion.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "edge-coordinator [flags]",
		Short: "Run edgesched's federated learning: rounds over NATS, aggregation, signed models",
		Long: `edge-coordinator is the cloud side of edgesched's federated learning: it runs
rounds over NATS, aggregates the sites' updates, and signs and publishes models
(docs/federated.md).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	run := coordinatorFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), cmd.ErrOrStderr()) }
	cmd.AddCommand(newRegionCommand(), newBackupCommand(), newCheckCommand(), newRestoreCommand())
	cli.AddVersion(cmd, "edge-coordinator")
	cli.EnforceContract(cmd)
	return cmd
}

// coordinatorFlags defines the coordinator's flags on fs and returns what
// runs it with their values.
func coordinatorFlags(fs *pflag.FlagSet) func(ctx context.Context, stderr io.Writer) error {
	d := coordinator.DefaultConfig()
	o := &coordOptions{}
	fs.StringVar(&o.data, "data", defaultData, "data directory (coordinator.db)")
	fs.StringVar(&o.keyFile, "key", "", "private key that signs published models (edgectl model keygen); required")
	fs.StringVar(&o.sitesDir, "sites", "", "directory of SITE.pub keys of the sites allowed to send updates; required")
	fs.StringVar(&o.model, "model", "edge", "initial model when the registry is empty: a shipped name or a .esm file")
	fs.BoolVar(&o.trainSage, "train-graphsage", false, "experimental: the initial model (one that reads dep_affinity, like edge-sage) carries the shipped GraphSAGE encoder and decoder, so rounds train them with the network (sites fine-tune them on their call graphs; docs/policy.md); a model that already carries weights trains them anyway")
	fs.StringVar(&o.calib, "calibrate", "builtin:retail-fleet", "scenario whose simulated states calibrate the int8 quantization of each model")
	fs.StringVar(&o.mode, "mode", string(d.Mode), "round mode: sync or async (FedBuff)")
	fs.DurationVar(&o.roundDur, "round-duration", d.RoundDuration, "sync round deadline")
	fs.IntVar(&o.minUpdates, "min-updates", d.MinUpdates, "sync round quorum")
	fs.IntVar(&o.buffer, "buffer", d.Buffer, "async: updates per aggregation")
	fs.IntVar(&o.maxStale, "max-staleness", 0, "async: refuse updates trained this many versions ago or more (0: any)")
	fs.IntVar(&o.rounds, "rounds", 0, "with --auto-rounds: stop after this many rounds (0: no limit)")
	fs.BoolVar(&o.autoRounds, "auto-rounds", false, "open the next round as soon as one ends")
	fs.BoolVar(&o.manualPub, "manual-publish", false, "keep round models as candidates until 'edgectl model promote'")
	fs.StringVar(&o.rule, "aggregator", d.Aggregator.Rule, "fedavg, fedbuff, median, trimmed-mean, krum or multi-krum")
	fs.Float64Var(&o.trimBeta, "trim-beta", d.Aggregator.TrimBeta, "trimmed mean: share trimmed at each end")
	fs.IntVar(&o.byzantine, "byzantine", d.Aggregator.Byzantine, "krum: Byzantine sites tolerated")
	fs.Float64Var(&o.clip, "clip", d.ClipNorm, "L2 clip of every update when it is aggregated (0: off)")
	fs.Float64Var(&o.maxNorm, "max-update-norm", d.MaxUpdateNorm, "refuse updates whose L2 norm is above this as too_large (0: no bound)")
	fs.Int64Var(&o.maxSamples, "max-samples", d.MaxSamples, "refuse updates claiming more samples than this as too_heavy (0: no bound)")
	fs.BoolVar(&o.storePay, "store-payloads", false, "fedavg/fedbuff: store every accepted update and combine them when the round closes, instead of keeping running sums")
	fs.IntVar(&o.auditKeep, "audit-keep", d.AuditKeep, "audit events kept in coordinator.db, the oldest forgotten first (0: all)")
	fs.IntVar(&o.roundKeep, "round-keep", d.RoundKeep, fmt.Sprintf("round records kept in coordinator.db, the oldest forgotten first (0: all; at least %d)", d.KeepUpdates))
	fs.DurationVar(&o.streamAge, "update-max-age", d.UpdateMaxAge, "update stream: messages expire after this (0: never)")
	fs.Int64Var(&o.streamBytes, "update-max-bytes", d.UpdateMaxBytes, "update stream: size limit; when full, sites keep their updates and retry (0: none)")
	fs.Int64Var(&o.maxInflight, "max-inflight-bytes", d.MaxInflightBytes, maxInflightUsage)
	fs.IntVar(&o.replicas, "replicas", 1, "JetStream replicas of the update stream, state bucket and model store (3 on a cluster of 3 or more servers tolerates losing one)")
	fs.StringVar(&o.backupDir, "backup-dir", "", "directory of online backups of coordinator.db (default DATA/backups)")
	fs.DurationVar(&o.backupEvery, "backup-every", 0, "write an online backup this often (0: only on request, admin endpoint "+coordinator.EndpointStoreBackup+")")
	fs.IntVar(&o.backupKeep, "backup-keep", d.BackupKeep, "online backups kept in --backup-dir")
	fs.Float64Var(&o.dpNoise, "dp-noise", 0, "client-level DP noise multiplier (0: off)")
	fs.Float64Var(&o.dpClip, "dp-clip", 1, "client-level DP clip norm")
	fs.Float64Var(&o.dpDelta, "dp-delta", 1e-5, "client-level DP delta for the reported epsilon")
	fs.Float64Var(&o.serverLR, "server-lr", d.ServerLR, "server learning rate on the aggregate")
	fs.IntVar(&o.iters, "local-iterations", d.Local.Iterations, "PPO iterations per site per round")
	fs.IntVar(&o.episodes, "local-episodes", d.Local.Episodes, "episodes per PPO iteration")
	fs.Float64Var(&o.lr, "local-lr", d.Local.LR, "local learning rate")
	fs.Float64Var(&o.proxMu, "prox-mu", 0, "FedProx proximal coefficient (0: FedAvg)")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address (e.g. :9464)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of DP noise and jitter")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.regionsDir, "regions", "", "directory of regional aggregators: REGION.pub keys and REGION.sites lists (hierarchical rounds; docs/federated.md)")
	fs.StringSliceVar(&o.modelKeys, "model-keys", nil, "further model-signing public keys whose signatures on stored models are also accepted (key rotation): files or directories of *.pub (*.retired refused), comma-separated or repeated")
	fs.BoolVar(&o.ha, "ha", false, "run as one of several replicas, one active (a JetStream KV lease); state shipped as checkpoints to the cluster (docs/federated.md)")
	fs.StringVar(&o.replicaID, "replica-id", "", "with --ha: this replica's name (default the host name)")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", coordinator.DefaultLeaseTTL, "with --ha: the active's lease lasts this long unrenewed; a standby takes over within about 1.25 times it (sets the lease bucket's TTL when this replica creates it; an existing bucket keeps its own)")
	fs.DurationVar(&o.ckptEvery, "checkpoint-every", coordinator.DefaultCheckpointEvery, "with --ha: ship the store this often when it changed (and before every announcement and publication)")
	o.natsFlags = natsflags.AddPFlags(fs, natsflags.Options{DefaultServer: nats.DefaultURL, Inbox: natsauth.CoordinatorInboxPrefix, LegacyServerFlag: true})
	return func(ctx context.Context, stderr io.Writer) error { return runCoordinator(ctx, stderr, d, o) }
}

// coordOptions are the coordinator's flags, as parsed (coordinatorFlags
// defines them with their defaults).
type coordOptions struct {
	data        string
	keyFile     string
	sitesDir    string
	model       string
	trainSage   bool
	calib       string
	mode        string
	roundDur    time.Duration
	minUpdates  int
	buffer      int
	maxStale    int
	rounds      int
	autoRounds  bool
	manualPub   bool
	rule        string
	trimBeta    float64
	byzantine   int
	clip        float64
	maxNorm     float64
	maxSamples  int64
	storePay    bool
	auditKeep   int
	roundKeep   int
	streamAge   time.Duration
	streamBytes int64
	maxInflight int64
	replicas    int
	backupDir   string
	backupEvery time.Duration
	backupKeep  int
	dpNoise     float64
	dpClip      float64
	dpDelta     float64
	serverLR    float64
	iters       int
	episodes    int
	lr          float64
	proxMu      float64
	metricsAddr string
	seed        uint64
	logLevel    string
	regionsDir  string
	modelKeys   []string
	ha          bool
	replicaID   string
	leaseTTL    time.Duration
	ckptEvery   time.Duration
	natsFlags   *natsflags.Flags
}

// runCoordinator runs the coordinator o describes (d: the defaults)
// until ctx ends; the log goes to stderr.
func runCoordinator(ctx context.Context, stderr io.Writer, d coordinator.Config, o *coordOptions) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return cli.Usagef("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if ml, err := memlimit.Apply(memlimit.DefaultConfig()); err != nil {
		log.Warn("memory limit not applied", "err", err)
	} else if ml.Source != "" {
		log.Info("Go memory limit", "bytes", ml.Limit, "from", ml.Source)
	}
	if o.keyFile == "" || o.sitesDir == "" {
		return cli.Usagef("--key and --sites are required")
	}
	if o.maxInflight < 0 {
		return cli.Usagef(maxInflightRefusal, o.maxInflight)
	}
	signer, sites, err := keyAndSites(o.keyFile, o.sitesDir)
	if err != nil {
		return err
	}
	initial, err := loadModel(o.model)
	if err != nil {
		return fmt.Errorf("--model: %w", err)
	}
	if o.trainSage && initial.Sage == nil {
		if !initial.Net.ReadsInput(policy.AffinityFeature) {
			return cli.Usagef("--train-graphsage: model %s does not read dep_affinity, so it has no GraphSAGE weights to train (edge-sage does)", o.model)
		}
		initial.Sage = policy.DefaultSage()
	}
	cfg := d
	// /metrics: the coordinator's series, the Go runtime's, the process's
	// and edgesched_build_info
	reg := prometheus.NewRegistry()
	if err := cli.RegisterProcessMetrics(reg, "edge-coordinator"); err != nil {
		return err
	}
	cfg.Registerer = reg
	if o.regionsDir != "" {
		if cfg.Regions, err = federated.LoadRegions(o.regionsDir); err != nil {
			return fmt.Errorf("--regions: %w", err)
		}
	}
	if len(o.modelKeys) > 0 {
		if cfg.ModelKeys, err = quant.LoadKeyring(o.modelKeys...); err != nil {
			return fmt.Errorf("--model-keys: %w", err)
		}
	}
	nconn, err := o.natsFlags.Resolve(nil)
	if err != nil {
		return err // a connection that cannot be made: a failure (docs/cli.md)
	}
	url, conn := &nconn.URL, nconn.Config
	connOpts, err := conn.Options()
	if err != nil {
		return fmt.Errorf("NATS connection flags: %w", err)
	}
	cfg.DataDir, cfg.Sites, cfg.Signer, cfg.Logger, cfg.Seed = o.data, sites, signer, log, o.seed
	cfg.Mode, cfg.RoundDuration, cfg.MinUpdates, cfg.Buffer, cfg.MaxStaleness = federated.Mode(o.mode), o.roundDur, o.minUpdates, o.buffer, o.maxStale
	cfg.Rounds, cfg.AutoRounds, cfg.AutoPublish = o.rounds, o.autoRounds, !o.manualPub
	cfg.Aggregator.Rule, cfg.Aggregator.TrimBeta, cfg.Aggregator.Byzantine = o.rule, o.trimBeta, o.byzantine
	cfg.ClipNorm, cfg.ServerLR, cfg.MaxUpdateNorm, cfg.MaxSamples, cfg.StorePayloads = o.clip, o.serverLR, o.maxNorm, o.maxSamples, o.storePay
	cfg.AuditKeep, cfg.RoundKeep, cfg.UpdateMaxAge, cfg.UpdateMaxBytes, cfg.Replicas = o.auditKeep, o.roundKeep, o.streamAge, o.streamBytes, o.replicas
	cfg.MaxInflightBytes = o.maxInflight
	cfg.BackupDir, cfg.BackupEvery, cfg.BackupKeep = o.backupDir, o.backupEvery, o.backupKeep
	cfg.HA, cfg.ReplicaID, cfg.LeaseTTL, cfg.CheckpointEvery = o.ha, o.replicaID, o.leaseTTL, o.ckptEvery
	if cfg.HA && cfg.ReplicaID == "" {
		if cfg.ReplicaID, err = os.Hostname(); err != nil {
			return fmt.Errorf("--replica-id: %w", err)
		}
	}
	cfg.Local = federated.LocalTraining{Iterations: o.iters, Episodes: o.episodes, LR: o.lr, ProxMu: o.proxMu}
	if o.dpNoise > 0 {
		cfg.DP = &federated.DPConfig{ClipNorm: o.dpClip, NoiseMultiplier: o.dpNoise, Delta: o.dpDelta}
	}
	if cfg.Calibrate, err = ScenarioCalibration(o.calib); err != nil {
		return fmt.Errorf("--calibrate: %w", err)
	}
	if fp := os.Getenv(FailpointEnv); fp != "" {
		cfg.Failpoint = failpoint(fp)
	}
	var c *coordinator.Coordinator
	if !cfg.HA {
		// with --ha the store is opened once this replica is active
		if c, err = coordinator.New(cfg); err != nil {
			return err
		}
		defer c.Close()
		if err := c.Bootstrap(ctx, initial); err != nil {
			return err
		}
	} else if err := cfg.Validate(); err != nil {
		return err
	}
	connOpts = append(connOpts, nats.Name("edge-coordinator"), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond), nats.ReconnectJitter(250*time.Millisecond, time.Second),
		// refusals by the server (permissions) arrive asynchronously
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { log.Error("NATS", "err", err) }))
	// A server that is not up yet (a restart of the whole site, NATS
	// starting after the coordinator) is waited for, not fatal.
	connOpts = append(connOpts, nats.RetryOnFailedConnect(true))
	nc, err := nats.Connect(*url, connOpts...)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", *url, err)
	}
	defer nc.Drain()
	if err := waitConnected(ctx, nc, o.seed, log); err != nil {
		if errors.Is(err, context.Canceled) {
			log.Info("coordinator stopped before NATS was reachable")
			return nil
		}
		return err
	}
	if o.metricsAddr != "" {
		ln, err := net.Listen("tcp", o.metricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		log.Info("metrics", "addr", ln.Addr().String())
	}
	log.Info("coordinator up", "nats", *url, "nats_context", nconn.Context, "tls", conn.Secure(), "nkey", conn.NKeySeedFile != "", "sites", len(sites.Sites()), "mode", cfg.Mode, "aggregator", cfg.Aggregator.Rule)
	if cfg.HA {
		err = coordinator.RunReplica(ctx, cfg, nc, initial)
	} else {
		err = c.Run(ctx, nc)
	}
	if errors.Is(err, context.Canceled) || (err != nil && ctx.Err() != nil) {
		// stopped (a bus call cut short by the stop may report a timeout)
		log.Info("coordinator stopped", "last_err", err)
		return nil
	}
	return err
}

// keyAndSites reads the signing key (--key) and the registry of sites
// (--sites).
func keyAndSites(keyFile, sitesDir string) (*quant.Signer, *federated.Registry, error) {
	signer, err := quant.ReadSigner(keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--key: %w", err)
	}
	sites, err := federated.LoadRegistry(sitesDir)
	if err != nil {
		return nil, nil, fmt.Errorf("--sites: %w", err)
	}
	return signer, sites, nil
}

// waitConnected waits, with capped jittered backoff, until nc has
// connected (it retries on its own), logging every half minute.
func waitConnected(ctx context.Context, nc *nats.Conn, seed uint64, log *slog.Logger) error {
	b := backoff.New(50*time.Millisecond, 2*time.Second, seed^0xc0)
	start, said := time.Now(), time.Time{}
	for !nc.IsConnected() {
		if time.Since(said) >= 30*time.Second {
			log.Warn("NATS not reachable yet; retrying", "servers", nc.Servers(), "waited", time.Since(start).Round(time.Second))
			said = time.Now()
		}
		if !b.Sleep(ctx) {
			return ctx.Err()
		}
	}
	return nil
}

func loadModel(ref string) (*nn.Model, error) {
	if strings.HasSuffix(ref, ".esm") || strings.ContainsRune(ref, '/') {
		d, err := nn.ReadFile(ref)
		if err != nil {
			return nil, err
		}
		return d.Model, nil
	}
	return models.Load(ref)
}

// ScenarioCalibration returns a calibration source: one replay (or
// inflate, for openb-based scenarios without times) of the scenario with
// the candidate model, a seeded sample of 20,000 rows.
func ScenarioCalibration(ref string) (func(context.Context, *nn.Model) ([]float32, error), error) {
	l, err := scenario.Load(ref)
	if err != nil {
		return nil, err
	}
	env, err := sage.NewEnv(l.Cluster, l.Workload)
	if err != nil {
		return nil, err
	}
	rc := engine.DefaultRunConfig(engine.Replay)
	if !env.HasTimes {
		rc = engine.DefaultRunConfig(engine.Inflate)
	}
	rc.Seed = 9001
	// the partners come from the candidate's GraphSAGE weights (a round
	// trains them): the environment is annotated again when they change
	var mu sync.Mutex
	envID := env.PartnersEncoder
	return func(ctx context.Context, m *nn.Model) ([]float32, error) {
		mu.Lock()
		defer mu.Unlock()
		if w := m.SageWeights(); w != nil && w.ID() != envID && len(env.Edges) > 0 {
			next, err := sage.NewEnvWith(l.Cluster, l.Workload, w)
			if err != nil {
				return nil, fmt.Errorf("calibration scenario with the model's GraphSAGE weights: %w", err)
			}
			env, envID = next, next.PartnersEncoder
		}
		rows, _, err := quant.CollectRows(ctx, env, m.Float(), []engine.RunConfig{rc}, 20000, 9001)
		return rows, err
	}, nil
}

// failpoint kills the process (SIGKILL, like kill -9) at a named point.
func failpoint(spec string) func(string) {
	name, nth := spec, 1
	if i := strings.LastIndexByte(spec, ':'); i > 0 {
		if n, err := strconv.Atoi(spec[i+1:]); err == nil && n > 0 {
			name, nth = spec[:i], n
		}
	}
	hits := 0
	return func(at string) {
		if at != name {
			return
		}
		if hits++; hits == nth {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // never returns
		}
	}
}
