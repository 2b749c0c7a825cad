package coordinator

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/aggregation"
	"github.com/edgesched/edgesched/coordinator/bus"
	"github.com/edgesched/edgesched/coordinator/ingest"
	"github.com/edgesched/edgesched/coordinator/metrics"
	"github.com/edgesched/edgesched/coordinator/release"
	"github.com/edgesched/edgesched/coordinator/replica"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/backoff"
	"github.com/edgesched/edgesched/internal/ratelog"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
)

// Coordinator runs federated rounds. Create it with New, register the
// first model with Bootstrap, then Run it on a NATS connection. Its
// methods are safe for concurrent use; state changes are serialised and
// each is one bbolt transaction.
type Coordinator struct {
	cfg     Config
	db      *bolt.DB
	log     *slog.Logger
	clock   Clock
	metrics *metrics.Coordinator

	mu  sync.Mutex // serialises state changes and bus I/O of publication
	bus *bus.Bus   // nil until Run
	// dp accountant (rounds of noise so far); rebuilt from the store
	dp *federated.Accountant
	// decoded float models by version, a few, and every version's
	// parameter count (guarded by mu; floatModel, dims)
	models release.Models
	// publishDue: a publication failed and a stored model may be pending
	// (guarded by mu; Tick publishes it)
	publishDue bool
	// announceDue: the current round's announcement failed (guarded by
	// mu; Tick announces it again)
	announceDue bool

	repMu   sync.Mutex // guards reports
	reports map[string]federated.SiteReport

	rounds  store.RoundCache // the last round record decoded
	path    string           // the store file (errors name it)
	curDims atomic.Int64     // the current round's parameter count (ingest's verify)
	curSum  atomic.Bool      // the current round sums its updates (ingest's verify)
	// sums are the current summing round's running sums as committed
	// (guarded by mu)
	sums aggregation.Cache

	syncMu    sync.Mutex       // guards fileSize (countSyncs)
	fileSize  int64            // coordinator.db's size after the last commit
	limited   *ratelog.Limiter // repeated log lines, at most one every 10 s each
	trimmedTo uint64           // the stream is purged below this (busLoop's)

	gen    atomic.Uint64      // store generation: commits so far (checkpoints)
	ha     *replica.Active    // an active replica's (nil without HA)
	haCons jetstream.Consumer // its update consumer (guarded by mu)
	// the root's regional consumer once created (guarded by mu; with HA
	// its ack floor goes into each checkpoint)
	regCons jetstream.Consumer
}

// New opens (or creates) the coordinator's store.
func New(cfg Config) (*Coordinator, error) {
	if cfg.Clock == nil {
		cfg.Clock = wallClock{}
	}
	if cfg.Calibration.Method == "" { // the default method; Rounding's zero value is the default
		d := quant.DefaultCalibration()
		cfg.Calibration.Method, cfg.Calibration.Percentile = d.Method, d.Percentile
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	own := &quant.Keyring{}
	if _, err := own.Add(cfg.Signer.Public()); err != nil {
		return nil, err
	}
	path := filepath.Join(cfg.DataDir, store.File)
	db, err := store.Open(path, store.Keys{Own: own, Other: cfg.ModelKeys},
		store.Options{MaxNorm: cfg.MaxUpdateNorm, MaxSamples: cfg.MaxSamples, ClipNorm: cfg.clipNorm(), AuditKeep: cfg.AuditKeep})
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Coordinator{cfg: cfg, db: db, log: log, clock: cfg.Clock, path: path, models: release.Models{Own: cfg.Signer, Other: cfg.ModelKeys}}
	if st, err := os.Stat(path); err == nil {
		c.fileSize = st.Size()
	}
	c.limited = ratelog.New(log, 10*time.Second)
	if c.metrics, err = metrics.New(cfg.Registerer); err != nil {
		db.Close()
		return nil, err
	}
	if cfg.DP != nil {
		c.dp = federated.NewAccountant(*cfg.DP)
		// rounds already noised, from the store (checked at open)
		_ = c.view(func(tx *bolt.Tx) error {
			for range store.NoisedRounds(tx) {
				c.dp.Step()
			}
			return nil
		})
	}
	return c, nil
}

// Close closes the store. Call it after Run returned.
func (c *Coordinator) Close() error { return c.db.Close() }

// Bootstrap registers m as model version 1 when the registry is empty
// (it is published when Run starts); otherwise it does nothing.
func (c *Coordinator) Bootstrap(ctx context.Context, m *nn.Model) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var have bool
	if err := c.view(func(tx *bolt.Tx) error {
		have = getU64(tx.Bucket(store.BucketMeta), store.KeyVersion) > 0
		return nil
	}); err != nil || have {
		return err
	}
	_, err := c.storeModel(ctx, m, 0, "", c.clock.Now(), "bootstrap")
	return err
}

// prepareModel quantizes and signs m as the next version
// (release.Maker). Callers hold c.mu (so the version is still free when
// they store it).
func (c *Coordinator) prepareModel(ctx context.Context, m *nn.Model, round uint64, parent string, created time.Time, note string) (*release.Version, error) {
	var version uint64
	if err := c.view(func(tx *bolt.Tx) error {
		version = release.Next(tx)
		return nil
	}); err != nil {
		return nil, err
	}
	mk := release.Maker{Signer: c.cfg.Signer, Calibrate: c.cfg.Calibrate, Calibration: c.cfg.Calibration, AutoPublish: c.cfg.AutoPublish}
	return mk.Make(ctx, m, version, round, parent, created, note)
}

// putModel stores a prepared model in tx as the next version.
func (c *Coordinator) putModel(tx *bolt.Tx, p *release.Version) error {
	return release.Put(tx, p, c.clock.Now(), c.cfg.AuditKeep)
}

// storeModel prepares and stores m as the next version. Callers hold c.mu.
func (c *Coordinator) storeModel(ctx context.Context, m *nn.Model, round uint64, parent string, created time.Time, note string) (*Model, error) {
	p, err := c.prepareModel(ctx, m, round, parent, created, note)
	if err != nil {
		return nil, err
	}
	if err := c.update(func(tx *bolt.Tx) error { return c.putModel(tx, p) }); err != nil {
		return nil, fmt.Errorf("store model version %d: %w", p.Rec.Version, err)
	}
	c.log.Info("model stored", "version", p.Rec.Version, "round", round, "float", quant.ShortID(p.Rec.FloatModel), "int8", quant.ShortID(p.Rec.Int8Model), "status", p.Rec.Status)
	return p.Rec, nil
}

// Run serves until ctx is cancelled: it checks the NATS server (at least
// federated.MinServerVersion), sets up the stream, KV and object store
// (retried for up to two minutes while JetStream is not ready),
// publishes what a crash left pending, resumes the current round, consumes
// updates, watches deadlines, trims the stream, writes backups and serves
// the admin API. Every goroutine it starts is owned by it and stopped
// before it returns. It returns early with an ErrStore error when the
// store turns out damaged.
func (c *Coordinator) Run(ctx context.Context, nc *nats.Conn) error {
	b, err := bus.SetupRetry(ctx, nc, c.busOptions(), bus.SetupPatience)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.bus = b
	err = c.fenceState(ctx)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.bus = nil
		c.mu.Unlock()
	}()
	if err != nil {
		return err
	}
	// Recovery talks to the bus (pending models, the round's announcement):
	// a slow or restarting NATS server is retried, not fatal; a damaged
	// store is.
	for rb := backoff.New(250*time.Millisecond, 10*time.Second, c.cfg.Seed^0x7ec0); ; {
		err := c.recover(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err() // stopping: what failed was cut short by it
		}
		if errors.Is(err, ErrStore) {
			return err
		}
		c.limited.Warn("recover", "recovery after start failed; retrying", "err", err)
		if !rb.Sleep(ctx) {
			return ctx.Err()
		}
	}
	// the admin API's requests end with Run: one under way (a promotion
	// publishing) is cancelled, and one still queued is answered 503
	actx, acancel := context.WithCancel(ctx)
	admin, err := c.serveAdmin(actx, nc)
	if err != nil {
		acancel()
		return err
	}
	defer admin.Stop()
	defer acancel()
	reports, err := nc.Subscribe(federated.StatusSubjectPrefix+"*", c.onSiteReport)
	if err != nil {
		return fmt.Errorf("subscribe to site reports: %w", err)
	}
	defer reports.Unsubscribe()
	cons, err := c.openConsumer(ctx, b)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	wg.Go(func() { errc <- c.consume(ctx, cons) })
	wg.Go(func() { errc <- c.tickLoop(ctx) })
	wg.Go(func() { c.busLoop(ctx, cons) })
	wg.Go(func() { errc <- c.consumeRegional(ctx, b) }) // hierarchical rounds (regional.go)
	var first error
	select {
	case <-ctx.Done():
	case first = <-errc: // a damaged store stops everything
		cancel()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if first == nil || errors.Is(first, context.Canceled) {
			first = err
		}
	}
	if first != nil && !errors.Is(first, context.Canceled) {
		return first
	}
	return nil
}

// recover publishes pending models and resumes the current round after a
// restart (or on first start).
func (c *Coordinator) recover(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.publishPending(ctx); err != nil {
		return err
	}
	r, err := c.currentRound()
	if err != nil {
		return err
	}
	switch {
	case r == nil:
		if c.cfg.AutoRounds {
			_, err = c.openRound(ctx)
		}
	case r.State == StateCollecting:
		// A crash between recording the update that completed the round
		// and closing the round leaves it collecting with nothing more to
		// come: announce it again, then close it if it is complete.
		if err = c.announce(ctx, r); err == nil {
			err = c.afterAccept(ctx, r)
		}
	case r.State == StateAggregating:
		// a round whose aggregation fails for good fails (aggregate):
		// recovery never loops on it
		c.log.Info("resuming aggregation after restart", "round", r.Round)
		err = c.aggregate(ctx, r)
	default:
		if c.cfg.AutoRounds && c.roundsLeft() {
			_, err = c.openRound(ctx)
		}
	}
	return err
}

func (c *Coordinator) currentRound() (*Round, error) {
	var r *Round
	err := c.view(func(tx *bolt.Tx) error {
		var err error
		r, err = c.currentRoundTx(tx)
		return err
	})
	return r, err
}

// currentRoundTx is the current round (nil: none) in tx.
func (c *Coordinator) currentRoundTx(tx *bolt.Tx) (*Round, error) {
	cur := getU64(tx.Bucket(store.BucketMeta), store.KeyRound)
	if cur == 0 {
		return nil, nil
	}
	return c.rounds.Get(tx, cur)
}

func (c *Coordinator) roundsLeft() bool {
	if c.cfg.Rounds == 0 {
		return true
	}
	var n uint64
	_ = c.view(func(tx *bolt.Tx) error { n = getU64(tx.Bucket(store.BucketMeta), store.KeyRound); return nil })
	return n < uint64(c.cfg.Rounds)
}

// publishPending puts every pending model on the bus (object store, then
// the KV notice of the newest), idempotently. Callers hold c.mu.
func (c *Coordinator) publishPending(ctx context.Context) error {
	var pending []*Model
	err := c.view(func(tx *bolt.Tx) error {
		return tx.Bucket(store.BucketModels).ForEach(func(k, v []byte) error {
			var m Model
			if err := store.DecodeRecord(v, &m, store.RecordName(store.BucketModels, k)); err != nil {
				return err
			}
			if m.Status == ModelPending {
				pending = append(pending, &m)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, m := range pending {
		if err := c.publishModel(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// publishModel puts a stored model's artifacts into the object store,
// announces it in the KV bucket and marks it published.
func (c *Coordinator) publishModel(ctx context.Context, m *Model) (err error) {
	defer func() {
		if err != nil {
			c.publishDue = true // Tick retries (publishPending)
		}
	}()
	var fb, qb []byte
	if err := c.view(func(tx *bolt.Tx) error {
		fb, qb = release.Artifacts(tx, m.Version)
		return nil
	}); err != nil {
		return err
	}
	if len(fb) == 0 || len(qb) == 0 {
		return fmt.Errorf("%w: model version %d has no stored artifacts", ErrStore, m.Version)
	}
	b := c.bus
	if b == nil {
		return errors.New("coordinator: not connected")
	}
	// with HA the model is in a checkpoint before anything of it leaves
	if err := c.checkpoint(ctx); err != nil {
		return err
	}
	fo, qo := release.ObjectName(m.Version, quant.Float32), release.ObjectName(m.Version, quant.Int8)
	if _, err := b.Obj.PutBytes(ctx, fo, fb); err != nil {
		return fmt.Errorf("publish %s: %w", fo, err)
	}
	if _, err := b.Obj.PutBytes(ctx, qo, qb); err != nil {
		return fmt.Errorf("publish %s: %w", qo, err)
	}
	notice := federated.ModelNotice{V: federated.ProtocolVersion, Version: m.Version, Round: m.Round,
		FloatModel: m.FloatModel, FloatObject: fo, Int8Model: m.Int8Model, Int8Object: qo, Published: c.clock.Now().UTC()}
	raw, err := federated.Marshal(notice)
	if err != nil {
		return err
	}
	if err := c.putState(ctx, federated.KeyModel, raw); err != nil {
		return fmt.Errorf("announce model version %d: %w", m.Version, err)
	}
	err = c.update(func(tx *bolt.Tx) error {
		cur, err := store.GetModel(tx, m.Version)
		if err != nil {
			return err
		}
		if cur == nil {
			return fmt.Errorf("%w: model version %d vanished", ErrStore, m.Version)
		}
		cur.Status = ModelPublished
		if err := store.PutModel(tx, cur); err != nil {
			return err
		}
		return store.Audit(tx, c.clock.Now(), c.cfg.AuditKeep, "model.published", m.Round, "", fmt.Sprintf("version %d", m.Version))
	})
	if err != nil {
		return err
	}
	m.Status = ModelPublished
	c.metrics.ModelVersion.Set(float64(m.Version))
	c.log.Info("model published", "version", m.Version, "round", m.Round)
	c.cfg.fail(FailModelPublished)
	return nil
}

// latestPublished returns the newest published model.
func (c *Coordinator) latestPublished() (*Model, error) {
	var out *Model
	err := c.view(func(tx *bolt.Tx) error {
		cur := tx.Bucket(store.BucketModels).Cursor()
		for k, v := cur.Last(); k != nil; k, v = cur.Prev() {
			var m Model
			if err := store.DecodeRecord(v, &m, store.RecordName(store.BucketModels, k)); err != nil {
				return err
			}
			if m.Status == ModelPublished || m.Status == ModelPending {
				out = &m
				return nil
			}
		}
		return nil
	})
	return out, err
}

// StartRound opens a new round trained from the newest published model.
// It refuses while a round is collecting or aggregating.
func (c *Coordinator) StartRound(ctx context.Context) (*Round, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.openRound(ctx)
}

// ErrBusy is returned when a round is already under way.
var ErrBusy = errors.New("coordinator: a round is under way")

func (c *Coordinator) openRound(ctx context.Context) (*Round, error) {
	cur, err := c.currentRound()
	if err != nil {
		return nil, err
	}
	if cur != nil && (cur.State == StateCollecting || cur.State == StateAggregating) {
		return nil, fmt.Errorf("%w: round %d is %s", ErrBusy, cur.Round, cur.State)
	}
	base, err := c.latestPublished()
	if err != nil {
		return nil, err
	}
	if base == nil {
		return nil, errors.New("coordinator: no model to train from (Bootstrap first)")
	}
	now := c.clock.Now().UTC()
	r := &Round{Mode: c.cfg.Mode, State: StateCollecting, BaseModel: base.FloatModel, BaseVersion: base.Version,
		Opened: now, Deadline: now.Add(c.cfg.RoundDuration), MinUpdates: c.cfg.MinUpdates, Expected: c.cfg.Sites.Sites(), Local: c.cfg.Local,
		MaxNorm: c.cfg.MaxUpdateNorm, MaxSamples: c.cfg.MaxSamples, ClipNorm: c.cfg.clipNorm()}
	n := len(r.Expected)
	if r.Mode == federated.Async {
		n = c.cfg.Buffer
		// it closes at its buffer: a quorum above it would fail every
		// round (MinUpdates is the sync rounds')
		r.MinUpdates = min(r.MinUpdates, c.cfg.Buffer)
	}
	r.Sum = aggregation.SumSpec(c.cfg.sumConfig(), n)
	err = c.update(func(tx *bolt.Tx) error {
		m := tx.Bucket(store.BucketMeta)
		r.Round = getU64(m, store.KeyRound) + 1
		if err := m.Put(store.KeyRound, u64(r.Round)); err != nil {
			return err
		}
		if err := store.PutRound(tx, r); err != nil {
			return err
		}
		if _, err := tx.Bucket(store.BucketUpdates).CreateBucketIfNotExists(u64(r.Round)); err != nil {
			return err
		}
		dims, err := c.dims(tx, r.BaseVersion)
		if err != nil {
			return err
		}
		c.curDims.Store(int64(dims))
		c.curSum.Store(r.Sum != nil)
		return store.Audit(tx, now, c.cfg.AuditKeep, "round.opened", r.Round, "", fmt.Sprintf("%s from version %d, deadline %s", r.Mode, r.BaseVersion, r.Deadline.Format(time.RFC3339)))
	})
	if err != nil {
		return nil, err
	}
	c.metrics.Round.Set(float64(r.Round))
	c.log.Info("round opened", "round", r.Round, "mode", r.Mode, "base_version", r.BaseVersion)
	return r, c.announce(ctx, r)
}

// announce writes the round announcement to the KV bucket; when that
// fails Tick tries again (a round stored but never announced would wait
// for updates no site knows to send). Callers hold c.mu.
func (c *Coordinator) announce(ctx context.Context, r *Round) (err error) {
	if c.bus == nil {
		return nil // announced when Run starts
	}
	defer func() { c.announceDue = err != nil }()
	a := federated.RoundAnnouncement{V: federated.ProtocolVersion, Round: r.Round, Mode: r.Mode, BaseModel: r.BaseModel,
		BaseObject: release.ObjectName(r.BaseVersion, quant.Float32), BaseVersion: r.BaseVersion, Opened: r.Opened, Deadline: r.Deadline,
		MinUpdates: r.MinUpdates, Local: r.Local}
	raw, err := federated.Marshal(a)
	if err != nil {
		return err
	}
	if err := c.putState(ctx, federated.KeyRound, raw); err != nil {
		return fmt.Errorf("announce round %d: %w", r.Round, err)
	}
	return nil
}

// tickLoop checks the current round's deadline every PollInterval.
func (c *Coordinator) tickLoop(ctx context.Context) error {
	t := time.NewTicker(c.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if err := c.Tick(ctx); err != nil {
				if errors.Is(err, ErrStore) {
					return err
				}
				if ctx.Err() == nil {
					c.limited.Warn("tick", "round tick", "err", err)
				}
			}
		}
	}
}

// Tick evaluates the current round against the clock: a sync round past
// its deadline aggregates (with its quorum) or fails, and a complete one
// (every expected site's update, or an async buffer's worth) closes. Run calls it every
// PollInterval; tests with an injected clock may call it directly.
func (c *Coordinator) Tick(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.publishDue && c.bus != nil {
		// a model stored but not yet on the bus (its publication failed):
		// publish it before anything else, above all before a new round
		// trains from it
		if err := c.publishPending(ctx); err != nil {
			return fmt.Errorf("publish pending models: %w", err)
		}
		c.publishDue = false
	}
	r, err := c.currentRound()
	if err != nil || r == nil {
		return err
	}
	if c.announceDue && c.bus != nil && r.State == StateCollecting {
		if err := c.announce(ctx, r); err != nil {
			if errors.Is(err, ErrStore) {
				return err
			}
			c.limited.Warn("announce", "announcing the round again failed", "round", r.Round, "err", err)
		}
	}
	switch {
	case r.State == StateCollecting && !c.ha.CatchingUp() &&
		(r.Mode == federated.Sync && !c.clock.Now().Before(r.Deadline) || ingest.RoundComplete(r, c.cfg.Buffer)):
		// past its deadline, or complete (whose close after the update
		// that completed it failed: it would wait for another update)
		return c.closeRound(ctx, r)
	case r.State == StateAggregating:
		return c.aggregate(ctx, r)
	case (r.State == StatePublished || r.State == StateFailed) && c.cfg.AutoRounds && c.roundsLeft() && c.bus != nil:
		_, err := c.openRound(ctx)
		return err
	}
	return nil
}

// CloseRound ends the current round's collection now (instead of at its
// deadline): it aggregates with its quorum, or fails. A round already
// closed is left as it is.
func (c *Coordinator) CloseRound(ctx context.Context, round uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, err := c.currentRound()
	if err != nil {
		return err
	}
	if r == nil || r.Round != round {
		return fmt.Errorf("%w: round %d is not the current round", ErrNotFound, round)
	}
	if r.State != StateCollecting {
		return nil // already closed
	}
	return c.closeRound(ctx, r)
}

// closeRound ends collection: with the quorum it moves to aggregating and
// aggregates; without, the round fails. Callers hold c.mu.
func (c *Coordinator) closeRound(ctx context.Context, r *Round) error {
	now := c.clock.Now().UTC()
	if r.Accepted < r.MinUpdates {
		r.Closed = now
		return c.failRound(r, FailReasonQuorum, fmt.Sprintf("%d of %d required updates by the deadline", r.Accepted, r.MinUpdates))
	}
	r.State, r.Closed = StateAggregating, now
	if err := c.update(func(tx *bolt.Tx) error {
		if err := store.PutRound(tx, r); err != nil {
			return err
		}
		return store.Audit(tx, now, c.cfg.AuditKeep, "round.closed", r.Round, "", fmt.Sprintf("%d updates", r.Accepted))
	}); err != nil {
		return err
	}
	c.cfg.fail(FailRoundClosed)
	return c.aggregate(ctx, r)
}

// dpRNG is the stream of a round's DP noise: ChaCha8 keyed by the SHA-256
// of the store's DP secret, the configured seed and the round, so the
// same round draws the same noise after a crash (or on a replica that
// restored the store) and no one without the store can draw it.
func (c *Coordinator) dpRNG(round uint64) (*rand.Rand, error) {
	var secret []byte
	if err := c.view(func(tx *bolt.Tx) error {
		var err error
		secret, err = store.DPSecret(tx)
		return err
	}); err != nil {
		return nil, err
	}
	h := sha256.New()
	h.Write(secret)
	h.Write(binary.BigEndian.AppendUint64(nil, c.cfg.Seed))
	h.Write(binary.BigEndian.AppendUint64(nil, round))
	var key [32]byte
	h.Sum(key[:0])
	return rand.New(rand.NewChaCha8(key)), nil
}
