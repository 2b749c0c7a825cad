package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator/replica"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/backoff"
)

// ConsumerName is the coordinator's durable pull consumer on the update
// stream (it is the only reader; a highly available coordinator's active
// reads with ConsumerName-e<epoch>).
const ConsumerName = "coordinator"

// resetSince is the first nats-server with the consumer reset API; older
// servers (2.9 ... ) get the durable re-created from its ack floor.
var resetSince = federated.Version{Major: 2, Minor: 14, Patch: 0}

// errCodeStorageExceeded is nats-server's JetStream error code for a
// stream whose limits exceed the storage the server has left
// (JSStorageResourcesExceededErr, "insufficient storage resources
// available"); nats.go names no constant for it.
const errCodeStorageExceeded jetstream.ErrorCode = 10047

// SetupPatience is how long the coordinator retries setting up the stream
// and buckets while the server is not ready (JetStream still recovering
// after a restart, a request timing out) before it gives up.
const SetupPatience = 2 * time.Minute

// Bus is the coordinator's NATS side: its connection, the update stream's
// JetStream context, the state bucket and the model store.
type Bus struct {
	NC  *nats.Conn
	JS  jetstream.JetStream
	KV  jetstream.KeyValue
	Obj jetstream.ObjectStore
}

// Options are the update stream's limits and how everything is created.
type Options struct {
	// DuplicateWindow is the update stream's de-duplication window, at
	// most MaxAge.
	DuplicateWindow time.Duration
	// MaxAge and MaxBytes limit the update stream (0: none); when full,
	// new updates are refused.
	MaxAge   time.Duration
	MaxBytes int64
	// Replicas is the replica count of the stream and the buckets (the
	// consumer follows its stream's).
	Replicas int
	// Seed is the setup retries' jitter's.
	Seed uint64
	// Warn logs a failed setup that is retried (rate limited by key).
	Warn func(key, msg string, args ...any)
}

// SetupRetry is Setup, retried with capped, jittered backoff while the
// failure is transient (Transient) and patience lasts (real time: it is
// about the server, not the coordinator's clock). A refusal (a server too
// old, a stream or bucket configured otherwise) is returned at once.
func SetupRetry(ctx context.Context, nc *nats.Conn, o Options, patience time.Duration) (*Bus, error) {
	deadline := time.Now().Add(patience)
	bo := backoff.New(250*time.Millisecond, 5*time.Second, o.Seed^0xb05)
	for {
		b, err := Setup(ctx, nc, o)
		switch {
		case err == nil:
			return b, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case !Transient(err):
			return nil, err
		case time.Now().After(deadline):
			return nil, fmt.Errorf("JetStream not ready after %v: %w", patience, err)
		}
		o.Warn("setup", "setting up JetStream failed; retrying", "err", err)
		if !bo.Sleep(ctx) {
			return nil, ctx.Err()
		}
	}
}

// Transient reports whether a JetStream request failed for want of a
// ready server: it timed out, nobody answered, or the server said it is
// temporarily unavailable (503: JetStream starting or recovering).
func Transient(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		(errors.As(err, &api) && api.Code == 503)
}

// Denied is the permissions violation behind a JetStream request on
// stream that timed out (a Transient err), or nil. A server that refuses
// the connection's user publish on a JetStream API subject drops the
// request and tells the client only asynchronously: the request times
// out as if the server were not ready, and retrying it never succeeds.
// The connection's last error says which, when it is a violation on an
// API subject naming stream (the stream's or one of its consumers'
// requests); one on any other subject, from another user of the
// connection, does not count. Its age is not checked: an older refusal
// on the stream's subjects still counts (a user refused once is, short
// of a reload of the server's permissions, refused again).
func Denied(nc *nats.Conn, err error, stream string) error {
	if nc == nil || err == nil || !Transient(err) {
		return nil
	}
	last := nc.LastError()
	if !errors.Is(last, nats.ErrPermissionViolation) {
		return nil
	}
	m := deniedSubject.FindStringSubmatch(last.Error())
	if m == nil {
		return nil
	}
	tokens := strings.Split(m[1], ".")
	if tokens[0] != "$JS" || !slices.Contains(tokens, "API") || !slices.Contains(tokens, stream) {
		return nil
	}
	return fmt.Errorf("%w (the server refused this user a JetStream request: %w; natsauth.CoordinatorPermissions and RegionPermissions list what it needs; docs/security.md)", err, last)
}

// deniedSubject finds the subject in the server's permissions error.
var deniedSubject = regexp.MustCompile(`(?i)publish to "([^"]+)"`)

// Setup checks the server (at least federated.MinServerVersion) and
// creates (or updates) the stream, the KV bucket and the object store.
func Setup(ctx context.Context, nc *nats.Conn, o Options) (*Bus, error) {
	if err := federated.CheckServerVersion(nc.ConnectedServerVersion(), nc.ConnectedUrlRedacted()); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, o.StreamConfig()); err != nil {
		if apiErr := (*jetstream.APIError)(nil); errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeStorageExceeded {
			return nil, fmt.Errorf("create update stream: %w: it asks for %d bytes of the server's JetStream file storage; lower edge-coordinator --update-max-bytes or raise the server's max_file_store (left unset, nats-server takes a share of the disk free at start)", err, o.MaxBytes)
		}
		return nil, fmt.Errorf("create update stream: %w", err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: federated.StateBucket, History: 1, Storage: jetstream.FileStorage, Replicas: o.Replicas})
	if err != nil {
		return nil, fmt.Errorf("create state bucket: %w", err)
	}
	obj, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: federated.ModelBucket, Storage: jetstream.FileStorage, Replicas: o.Replicas})
	if err != nil {
		return nil, fmt.Errorf("create model bucket: %w", err)
	}
	return &Bus{NC: nc, JS: js, KV: kv, Obj: obj}, nil
}

// StreamConfig is the update stream: its age and size limits (when full,
// new updates are refused and wait in the sites' outboxes) back up the
// coordinator's removal of what it has judged.
func (o Options) StreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: federated.UpdateStream, Subjects: []string{federated.UpdateSubjectPrefix + "*"},
		Storage: jetstream.FileStorage, Duplicates: min(o.DuplicateWindow, o.maxAge()), MaxMsgSize: federated.MaxUpdateBytes,
		MaxAge: o.MaxAge, MaxBytes: o.maxBytes(), Discard: jetstream.DiscardNew,
		Replicas: o.Replicas,
	}
}

func (o Options) maxAge() time.Duration {
	if o.MaxAge <= 0 {
		return o.DuplicateWindow
	}
	return o.MaxAge
}

func (o Options) maxBytes() int64 {
	if o.MaxBytes <= 0 {
		return -1
	}
	return o.MaxBytes
}

// consumerConfig is the durable's configuration (deliver is its start).
func consumerConfig(deliver jetstream.DeliverPolicy, start uint64) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{Durable: ConsumerName, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		MaxAckPending: 4096, DeliverPolicy: deliver, OptStartSeq: start}
}

// OpenConsumer returns the durable consumer of the update stream. What a
// previous run fetched and never acked (it was killed) would come again
// only after AckWait, while the sites' newer updates were judged first;
// instead it is delivered again at once: the consumer is reset to its ack
// floor (nats-server 2.14 and later), or on older servers deleted and
// re-created to start at the message after its ack floor (the verdicts
// kept under stream sequences make any message it delivers again a
// repetition, never a second verdict). What was judged keeps its verdict.
func (b *Bus) OpenConsumer(ctx context.Context, log *slog.Logger) (jetstream.Consumer, error) {
	cons, err := b.JS.Consumer(ctx, federated.UpdateStream, ConsumerName)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = b.JS.CreateConsumer(ctx, federated.UpdateStream, consumerConfig(jetstream.DeliverAllPolicy, 0))
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
	version := b.NC.ConnectedServerVersion()
	if federated.AtLeast(version, resetSince) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := b.JS.ResetConsumer(rctx, federated.UpdateStream, ConsumerName)
		cancel()
		if err == nil {
			log.Info("updates fetched but not acked before a restart are delivered again now", "pending", info.NumAckPending, "from_stream_seq", res.ResetSeq)
			return b.JS.Consumer(ctx, federated.UpdateStream, ConsumerName)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		log.Warn("reset of the update consumer failed; re-creating it from its ack floor", "err", err)
	}
	start := info.AckFloor.Stream + 1
	if err := b.JS.DeleteConsumer(ctx, federated.UpdateStream, ConsumerName); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("re-create the update consumer (nats-server %s): delete: %w", version, err)
	}
	cons, err = b.JS.CreateConsumer(ctx, federated.UpdateStream, consumerConfig(jetstream.DeliverByStartSequencePolicy, start))
	if err != nil {
		return nil, fmt.Errorf("re-create the update consumer (nats-server %s) at stream sequence %d: %w", version, start, err)
	}
	log.Info("updates fetched but not acked before a restart are delivered again now (consumer re-created from its ack floor)", "pending", info.NumAckPending, "from_stream_seq", start, "nats_server", version)
	return cons, nil
}

// OpenEpochConsumer is a highly available active's consumer of the
// update stream: its own (replica.ConsumerName of its epoch), starting
// after floor, the stream sequence its checkpoint judged everything up
// to (0: the stream's start); the consumers of earlier actives are
// deleted first (replica.DeleteEarlierConsumers: a later active's is
// left).
func (b *Bus) OpenEpochConsumer(ctx context.Context, epoch, floor uint64, log *slog.Logger) (jetstream.Consumer, error) {
	name := replica.ConsumerName(ConsumerName, epoch)
	s, err := b.JS.Stream(ctx, federated.UpdateStream)
	if err != nil {
		return nil, fmt.Errorf("update stream: %w", err)
	}
	replica.DeleteEarlierConsumers(ctx, s, ConsumerName, epoch, log)
	cfg := consumerConfig(jetstream.DeliverAllPolicy, 0)
	if floor > 0 {
		cfg = consumerConfig(jetstream.DeliverByStartSequencePolicy, floor+1)
	}
	cfg.Durable = name
	cons, err := b.JS.CreateOrUpdateConsumer(ctx, federated.UpdateStream, cfg)
	if err != nil {
		return nil, fmt.Errorf("create update consumer %s: %w", name, err)
	}
	return cons, nil
}

// ErrConsumerGone: the durable consumer a fetch loop reads was deleted.
// With high availability only a later active deletes an active's
// consumer (replica.DeleteEarlierConsumers), so the active that finds
// its own gone is deposed; without, the coordinator stops and opens it
// again when it starts (OpenConsumer).
var ErrConsumerGone = errors.New("bus: consumer deleted")

// goneTimeout bounds Gone's request.
const goneTimeout = 5 * time.Second

// Gone asks the server whether cons still exists after a failed fetch
// (a fetch from a deleted consumer finds no responder, or is told the
// consumer was deleted, and would fail the same way for ever): an error
// wrapping ErrConsumerGone when the server says it does not, nil when it
// does or cannot say (the caller retries the fetch).
func Gone(ctx context.Context, cons jetstream.Consumer) error {
	ictx, cancel := context.WithTimeout(ctx, goneTimeout)
	defer cancel()
	_, err := cons.Info(ictx)
	if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil
	}
	name := "?"
	if ci := cons.CachedInfo(); ci != nil {
		name = ci.Stream + "/" + ci.Name
	}
	return fmt.Errorf("%w: %s", ErrConsumerGone, name)
}
