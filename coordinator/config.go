package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgesched/edgesched/coordinator/aggregation"
	"github.com/edgesched/edgesched/coordinator/ingest"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
)

// ErrConfig wraps every refusal of a configuration.
var ErrConfig = errors.New("coordinator: bad config")

// Clock is the coordinator's time source; tests inject one to drive round
// deadlines.
type Clock interface{ Now() time.Time }

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// Config configures a coordinator. Start from DefaultConfig; the zero
// values of optional fields are documented.
type Config struct {
	// DataDir holds coordinator.db (created).
	DataDir string
	// Sites may send updates; their signatures are checked against it.
	Sites *federated.Registry
	// Signer signs every published model.
	Signer *quant.Signer
	// ModelKeys are the other model-signing keys whose signatures on the
	// registry's own stored models are accepted: the previous signing key
	// during a key rotation (docs/security.md), so the current base model
	// stays usable until it is re-signed. Keys retired in it are refused.
	// nil: only Signer's.
	ModelKeys *quant.Keyring
	// Aggregator is the aggregation rule.
	Aggregator federated.AggregatorConfig
	// ClipNorm clips every update's L2 norm when it is aggregated
	// (DefaultClipNorm; 0 turns clipping off; with DP, DP's ClipNorm
	// applies). Each round records the value it opened with.
	ClipNorm float64
	// MaxUpdateNorm refuses, when it arrives, an update whose L2 norm is
	// above it (reason too_large; DefaultMaxUpdateNorm; 0: no bound). An
	// honest update is a few local training steps; one hundreds of times
	// the clip norm is broken or hostile.
	MaxUpdateNorm float64
	// MaxSamples refuses an update claiming more samples than this (reason
	// too_heavy; DefaultMaxSamples; 0: no bound): under FedAvg the claimed
	// count is the update's weight.
	MaxSamples int64
	// DP, when set, adds client-level Gaussian noise to each aggregate and
	// accounts the privacy loss (reported in round stats).
	DP *federated.DPConfig
	// Mode of new rounds: sync, or async (FedBuff: aggregate every Buffer
	// updates).
	Mode federated.Mode
	// RoundDuration is a sync round's deadline after it opens.
	RoundDuration time.Duration
	// MinUpdates is a sync round's quorum; at the deadline with fewer
	// updates the round fails and the model stays. At most the number of
	// registered sites. An async round closes when its buffer is full:
	// its quorum is the smaller of MinUpdates and Buffer.
	MinUpdates int
	// Buffer is the async mode's aggregation size. Under a robust rule or
	// DP an async round takes one update per site, so Buffer is at most
	// the number of registered sites.
	Buffer int
	// MaxStaleness refuses async updates trained more than this many
	// versions ago (0: any).
	MaxStaleness int
	// Local is what sites are asked to train per round.
	Local federated.LocalTraining
	// ServerLR scales the aggregate before it is applied (default 1).
	ServerLR float64
	// AutoRounds opens the next round as soon as one ends (sync), until
	// Rounds rounds have run (0: no limit). Without it rounds start on
	// request (admin round.start).
	AutoRounds bool
	Rounds     int
	// AutoPublish publishes every round's model; otherwise models wait as
	// candidates for 'edgectl model promote'.
	AutoPublish bool
	// Calibrate returns raw feature rows for quantizing a model (usually
	// quant.CollectRows on the fleet's scenario). Required.
	Calibrate func(ctx context.Context, m *nn.Model) ([]float32, error)
	// Calibration options of quantization (zero Method: the method of
	// quant.DefaultCalibration; zero Rounding: adaptive).
	Calibration quant.CalibrationOptions
	// Seed drives the DP noise, with the round number and the store's
	// secret (store.KeyDPSecret), which keeps the noise unpredictable
	// whatever the seed.
	Seed uint64
	// Clock (nil: the wall clock).
	Clock Clock
	// Logger (nil: discard).
	Logger *slog.Logger
	// Registerer receives the coordinator's metrics (nil: a private
	// registry, see Coordinator.Gatherer).
	Registerer prometheus.Registerer
	// PollInterval is how often deadlines are checked (default 200ms).
	PollInterval time.Duration
	// DuplicateWindow is the update stream's de-duplication window
	// (default 2 minutes); older replays are caught by the per-site
	// high-water marks.
	DuplicateWindow time.Duration
	// KeepUpdates is how many rounds' stored updates are kept (default 10).
	KeepUpdates int
	// AuditKeep and RoundKeep are how many audit events and round records
	// are kept, the oldest forgotten first (DefaultAuditKeep,
	// DefaultRoundKeep; 0: all; RoundKeep at least KeepUpdates).
	AuditKeep, RoundKeep int
	// UpdateMaxAge and UpdateMaxBytes limit the update stream (the
	// coordinator also removes what it has judged, below its consumer's
	// ack floor, every PollInterval): older messages expire, and when
	// the stream is full new ones are refused (sites keep them in their
	// outbox and retry). Defaults DefaultUpdateMaxAge, DefaultUpdateMaxBytes.
	UpdateMaxAge   time.Duration
	UpdateMaxBytes int64
	// Replicas is how many servers of a JetStream cluster hold the update
	// stream, the state bucket and the model store (and so the
	// coordinator's consumer): 3 in production tolerates the loss of one
	// server with nothing lost. 0 means 1 (a single server); at most
	// MaxReplicas, and no more than the cluster's servers (the server
	// refuses the stream otherwise).
	Replicas int
	// HA runs the coordinator as one of several replicas sharing the
	// JetStream cluster, one of them active (RunReplica; docs/federated.md
	// "Highly available coordinator"). false: a single coordinator (Run).
	HA bool
	// ReplicaID names this replica in the lease and the checkpoints
	// (required with HA; edge-coordinator uses the host name).
	ReplicaID string
	// LeaseTTL is how long the active's lease lasts unrenewed (it renews
	// it every quarter): a standby takes over within about 1.25 LeaseTTL
	// of the active's death (0: DefaultLeaseTTL; at least 1s).
	LeaseTTL time.Duration
	// CheckpointEvery is how often the active ships its store when it
	// changed (besides before every announcement and publication), which
	// bounds what a new active judges again from the update stream
	// (0: DefaultCheckpointEvery).
	CheckpointEvery time.Duration
	// Batch is the most updates judged in one store transaction (one
	// fsync; default 256); Verifiers is how many check signatures and
	// payloads in parallel, and add accepted updates to a summing round's
	// sums (0: GOMAXPROCS).
	Batch     int
	Verifiers int
	// MaxInflightBytes bounds the bytes of the update messages ingest
	// holds between their fetch and their verdict (ingest.Pipeline; 0:
	// ingest.DefaultMaxInflightBytes): a flood of large updates waits on
	// the stream instead of in memory. One message larger than it still
	// passes, alone.
	MaxInflightBytes int64
	// StorePayloads stores every accepted update's payload and combines
	// them when the round closes, even when the rule could keep running
	// sums instead (docs/federated.md "Summing rounds"): FedAvg and
	// FedBuff rounds with a sample cap (or DP) and a clip norm or norm
	// bound sum by default. The robust rules always store payloads.
	StorePayloads bool
	// BackupDir receives online backups of the store every BackupEvery
	// (0: none), keeping the newest BackupKeep (default 3); the admin
	// endpoint store.backup writes one on request. "" is DataDir/backups.
	BackupDir   string
	BackupEvery time.Duration
	BackupKeep  int
	// Regions, when set, are the regional aggregators whose aggregates
	// the root accepts (docs/federated.md "Hierarchical rounds"): each
	// region's key, trusted for that region's sites only. Every regional
	// site must be registered in Sites. nil: every site sends directly.
	Regions *federated.Regions
	// Failpoint, when set, is called at named points of the state machine
	// (FailUpdateCommitted, FailRegionalAcked, FailRoundClosed,
	// FailModelStored, FailModelPublished); crash tests make it kill the
	// process there.
	Failpoint func(name string)
}

// Failpoints (see Config.Failpoint).
const (
	FailUpdateCommitted = "update.committed" // update recorded, not yet acked on the stream
	FailRegionalAcked   = "regional.acked"   // regional aggregate accepted and acked, maybe not checkpointed
	FailRoundClosed     = "round.closed"     // round marked aggregating, nothing aggregated yet
	FailModelStored     = "model.stored"     // new model stored, not yet published
	FailModelPublished  = "model.published"  // model on the bus, round record not final
)

func (c *Config) fail(name string) {
	if c.Failpoint != nil {
		c.Failpoint(name)
	}
}

// Defaults of the bounds on updates and of the store's and stream's
// retention (docs/federated.md "Bounds").
const (
	// DefaultClipNorm: honest updates of local PPO training (3
	// iterations x 2 episodes, learning rate 1e-3) have L2 norms well
	// below it (the demo's four sites: at most 3.9, 1.7 and 1.2 in rounds
	// 1-3); the round's stats record the largest (update_norm_max).
	DefaultClipNorm       = 10
	DefaultMaxUpdateNorm  = 1000
	DefaultMaxSamples     = 100_000_000
	DefaultAuditKeep      = 10_000
	DefaultRoundKeep      = 1000
	DefaultUpdateMaxAge   = 72 * time.Hour
	DefaultUpdateMaxBytes = 4 << 30
	// MaxReplicas is JetStream's largest replica count.
	MaxReplicas = 5
)

// DefaultConfig is synchronous FedAvg rounds of 5 minutes with a quorum of
// one update, updates clipped to DefaultClipNorm.
func DefaultConfig() Config {
	return Config{
		Aggregator: federated.DefaultAggregatorConfig(),
		Mode:       federated.Sync, RoundDuration: 5 * time.Minute, MinUpdates: 1, Buffer: 4,
		Local:    federated.LocalTraining{Iterations: 3, Episodes: 2, LR: 1e-3},
		ServerLR: 1, AutoPublish: true, Calibration: quant.DefaultCalibration(),
		ClipNorm: DefaultClipNorm, MaxUpdateNorm: DefaultMaxUpdateNorm, MaxSamples: DefaultMaxSamples,
		PollInterval: 200 * time.Millisecond, DuplicateWindow: 2 * time.Minute, KeepUpdates: 10,
		AuditKeep: DefaultAuditKeep, RoundKeep: DefaultRoundKeep, UpdateMaxAge: DefaultUpdateMaxAge, UpdateMaxBytes: DefaultUpdateMaxBytes,
		Batch: 256, BackupKeep: 3,
	}
}

// leaseTTL and checkpointEvery apply the defaults of their zero values.
func (c *Config) leaseTTL() time.Duration {
	if c.LeaseTTL == 0 {
		return DefaultLeaseTTL
	}
	return c.LeaseTTL
}

func (c *Config) checkpointEvery() time.Duration {
	if c.CheckpointEvery == 0 {
		return DefaultCheckpointEvery
	}
	return c.CheckpointEvery
}

// clipNorm is the clip norm new rounds record: DP's when DP is on.
func (c *Config) clipNorm() float64 {
	if c.DP != nil {
		return c.DP.ClipNorm
	}
	return c.ClipNorm
}

// sumConfig is what decides whether and how new rounds sum their updates.
func (c *Config) sumConfig() aggregation.SumConfig {
	return aggregation.SumConfig{Aggregator: c.Aggregator, StorePayloads: c.StorePayloads, MaxSamples: c.MaxSamples,
		UnitWeight: c.DP != nil, ClipNorm: c.clipNorm(), MaxUpdateNorm: c.MaxUpdateNorm}
}

// Validate names the first bad field.
func (c *Config) Validate() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, a...))
	}
	switch {
	case c.DataDir == "":
		return bad("DataDir", "required")
	case c.Sites == nil || len(c.Sites.Sites()) == 0:
		return bad("Sites", "no registered sites")
	case c.Signer == nil:
		return bad("Signer", "required (published models are signed)")
	case c.ModelKeys != nil && slices.Contains(c.ModelKeys.Retired(), c.Signer.ID):
		return bad("Signer", "key %s is retired in ModelKeys", c.Signer.ID)
	case c.Calibrate == nil:
		return bad("Calibrate", "required (published models are quantized)")
	case c.Mode != federated.Sync && c.Mode != federated.Async:
		return bad("Mode", "%q, want sync or async", c.Mode)
	case c.RoundDuration <= 0:
		return bad("RoundDuration", "%v, want > 0", c.RoundDuration)
	case c.MinUpdates < 1:
		return bad("MinUpdates", "%d, want >= 1", c.MinUpdates)
	case c.Mode == federated.Sync && c.MinUpdates > len(c.Sites.Sites()):
		return bad("MinUpdates", "%d, but %d sites are registered: no round could reach its quorum", c.MinUpdates, len(c.Sites.Sites()))
	case c.Mode == federated.Async && c.Buffer < 1:
		return bad("Buffer", "%d, want >= 1", c.Buffer)
	case c.MaxStaleness < 0 || c.Rounds < 0 || c.KeepUpdates < 1:
		return bad("MaxStaleness/Rounds/KeepUpdates", "must be >= 0 (KeepUpdates >= 1)")
	case c.RoundKeep < 0 || c.RoundKeep > 0 && c.RoundKeep < c.KeepUpdates:
		return bad("RoundKeep", "%d, want 0 (all) or at least KeepUpdates (%d)", c.RoundKeep, c.KeepUpdates)
	case !(c.ServerLR > 0 && c.ServerLR <= 10):
		return bad("ServerLR", "%v, want (0, 10]", c.ServerLR)
	case !(c.ClipNorm >= 0) || math.IsInf(c.ClipNorm, 0):
		return bad("ClipNorm", "%v, want finite and >= 0", c.ClipNorm)
	case !(c.MaxUpdateNorm >= 0) || math.IsInf(c.MaxUpdateNorm, 0):
		return bad("MaxUpdateNorm", "%v, want finite and >= 0", c.MaxUpdateNorm)
	case c.MaxSamples < 0:
		return bad("MaxSamples", "%d, want >= 0", c.MaxSamples)
	case c.AuditKeep < 0 || c.Batch < 1 || c.Verifiers < 0 || c.BackupKeep < 1 || c.BackupEvery < 0:
		return bad("AuditKeep/Batch/Verifiers/BackupKeep/BackupEvery", "AuditKeep >= 0, Batch >= 1, Verifiers >= 0, BackupKeep >= 1, BackupEvery >= 0")
	case c.MaxInflightBytes < 0:
		return bad("MaxInflightBytes", "%d, want >= 0 (0: %d)", c.MaxInflightBytes, ingest.DefaultMaxInflightBytes)
	case c.UpdateMaxAge < 0 || c.UpdateMaxBytes < 0:
		return bad("UpdateMaxAge/UpdateMaxBytes", "must be >= 0 (0: no limit)")
	case c.Replicas < 0 || c.Replicas > MaxReplicas:
		return bad("Replicas", "%d, want 1 to %d (0: 1)", c.Replicas, MaxReplicas)
	case c.HA && c.ReplicaID == "":
		return bad("ReplicaID", "required with HA")
	case c.LeaseTTL < 0 || (c.LeaseTTL > 0 && c.LeaseTTL < time.Second):
		return bad("LeaseTTL", "%v, want >= 1s (0: %v)", c.LeaseTTL, DefaultLeaseTTL)
	case c.CheckpointEvery < 0:
		return bad("CheckpointEvery", "%v, want >= 0 (0: %v)", c.CheckpointEvery, DefaultCheckpointEvery)
	case c.PollInterval <= 0 || c.DuplicateWindow <= 0:
		return bad("PollInterval/DuplicateWindow", "must be > 0")
	case c.Mode == federated.Async && c.onePerSite() && c.Buffer > len(c.Sites.Sites()):
		return bad("Buffer", "%d, but an async round under a robust rule or DP takes one update per site and %d sites are registered", c.Buffer, len(c.Sites.Sites()))
	case c.Mode == federated.Async && len(c.Regions.Names()) > 0:
		return bad("Regions", "hierarchical rounds are sync only (an async round closes at its buffer, which a region's aggregate cannot split)")
	}
	for _, g := range c.Regions.Names() {
		for _, s := range c.Regions.Sites(g) {
			if _, ok := c.Sites.SiteKey(s); !ok {
				return bad("Regions", "site %s of region %s is not registered in Sites", s, g)
			}
		}
	}
	if err := c.Aggregator.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if c.DP != nil {
		if err := c.DP.Validate(); err != nil {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	if _, err := federated.DecodeAnnouncement(mustAnnouncement(c)); err != nil {
		return fmt.Errorf("%w: Local: %v", ErrConfig, err)
	}
	return nil
}

// mustAnnouncement renders a dummy announcement of the config to reuse the
// protocol's bounds on local training.
func mustAnnouncement(c *Config) []byte {
	b, _ := federated.Marshal(federated.RoundAnnouncement{V: federated.ProtocolVersion, Round: 1, Mode: c.Mode,
		BaseModel: fmt.Sprintf("%064d", 0), BaseObject: "x", BaseVersion: 1, MinUpdates: max(1, c.MinUpdates), Local: c.Local})
	return b
}

// onePerSite reports whether an async round takes at most one update per
// site (ingest.Rules.OnePerSite): under the robust rules, whose guarantees
// count distinct sites, and under DP, whose noise is calibrated for one
// clipped update per site.
func (c *Config) onePerSite() bool {
	rule := c.Aggregator.Rule
	return c.DP != nil || (rule != "" && rule != federated.RuleFedAvg && rule != federated.RuleFedBuff)
}
