package flclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/internal/backoff"
	"github.com/edgesched/edgesched/internal/boltkv"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/esu"
)

// Trainer trains a site's policy for one round.
type Trainer interface {
	// Train fine-tunes base as local asks and returns the trained model and
	// how many scheduling decisions it trained on (the update's weight).
	Train(ctx context.Context, base *nn.Model, local federated.LocalTraining, seed uint64) (*nn.Model, int64, error)
}

// Outbox policies when the outbox is full.
const (
	DropOldest = "drop-oldest"
	RefuseNew  = "refuse-new"
)

// Config configures a site's federated-learning client. Start from
// DefaultConfig.
type Config struct {
	// Site is the site ID (a DNS label), Signer its key (registered with
	// the coordinator).
	Site   string
	Signer *quant.Signer
	// ModelKeys verify the coordinator's model artifacts.
	ModelKeys *quant.Keyring
	// DataDir holds agent.db (created).
	DataDir string
	Trainer Trainer
	// OutboxLimit bounds the buffered updates (default 64), new and
	// adopted alike (Adopt); OutboxPolicy says what happens when it is
	// full: DropOldest (default) or RefuseNew. Either is counted
	// (Counters.DroppedFull) and logged.
	OutboxLimit  int
	OutboxPolicy string
	// Update encoding (default int8 with error feedback) and chunk size.
	Encoding  esu.Encoding
	ChunkSize int
	// AsyncInterval: in an async round, train again every interval from the
	// newest model this site has, even without news from the coordinator
	// (updates buffer in the outbox while the link is down). 0: train once
	// per announced round.
	AsyncInterval time.Duration
	// PublishTimeout bounds one publish attempt (default 5s); failed
	// attempts back off from BackoffMin to BackoffMax with jitter.
	PublishTimeout         time.Duration
	BackoffMin, BackoffMax time.Duration
	// ReportInterval is how often the site publishes its SiteReport
	// (installed model, pending outbox) for `edgectl sites`; it also
	// reports after every install and ack. 0 turns reports off.
	ReportInterval time.Duration
	// StatePoll is how often the round and model keys are read again
	// when no change notification arrived (default 5s; notifications can
	// be lost while the link is down).
	StatePoll time.Duration
	// MaxModelAge refuses to install a model whose signed creation time
	// is older than this (freeze protection, trust.go); 0: no limit.
	MaxModelAge time.Duration
	// FreezeAfter reports the model feed frozen when rounds have named a
	// base version above the installed one for this long (0: off).
	FreezeAfter time.Duration
	// Now is the client's clock (nil: time.Now).
	Now func() time.Time
	// Seed drives training and rounding seeds (with the sequence).
	Seed   uint64
	Logger *slog.Logger
	// Sequencer, when set, shares the sequence and the unsent updates
	// with the site's other agents (agent/site); nil: this agent is the
	// site's only one.
	Sequencer Sequencer
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{OutboxLimit: 64, OutboxPolicy: DropOldest, Encoding: esu.Int8, ChunkSize: esu.DefaultChunkSize,
		PublishTimeout: 5 * time.Second, BackoffMin: 50 * time.Millisecond, BackoffMax: 5 * time.Second,
		ReportInterval: 10 * time.Second, StatePoll: 5 * time.Second}
}

// ErrConfig wraps configuration refusals.
var ErrConfig = errors.New("flclient: bad config")

// Validate names the first bad field.
func (c *Config) Validate() error {
	switch {
	case !federated.ValidSite(c.Site):
		return fmt.Errorf("%w: Site %q is not a DNS label", ErrConfig, c.Site)
	case c.Signer == nil:
		return fmt.Errorf("%w: Signer required", ErrConfig)
	case c.ModelKeys == nil || len(c.ModelKeys.IDs()) == 0:
		return fmt.Errorf("%w: ModelKeys required (the coordinator's public key)", ErrConfig)
	case c.DataDir == "":
		return fmt.Errorf("%w: DataDir required", ErrConfig)
	case c.Trainer == nil:
		return fmt.Errorf("%w: Trainer required", ErrConfig)
	case c.OutboxLimit < 1:
		return fmt.Errorf("%w: OutboxLimit %d", ErrConfig, c.OutboxLimit)
	case c.OutboxPolicy != DropOldest && c.OutboxPolicy != RefuseNew:
		return fmt.Errorf("%w: OutboxPolicy %q (want %s or %s)", ErrConfig, c.OutboxPolicy, DropOldest, RefuseNew)
	case c.Encoding != esu.Int8 && c.Encoding != esu.Float32:
		return fmt.Errorf("%w: Encoding %v", ErrConfig, c.Encoding)
	case c.ChunkSize < 1 || c.ChunkSize > 65535:
		return fmt.Errorf("%w: ChunkSize %d", ErrConfig, c.ChunkSize)
	case c.PublishTimeout <= 0 || c.BackoffMin <= 0 || c.BackoffMax < c.BackoffMin || c.AsyncInterval < 0 || c.ReportInterval < 0:
		return fmt.Errorf("%w: timeouts and backoff must be positive (BackoffMax >= BackoffMin)", ErrConfig)
	case c.StatePoll <= 0 || c.MaxModelAge < 0 || c.FreezeAfter < 0:
		return fmt.Errorf("%w: StatePoll must be positive, MaxModelAge and FreezeAfter >= 0", ErrConfig)
	}
	return nil
}

// Client is a site's FL client: it trains on announced rounds, keeps every
// update in a bbolt outbox until the stream has it, and installs verified
// models. Create with New, run with Run; methods are safe for concurrent
// use.
type Client struct {
	cfg Config
	db  *bolt.DB
	log *slog.Logger

	wake  chan struct{} // publisher wake-up
	nudge chan struct{} // reporter wake-up

	retries atomic.Int64 // failed installs and trainings set to be tried again (workLoop's; tests read it)

	// removeSent takes update seq out of the outbox once the stream has
	// it, counting it published (one transaction): c.dropSent; tests make
	// it fail.
	removeSent func(seq uint64) error

	// enqMu serialises enqueue, which holds it across the Sequencer's
	// calls (the site ledger's API writes, which can block for seconds):
	// updates are signed, staged and committed one at a time, so their
	// sequences reach the outbox in order and the error-feedback
	// residual passes from each to the next. Only enqueue takes it, so a
	// slow ledger blocks no other method.
	enqMu    sync.Mutex
	residual *esu.Residual // guarded by enqMu

	mu      sync.Mutex // guards the fields below; never held across I/O
	round   *federated.RoundAnnouncement
	notice  *federated.ModelNotice
	onModel []func(Installed)
}

// New opens (or creates) the agent's store.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	db, err := openStore(filepath.Join(cfg.DataDir, "agent.db"))
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Client{cfg: cfg, db: db, log: log.With("site", cfg.Site), wake: make(chan struct{}, 1), nudge: make(chan struct{}, 1), residual: &esu.Residual{}}
	c.removeSent = c.dropSent
	if err := migrateHWM(db); err != nil {
		db.Close()
		return nil, err
	}
	_ = db.View(func(tx *bolt.Tx) error {
		if raw := tx.Bucket(bucketMeta).Get(keyResidual); len(raw) > 0 {
			c.residual = esu.NewResidual(bytesFloats(raw))
		}
		return nil
	})
	return c, nil
}

// Close closes the store; call it after Run returned.
func (c *Client) Close() error { return c.db.Close() }

// OnModel registers f to be called (from the client's goroutine) after a
// model is installed. Register before Run.
func (c *Client) OnModel(f func(Installed)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onModel = append(c.onModel, f)
}

// Run serves until ctx ends: it watches the round and model keys, trains,
// publishes the outbox and installs models. Connection loss is survived:
// work continues locally and the outbox drains when the link is back. It
// returns at once with federated.ErrServerVersion when nc is connected to
// a nats-server older than federated.MinServerVersion.
func (c *Client) Run(ctx context.Context, nc *nats.Conn) error {
	if nc.IsConnected() {
		// the oldest server the site's reads work on (direct gets)
		if err := federated.CheckServerVersion(nc.ConnectedServerVersion(), nc.ConnectedUrlRedacted()); err != nil {
			c.log.Error("NATS server not supported", "err", err)
			return err
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	sub, err := nc.Subscribe(federated.AckSubjectPrefix+c.cfg.Site, c.onAck)
	if err != nil {
		return fmt.Errorf("subscribe to acks: %w", err)
	}
	defer sub.Unsubscribe()
	if want := natsauth.SiteInboxPrefix(c.cfg.Site); nc.Opts.InboxPrefix != want {
		c.log.Warn("NATS inbox prefix is not the site's: the fleet's NATS permissions will refuse replies", "inbox_prefix", nc.Opts.InboxPrefix, "want", want)
	}
	events := make(chan jetstream.KeyValueEntry, 16)
	var wg sync.WaitGroup
	wg.Add(5)
	go func() { defer wg.Done(); c.watch(ctx, nc, js, events) }()
	go func() { defer wg.Done(); c.freezeLoop(ctx) }()
	go func() { defer wg.Done(); c.publishLoop(ctx, js) }()
	go func() { defer wg.Done(); c.workLoop(ctx, js, events) }()
	go func() { defer wg.Done(); c.reportLoop(ctx, nc) }()
	c.kick()
	wg.Wait()
	return ctx.Err()
}

func (c *Client) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// workLoop reacts to announcements and notices: installs models and trains
// for rounds, and in async rounds also on the AsyncInterval timer. What
// failed for a reason that may pass (a fetch that timed out on a slow or
// loaded link, the Sequencer out of reach) is tried again with capped,
// jittered backoff: the model until it installs or a newer notice
// replaces it, the round until the site trained for it, a newer
// announcement replaces it or its deadline passes. Without that, one slow
// fetch would keep the site out of a synchronous round (which then waits
// for it until its deadline) or off a model until the next one.
func (c *Client) workLoop(ctx context.Context, js jetstream.JetStream, events <-chan jetstream.KeyValueEntry) {
	var tick <-chan time.Time
	if c.cfg.AsyncInterval > 0 {
		t := time.NewTicker(c.cfg.AsyncInterval)
		defer t.Stop()
		tick = t.C
	}
	var (
		retryModel *federated.ModelNotice       // a notice whose install failed for a reason that may pass
		retryRound *federated.RoundAnnouncement // a round whose training failed
		retry      *time.Timer
		retryC     <-chan time.Time
	)
	b := backoff.New(c.cfg.BackoffMin, c.cfg.BackoffMax, c.cfg.Seed^0x3e7)
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	install := func(n *federated.ModelNotice, again bool) {
		retryModel = nil
		if err := c.install(ctx, js, n, again); err != nil && ctx.Err() == nil {
			c.log.Warn("model not installed", "version", n.Version, "err", err)
			if retryable(err) {
				retryModel = n
				c.retries.Add(1)
			}
		}
	}
	train := func(a *federated.RoundAnnouncement) {
		retryRound = nil
		if err := c.trainRound(ctx, js, a, false); err != nil && ctx.Err() == nil {
			c.log.Warn("training", "round", a.Round, "err", err)
			if retryTraining(a, err, c.now()) {
				retryRound = a
				c.retries.Add(1)
			}
		}
	}
	// schedule arms the retry timer while something waits for one, and
	// resets the backoff once nothing does
	schedule := func() {
		if retryModel == nil && retryRound == nil {
			b.Reset()
			retryC = nil
			return
		}
		if retry == nil {
			retry = time.NewTimer(b.Next())
		} else {
			retry.Reset(b.Next())
		}
		retryC = retry.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-events:
			switch e.Key() {
			case federated.KeyModel:
				n, err := federated.DecodeModelNotice(e.Value())
				if err != nil {
					// counted (and logged) once per revision: watch
					// sends each revision once
					_ = c.refuseModel(RefuseNotice, 0, err)
					continue
				}
				c.mu.Lock()
				c.notice = n
				c.mu.Unlock()
				install(n, false)
			case federated.KeyRound:
				a, err := federated.DecodeAnnouncement(e.Value())
				if err != nil {
					c.log.Warn("round announcement refused", "err", err)
					continue
				}
				c.mu.Lock()
				c.round = a
				c.mu.Unlock()
				c.noteAnnouncement(a)
				train(a)
			}
			if retryC == nil {
				schedule()
			}
		case <-retryC:
			retryC = nil
			if n := retryModel; n != nil {
				install(n, true)
			}
			if a := retryRound; a != nil {
				c.mu.Lock()
				current := c.round == a
				c.mu.Unlock()
				if current && c.now().Before(a.Deadline) {
					train(a)
				} else {
					retryRound = nil
				}
			}
			schedule()
		case <-tick:
			c.mu.Lock()
			a := c.round
			c.mu.Unlock()
			if a != nil && a.Mode == federated.Async {
				if err := c.trainRound(ctx, js, a, true); err != nil && ctx.Err() == nil {
					c.log.Warn("async training", "round", a.Round, "err", err)
				}
			}
		}
	}
}

// retryable reports whether an install failure may pass on its own: the
// artifacts could not be fetched (a refusal for RefuseFetch, counted once
// per notice) or the store failed; a model refused for what it is (signature,
// rollback, staleness, sanity, an object the store holds damaged or
// oversized: RefuseArtifact, ...) is not tried again.
func retryable(err error) bool {
	var r *ModelRefusal
	if errors.As(err, &r) {
		return r.Reason == RefuseFetch
	}
	return true
}

// retryTraining reports whether a round whose training failed with err is
// trained again on the retry timer: a sync round before its deadline
// (async rounds train again on their own timer), unless err is for good
// (ErrSequenceExhausted: retrying would only log it again, every backoff;
// a damaged base object: it would only be downloaded again, every backoff).
func retryTraining(a *federated.RoundAnnouncement, err error, now time.Time) bool {
	return a.Mode != federated.Async && now.Before(a.Deadline) && !errors.Is(err, ErrSequenceExhausted) && !errors.Is(err, errDamagedObject)
}

// trainRound trains once for announcement a (unless this round was
// already trained and again is false) and queues the update.
func (c *Client) trainRound(ctx context.Context, js jetstream.JetStream, a *federated.RoundAnnouncement, again bool) error {
	var last, local uint64
	_ = c.db.View(func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		// (above the coordinator's mark too, once a replay's ack told it:
		// onAck)
		last, local = getU64(m, keyRound), max(getU64(m, keySeq), getU64(m, keySeqFloor))
		return nil
	})
	if a.Round <= last && !again {
		return nil
	}
	if local >= federated.MaxSeq { // (local+1 would be refused, or wrap to 0)
		return fmt.Errorf("site %s: %w (newest %d)", c.cfg.Site, ErrSequenceExhausted, local)
	}
	base, baseID, baseVersion, err := c.baseModel(ctx, js, a)
	if err != nil {
		return err
	}
	seq := local + 1
	if sq := c.cfg.Sequencer; sq != nil {
		s, err := sq.Reserve(ctx, a.Round, local, again)
		if errors.Is(err, ErrRoundQueued) {
			c.log.Info("round skipped: another agent of the site queued its update", "round", a.Round)
			return nil
		}
		if err != nil {
			return fmt.Errorf("reserve a sequence: %w", err)
		}
		if s <= local || s > federated.MaxSeq {
			return fmt.Errorf("sequencer returned %d: want one above this agent's %d and at most %d", s, local, federated.MaxSeq)
		}
		seq = s
	}
	seed := c.cfg.Seed ^ (seq * 0x9e3779b97f4a7c15)
	trained, samples, err := c.cfg.Trainer.Train(ctx, base, a.Local, seed)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if samples <= 0 {
		samples = 1
	}
	bf, tf := base.Flat(), trained.Flat()
	if len(bf) != len(tf) {
		return fmt.Errorf("trainer changed the network's shape (%d -> %d parameters)", len(bf), len(tf))
	}
	delta := make([]float32, len(bf))
	for i := range bf {
		delta[i] = tf[i] - bf[i]
	}
	return c.enqueue(ctx, seq, a.Round, again, baseID, baseVersion, samples, delta, seed)
}

// baseModel is the model to train from: the announced base (fetched and
// verified), or, when the coordinator is out of reach in an async round,
// the newest installed float model.
func (c *Client) baseModel(ctx context.Context, js jetstream.JetStream, a *federated.RoundAnnouncement) (*nn.Model, string, uint64, error) {
	fctx, cancel := context.WithTimeout(ctx, c.cfg.PublishTimeout)
	defer cancel()
	a2, _, err := c.fetchArtifact(fctx, js, a.BaseObject, a.BaseVersion, quant.Float32)
	if err == nil {
		if a2.Header.ModelID != a.BaseModel {
			return nil, "", 0, fmt.Errorf("base object %s is model %s, the round names %s", a.BaseObject, a2.Header.ModelID, a.BaseModel)
		}
		m, err := nn.FromArtifact(a2)
		return m, a.BaseModel, a.BaseVersion, err
	}
	if a.Mode != federated.Async {
		return nil, "", 0, err
	}
	inst, art, ierr := c.installedArtifact(quant.Float32)
	if ierr != nil {
		return nil, "", 0, fmt.Errorf("%v; and no installed model: %w", err, ierr)
	}
	m, merr := nn.FromArtifact(art)
	return m, inst.Float, inst.Version, merr
}

// fetchArtifact gets and verifies an artifact from the object store (or
// the local copy of an installed version), returning it and its bytes.
func (c *Client) fetchArtifact(ctx context.Context, js jetstream.JetStream, object string, version uint64, dtype string) (*quant.Artifact, []byte, error) {
	var local []byte
	_ = c.db.View(func(tx *bolt.Tx) error {
		local = append([]byte(nil), tx.Bucket(bucketModels).Get(blobKey(version, dtype))...)
		return nil
	})
	raw := local
	if len(raw) == 0 {
		var err error
		if raw, err = fetchObject(ctx, js, object); err != nil {
			return nil, nil, fmt.Errorf("fetch %s: %w", object, err)
		}
	}
	a, err := quant.Decode(raw, quant.DecodeOptions{Keys: c.cfg.ModelKeys})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", object, err)
	}
	if a.Header.Version != version || a.Header.DType != dtype {
		return nil, nil, fmt.Errorf("%s: holds %s version %d, expected %s version %d", object, a.Header.DType, a.Header.Version, dtype, version)
	}
	return a, raw, nil
}

// enqueue signs an update with sequence seq and writes it to the outbox,
// with the sequence and the error-feedback residual, in one transaction.
// With a Sequencer the signed update is staged with the site first.
// Enqueues run one at a time (enqMu); c.mu is not held, so the
// Sequencer's calls, however slow, block no other method.
func (c *Client) enqueue(ctx context.Context, seq, round uint64, again bool, baseID string, baseVersion uint64, samples int64, delta []float32, seed uint64) error {
	c.enqMu.Lock()
	defer c.enqMu.Unlock()
	prev := c.residual.Values()
	if prev != nil && len(prev) != len(delta) {
		// the model's shape changed (a model that now carries its
		// GraphSAGE weights, or another network): what the last
		// encodings lost belongs to the old layout
		c.log.Warn("error-feedback residual dropped: the model's parameter count changed", "was", len(prev), "now", len(delta))
		prev = nil
	}
	res := esu.NewResidual(prev)
	payload, err := res.Encode(&esu.Update{Base: baseID, Values: delta}, esu.Options{Encoding: c.cfg.Encoding, ChunkSize: c.cfg.ChunkSize, Seed: seed})
	if err != nil {
		return err
	}
	msg, err := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: c.cfg.Site, Seq: seq, Round: round, BaseModel: baseID,
		BaseVersion: baseVersion, Samples: samples, Created: time.Now().UTC()}, payload, c.cfg.Signer)
	if err != nil {
		return err
	}
	sq := c.cfg.Sequencer
	if sq != nil {
		if err := sq.Stage(ctx, seq, round, again, msg); err != nil {
			if errors.Is(err, ErrRoundQueued) {
				c.log.Info("update discarded: another agent of the site queued one for this round", "round", round, "seq", seq)
				return nil
			}
			return fmt.Errorf("stage update %d with the site: %w", seq, err)
		}
	}
	var dropped uint64 // the oldest entry, dropped for room (drop-oldest)
	err = c.db.Update(func(tx *bolt.Tx) error {
		m, ob := tx.Bucket(bucketMeta), tx.Bucket(bucketOutbox)
		// Without a Sequencer seq is above every sequence used here. With
		// one the site ledger makes sequences unique, and an update
		// adopted while this one trained (an old leader's, staged late:
		// site.Ledger.AdoptLate) may be above it: seq must only be new.
		cur := getU64(m, keySeq)
		switch {
		case sq == nil && seq <= cur:
			return fmt.Errorf("sequence %d is not above the outbox's %d", seq, cur)
		case ob.Get(u64(seq)) != nil:
			return fmt.Errorf("sequence %d is in the outbox already", seq)
		}
		var err error
		// ErrOutboxFull is counted below: this transaction rolls back
		if dropped, err = c.makeRoom(tx, seq); err != nil {
			return err
		}
		if dropped == seq {
			// drop-oldest and seq older than every entry of the full
			// outbox (adopted ones above it): not queued, as refuse-new
			return ErrOutboxFull
		}
		for _, kv := range [][2][]byte{{keySeq, u64(max(seq, cur))}, {keyRound, u64(max(round, getU64(m, keyRound)))}, {keyTrained, u64(baseVersion)}, {keyResidual, floatsBytes(res.Values())}} {
			if err := m.Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		if err := ob.Put(u64(seq), msg); err != nil {
			return err
		}
		return bumpCounters(tx, func(k *Counters) { k.Trained++ })
	})
	if sq != nil {
		switch {
		case err != nil:
			c.siteDone(ctx, seq) // staged, never queued here
		case dropped != 0:
			c.siteDone(ctx, dropped)
		}
	}
	if err == nil && dropped != 0 {
		c.log.Warn("outbox full: oldest update dropped", "dropped_seq", dropped, "seq", seq, "limit", c.cfg.OutboxLimit)
	}
	if errors.Is(err, ErrOutboxFull) {
		c.log.Warn("outbox full: update not made", "seq", seq, "limit", c.cfg.OutboxLimit)
		if err := c.db.Update(func(tx *bolt.Tx) error { return bumpCounters(tx, func(k *Counters) { k.DroppedFull++ }) }); err != nil {
			return fmt.Errorf("count refused update: %w", err)
		}
		c.report()
		return nil
	}
	if err != nil {
		return fmt.Errorf("write outbox: %w", err)
	}
	c.residual = res
	c.log.Info("update queued", "round", round, "base_version", baseVersion, "bytes", len(payload))
	c.kick()
	c.report()
	return nil
}

// ErrOutboxFull is wrapped by Adopt when the outbox had no room for the
// update (OutboxPolicy RefuseNew, or DropOldest with the update older
// than every entry of the full outbox): it was counted
// (Counters.DroppedFull) and logged, not queued.
var ErrOutboxFull = errors.New("flclient: outbox full")

// makeRoom applies OutboxPolicy in tx before update seq goes into the
// outbox, when it already holds OutboxLimit entries: RefuseNew returns
// ErrOutboxFull and changes nothing; DropOldest counts a drop
// (Counters.DroppedFull) and returns the oldest sequence, having deleted
// that entry, unless the oldest is seq itself (seq is below every entry:
// then seq must not be put). It returns 0 when there is room.
func (c *Client) makeRoom(tx *bolt.Tx, seq uint64) (uint64, error) {
	ob := tx.Bucket(bucketOutbox)
	if ob.Stats().KeyN < c.cfg.OutboxLimit {
		return 0, nil
	}
	if c.cfg.OutboxPolicy == RefuseNew {
		return 0, ErrOutboxFull
	}
	k, _ := ob.Cursor().First()
	oldest := boltkv.FromU64(k)
	if seq < oldest {
		oldest = seq
	} else if err := ob.Delete(k); err != nil {
		return 0, err
	}
	return oldest, bumpCounters(tx, func(k *Counters) { k.DroppedFull++ })
}

// publishLoop sends the outbox oldest first; an entry leaves the outbox
// only once the stream acknowledged it (de-duplicated by its MsgID, so a
// retry after a lost acknowledgement is harmless). A failed publish and a
// failed removal of a sent entry both back off (capped, jittered, growing
// until an entry leaves the outbox) before the next attempt.
func (c *Client) publishLoop(ctx context.Context, js jetstream.JetStream) {
	b := backoff.New(c.cfg.BackoffMin, c.cfg.BackoffMax, c.cfg.Seed^0x9b)
	for ctx.Err() == nil {
		seq, msg := c.oldest()
		if msg == nil {
			select {
			case <-ctx.Done():
				return
			case <-c.wake:
			case <-time.After(time.Second):
			}
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, c.cfg.PublishTimeout)
		_, err := js.Publish(pctx, federated.UpdateSubjectPrefix+c.cfg.Site, msg,
			jetstream.WithMsgID(federated.MsgID(c.cfg.Site, seq)), jetstream.WithExpectStream(federated.UpdateStream))
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			_ = c.db.Update(func(tx *bolt.Tx) error {
				return bumpCounters(tx, func(k *Counters) { k.PublishFailures++; k.LastPublishError = err.Error() })
			})
			c.log.Debug("publish failed; backing off", "seq", seq, "err", err)
			if !b.Sleep(ctx) {
				return
			}
			continue
		}
		if err := c.removeSent(seq); err != nil {
			// the stream has it but the outbox still does (a full disk):
			// the next attempt publishes it again (a duplicate by its
			// MsgID), so back off as for a failed publish, not at once
			c.log.Error("sent update not removed from the outbox; backing off", "seq", seq, "err", err)
			if !b.Sleep(ctx) {
				return
			}
			continue
		}
		b.Reset()
		if c.cfg.Sequencer != nil {
			c.siteDone(ctx, seq)
		}
	}
}

// dropSent takes update seq out of the outbox and counts it published.
func (c *Client) dropSent(seq uint64) error {
	return c.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketOutbox).Delete(u64(seq)); err != nil {
			return err
		}
		return bumpCounters(tx, func(k *Counters) { k.Published++ })
	})
}

// siteDone tells the Sequencer that update seq left the outbox, retrying
// with backoff until it succeeds or ctx ends (the site's copy is then
// left behind: a successor re-sends it under its Msg-Id, which the
// stream's de-duplication window or the coordinator's high-water mark
// turns into a no-op).
func (c *Client) siteDone(ctx context.Context, seq uint64) {
	b := backoff.New(c.cfg.BackoffMin, c.cfg.BackoffMax, c.cfg.Seed^seq)
	for {
		err := c.cfg.Sequencer.Done(ctx, seq)
		if err == nil {
			return
		}
		c.log.Warn("site copy of a sent update not removed; retrying", "seq", seq, "err", err)
		if !b.Sleep(ctx) {
			return
		}
	}
}

func (c *Client) oldest() (uint64, []byte) {
	var seq uint64
	var msg []byte
	_ = c.db.View(func(tx *bolt.Tx) error {
		k, v := tx.Bucket(bucketOutbox).Cursor().First()
		if k != nil {
			seq, msg = boltkv.FromU64(k), append([]byte(nil), v...)
		}
		return nil
	})
	return seq, msg
}

// onAck records the coordinator's verdicts.
func (c *Client) onAck(m *nats.Msg) {
	a, err := federated.DecodeAck(m.Data)
	if err != nil || a.Site != c.cfg.Site {
		return
	}
	var caught, from uint64
	_ = c.db.Update(func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		from = max(getU64(m, keySeq), getU64(m, keySeqFloor))
		// the coordinator has seen sequences of this site above this
		// store's newest (the store was lost or restored from an old
		// copy): the next update continues above them. Only the ack of a
		// sequence this store used, at most maxSeqCatchUp ahead. The
		// floor is its own key: an update trained meanwhile with the
		// sequence reserved before it is still queued (and refused as a
		// replay), where moving the sequence itself would fail its
		// enqueue and, with a site ledger, skip the round. A mark more
		// than maxSeqCatchUp ahead is followed that far (the next
		// replay's ack moves it on), so the sequence reaches any mark
		// in steps while no single ack can exhaust it.
		if a.HWM > from && a.Seq <= getU64(m, keySeq) {
			caught = min(a.HWM, from+maxSeqCatchUp)
			if err := m.Put(keySeqFloor, u64(caught)); err != nil {
				return err
			}
		}
		return bumpCounters(tx, func(k *Counters) {
			switch a.Status {
			case federated.Accepted:
				k.Accepted++
			case federated.Duplicate:
				k.Duplicate++
			default:
				if k.Rejected == nil {
					k.Rejected = map[string]int{}
				}
				k.Rejected[a.Reason]++
			}
			if caught != 0 {
				k.SequenceCatchUps++
			}
		})
	})
	switch {
	case caught != 0:
		c.log.Warn("the coordinator has seen newer sequences of this site than this store (a lost or restored agent.db?): continuing above them",
			"refused", a.Seq, "store", from, "coordinator", a.HWM, "floor", caught)
	case a.HWM > from:
		c.log.Warn("a replay ack's high-water mark ignored: the ack is of a sequence this store never used", "refused", a.Seq, "store", from, "coordinator", a.HWM)
	}
	c.report()
}

// maxSeqCatchUp bounds how far one replay ack may move this store's
// sequence (onAck): 2^32 updates, beyond any site's history, so no single
// ack can exhaust the sequence; a mark further ahead is reached in steps
// of it, one replay ack each.
const maxSeqCatchUp = federated.MaxSeqJump

// pruneBlobs keeps the artifacts of the installed and last-known-good
// versions only.
func pruneBlobs(mb *bolt.Bucket, tx *bolt.Tx, keep uint64) {
	var lkg Installed
	if raw := mb.Get(keyLKG); raw != nil {
		_ = json.Unmarshal(raw, &lkg)
	}
	var drop [][]byte
	_ = mb.ForEach(func(k, _ []byte) error {
		var v uint64
		var d string
		if _, err := fmt.Sscanf(string(k), "blob/%d/%s", &v, &d); err == nil && v != keep && v != lkg.Version {
			drop = append(drop, append([]byte(nil), k...))
		}
		return nil
	})
	for _, k := range drop {
		_ = mb.Delete(k)
	}
}

// installedArtifact returns the installed model and its verified artifact
// of a dtype.
func (c *Client) installedArtifact(dtype string) (*Installed, *quant.Artifact, error) {
	var inst *Installed
	var raw []byte
	err := c.db.View(func(tx *bolt.Tx) error {
		mb := tx.Bucket(bucketModels)
		v := mb.Get(keyInstalled)
		if v == nil {
			return ErrNoModel
		}
		inst = &Installed{}
		if err := json.Unmarshal(v, inst); err != nil {
			return fmt.Errorf("%w: installed: %v", ErrStore, err)
		}
		raw = append([]byte(nil), mb.Get(blobKey(inst.Version, dtype))...)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	a, err := quant.Decode(raw, quant.DecodeOptions{Keys: c.cfg.ModelKeys})
	if err != nil {
		return inst, nil, fmt.Errorf("installed version %d: %w", inst.Version, err)
	}
	return inst, a, nil
}

// InstalledInt8 returns the installed int8 artifact (what the scheduler
// runs) and its record; ErrNoModel when none is installed yet.
func (c *Client) InstalledInt8() (*Installed, *quant.Artifact, error) {
	return c.installedArtifact(quant.Int8)
}

// Status is a snapshot of the client.
type Status struct {
	Site string `json:"site"`
	// Seq is what the next update's sequence is above: the newest used,
	// or the coordinator's high-water mark a replay's ack told, if higher.
	Seq       uint64     `json:"seq"`
	Round     uint64     `json:"last_trained_round"`
	Outbox    int        `json:"outbox"`
	Installed *Installed `json:"installed,omitempty"`
	Counters  Counters   `json:"counters"`
}

// Status reads the client's durable state.
func (c *Client) Status() (Status, error) {
	s := Status{Site: c.cfg.Site}
	err := c.db.View(func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		s.Seq, s.Round = max(getU64(m, keySeq), getU64(m, keySeqFloor)), getU64(m, keyRound)
		s.Outbox = tx.Bucket(bucketOutbox).Stats().KeyN
		if v := tx.Bucket(bucketModels).Get(keyInstalled); v != nil {
			s.Installed = &Installed{}
			if err := json.Unmarshal(v, s.Installed); err != nil {
				return err
			}
		}
		var err error
		s.Counters, err = getCounters(tx)
		return err
	})
	return s, err
}
