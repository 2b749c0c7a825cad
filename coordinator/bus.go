package coordinator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/backoff"
)

// consumerName is the coordinator's durable pull consumer on the update
// stream (it is the only reader).
const consumerName = "coordinator"

// resetSince is the first nats-server with the consumer reset API; older
// servers (2.9 ... ) get the durable re-created from its ack floor.
var resetSince = federated.Version{Major: 2, Minor: 14, Patch: 0}

// setupPatience is how long Run retries setting up the stream and buckets
// while the server is not ready (JetStream still recovering after a
// restart, a request timing out) before it gives up.
const setupPatience = 2 * time.Minute

// setupBusRetry is setupBus, retried with capped, jittered backoff while
// the failure is transient (transientBus) and patience lasts (real time:
// it is about the server, not the coordinator's clock). A refusal (a
// server too old, a stream or bucket configured otherwise) is returned at
// once.
func (c *Coordinator) setupBusRetry(ctx context.Context, nc *nats.Conn, patience time.Duration) (*bus, error) {
	deadline := time.Now().Add(patience)
	bo := backoff.New(250*time.Millisecond, 5*time.Second, c.cfg.Seed^0xb05)
	for {
		b, err := c.setupBus(ctx, nc)
		switch {
		case err == nil:
			return b, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case !transientBus(err):
			return nil, err
		case time.Now().After(deadline):
			return nil, fmt.Errorf("JetStream not ready after %v: %w", patience, err)
		}
		c.limited.Warn("setup", "setting up JetStream failed; retrying", "err", err)
		if !bo.Sleep(ctx) {
			return nil, ctx.Err()
		}
	}
}

// transientBus reports whether a JetStream request failed for want of a
// ready server: it timed out, nobody answered, or the server said it is
// temporarily unavailable (503: JetStream starting or recovering).
func transientBus(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		(errors.As(err, &api) && api.Code == 503)
}

// setupBus checks the server and creates (or updates) the stream, the KV
// bucket and the object store.
func (c *Coordinator) setupBus(ctx context.Context, nc *nats.Conn) (*bus, error) {
	if err := federated.CheckServerVersion(nc.ConnectedServerVersion(), nc.ConnectedUrlRedacted()); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, c.streamConfig()); err != nil {
		return nil, fmt.Errorf("create update stream: %w", err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: federated.StateBucket, History: 1, Storage: jetstream.FileStorage, Replicas: c.replicas()})
	if err != nil {
		return nil, fmt.Errorf("create state bucket: %w", err)
	}
	obj, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: federated.ModelBucket, Storage: jetstream.FileStorage, Replicas: c.replicas()})
	if err != nil {
		return nil, fmt.Errorf("create model bucket: %w", err)
	}
	return &bus{nc: nc, js: js, kv: kv, obj: obj}, nil
}

// streamConfig is the update stream: its age and size limits (when full,
// new updates are refused and wait in the sites' outboxes) back up the
// removal of what the coordinator has judged (trimStream).
func (c *Coordinator) streamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: federated.UpdateStream, Subjects: []string{federated.UpdateSubjectPrefix + "*"},
		Storage: jetstream.FileStorage, Duplicates: min(c.cfg.DuplicateWindow, c.maxAge()), MaxMsgSize: federated.MaxUpdateBytes,
		MaxAge: c.cfg.UpdateMaxAge, MaxBytes: c.maxBytes(), Discard: jetstream.DiscardNew,
		Replicas: c.replicas(),
	}
}

// replicas is the replica count of everything the coordinator creates in
// JetStream (the consumer follows its stream's).
func (c *Coordinator) replicas() int { return max(c.cfg.Replicas, 1) }

func (c *Coordinator) maxAge() time.Duration {
	if c.cfg.UpdateMaxAge <= 0 {
		return c.cfg.DuplicateWindow
	}
	return c.cfg.UpdateMaxAge
}

func (c *Coordinator) maxBytes() int64 {
	if c.cfg.UpdateMaxBytes <= 0 {
		return -1
	}
	return c.cfg.UpdateMaxBytes
}

// consumerConfig is the durable's configuration (deliver is its start).
func consumerConfig(deliver jetstream.DeliverPolicy, start uint64) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{Durable: consumerName, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		MaxAckPending: 4096, DeliverPolicy: deliver, OptStartSeq: start}
}

// openConsumer returns the durable consumer of the update stream. What a
// previous run fetched and never acked (it was killed) would come again
// only after AckWait, while the sites' newer updates were judged first;
// instead it is delivered again at once: the consumer is reset to its ack
// floor (nats-server 2.14 and later), or on older servers deleted and
// re-created to start at the message after its ack floor (the verdicts
// kept under stream sequences make any message it delivers again a
// repetition, never a second verdict). What was judged keeps its verdict.
func (c *Coordinator) openConsumer(ctx context.Context, b *bus) (jetstream.Consumer, error) {
	if c.ha != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.haConsumer(ctx, b)
	}
	cons, err := b.js.Consumer(ctx, federated.UpdateStream, consumerName)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = b.js.CreateConsumer(ctx, federated.UpdateStream, consumerConfig(jetstream.DeliverAllPolicy, 0))
		if err != nil {
			return nil, fmt.Errorf("create update consumer: %w", err)
		}
		return cons, nil
	}
	if err != nil {
		return nil, fmt.Errorf("update consumer: %w", err)
	}
	info := cons.CachedInfo()
	if info.NumAckPending == 0 {
		return cons, nil
	}
	version := b.nc.ConnectedServerVersion()
	if federated.AtLeast(version, resetSince) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := b.js.ResetConsumer(rctx, federated.UpdateStream, consumerName)
		cancel()
		if err == nil {
			c.log.Info("updates fetched but not acked before a restart are delivered again now", "pending", info.NumAckPending, "from_stream_seq", res.ResetSeq)
			return b.js.Consumer(ctx, federated.UpdateStream, consumerName)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.log.Warn("reset of the update consumer failed; re-creating it from its ack floor", "err", err)
	}
	start := info.AckFloor.Stream + 1
	if err := b.js.DeleteConsumer(ctx, federated.UpdateStream, consumerName); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("re-create the update consumer (nats-server %s): delete: %w", version, err)
	}
	cons, err = b.js.CreateConsumer(ctx, federated.UpdateStream, consumerConfig(jetstream.DeliverByStartSequencePolicy, start))
	if err != nil {
		return nil, fmt.Errorf("re-create the update consumer (nats-server %s) at stream sequence %d: %w", version, start, err)
	}
	c.log.Info("updates fetched but not acked before a restart are delivered again now (consumer re-created from its ack floor)", "pending", info.NumAckPending, "from_stream_seq", start, "nats_server", version)
	return cons, nil
}

// trimStream removes the updates the coordinator has judged and acked
// (everything below its consumer's ack floor): a judged update lives in
// the store (or in its summing round's sums), the stream need not keep it.
func (c *Coordinator) trimStream(ctx context.Context, cons jetstream.Consumer) {
	b := c.bus
	if b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := cons.Info(ctx)
	if err != nil {
		c.limited.Warn("trim", "update consumer info", "err", err)
		return
	}
	floor := info.AckFloor.Stream
	if c.ha != nil {
		// what a new active would judge again stays
		floor = min(floor, c.ha.Floor())
	}
	if floor <= c.trimmedTo {
		return
	}
	s, err := b.js.Stream(ctx, federated.UpdateStream)
	if err == nil {
		err = s.Purge(ctx, jetstream.WithPurgeSequence(floor+1))
	}
	if err != nil {
		c.limited.Warn("trim", "remove judged updates from the stream", "err", err)
		return
	}
	c.trimmedTo = floor
}

// busLoop trims the stream and writes the periodic online backups until
// ctx ends.
func (c *Coordinator) busLoop(ctx context.Context, cons jetstream.Consumer) {
	trim := time.NewTicker(max(c.cfg.PollInterval, time.Second))
	defer trim.Stop()
	var backup, ckpt <-chan time.Time
	if c.ha != nil {
		t := time.NewTicker(c.cfg.checkpointEvery())
		defer t.Stop()
		ckpt = t.C
	}
	if c.cfg.BackupEvery > 0 {
		t := time.NewTicker(c.cfg.BackupEvery)
		defer t.Stop()
		backup = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-trim.C:
			c.trimStream(ctx, cons)
		case <-ckpt:
			c.mu.Lock()
			err := c.checkpoint(ctx)
			c.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				c.limited.Warn("checkpoint", "periodic checkpoint", "err", err)
			}
		case <-backup:
			if path, n, err := c.BackupNow(); err != nil {
				c.limited.Warn("backup", "online backup", "err", err)
			} else {
				c.log.Info("online backup written", "path", path, "bytes", n)
			}
		}
	}
}

// backupDir is where online backups go.
func (c *Coordinator) backupDir() string {
	if c.cfg.BackupDir != "" {
		return c.cfg.BackupDir
	}
	return filepath.Join(c.cfg.DataDir, "backups")
}

// BackupNow writes an online backup into the backup directory
// (coordinator-TIME.db), keeps the newest BackupKeep and returns its path
// and size.
func (c *Coordinator) BackupNow() (string, int64, error) {
	dir := c.backupDir()
	path := filepath.Join(dir, "coordinator-"+c.clock.Now().UTC().Format("20060102T150405.000Z")+".db")
	n, err := c.Backup(path)
	if err != nil {
		return "", 0, err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "coordinator-*.db"))
	slices.Sort(old)
	for len(old) > c.cfg.BackupKeep {
		if !strings.HasSuffix(old[0], filepath.Base(path)) {
			_ = os.Remove(old[0])
		}
		old = old[1:]
	}
	return path, n, nil
}
