package regional

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator/bus"
	"github.com/edgesched/edgesched/coordinator/replica"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/backoff"
)

// Reasons a regional aggregate is refused (besides federated's
// ReasonMalformed, ReasonSignature, ReasonReplay, ReasonTooLarge,
// ReasonTooHeavy, ReasonShape, ReasonRoundClosed).
const (
	// ReasonRoundNotOpen: the aggregate's round is not the current one,
	// or no longer collects.
	ReasonRoundNotOpen = "round_not_open"
	// ReasonNotSumming: the round does not keep sums (a robust rule, or
	// StorePayloads): its regions forward their sites' updates as they
	// are instead (docs/federated.md).
	ReasonNotSumming = "not_summing"
	// ReasonFixedPoint: the aggregate's fixed point is not the round's.
	ReasonFixedPoint = "wrong_fixed_point"
	// ReasonForeignSite: the aggregate lists a site of another region (or
	// of none): a regional key is trusted for its own sites only.
	ReasonForeignSite = "foreign_site"
	// ReasonSiteTwice: the aggregate lists a site twice.
	ReasonSiteTwice = "site_twice"
	// ReasonSiteCounted: a listed site is already counted in the round (it
	// sent an update directly, or another aggregate listed it).
	ReasonSiteCounted = "site_counted"
	// ReasonRegionAgain: the region sent another aggregate for the round.
	ReasonRegionAgain = "region_again"
)

// Verdict is the outcome of one regional aggregate.
type Verdict struct {
	Region string              `json:"region"`
	Round  uint64              `json:"round"`
	Sites  int                 `json:"sites"`
	Status federated.AckStatus `json:"status"`
	Reason string              `json:"reason,omitempty"`
	Detail string              `json:"detail,omitempty"`
	// Again: the same aggregate judged before; nothing was counted.
	Again bool `json:"again,omitempty"`
}

// ConsumerName is the root's durable consumer of the regional stream
// (a highly available root's is ConsumerName-e<epoch>).
const ConsumerName = "coordinator"

// Stream is how the regional stream is created and read.
type Stream struct {
	Duplicates, MaxAge time.Duration
	Replicas           int
	Seed               uint64 // of the fetch retries' jitter
	// Epoch, when set, is a highly available root's epoch: its consumer
	// is its own (replica.ConsumerName), starts after stream sequence
	// From (the checkpoint's floor; 0: at the stream's start), and every
	// earlier active's consumer is deleted (fencing).
	Epoch, From uint64
}

// Judge judges one regional aggregate that arrived on subject; its
// error is the store's only (the message is delivered again).
type Judge interface {
	ProcessRegional(ctx context.Context, subject string, data []byte) (*Verdict, error)
}

// Hooks are the coordinator's: Fatal tells a store error that stops
// Consume, StoreError counts a verdict not recorded, Warn logs (rate
// limited by key); Opened (optional) gets the consumer once created,
// Acked (optional) each verdict with its stream sequence once the server
// confirmed the ack.
type Hooks struct {
	Fatal      func(error) bool
	StoreError func()
	Warn       func(key, msg string, args ...any)
	Opened     func(jetstream.Consumer)
	Acked      func(seq uint64, v *Verdict)
	Log        *slog.Logger // (the fencing's warnings; nil: none)
}

// Decode decodes and verifies a regional aggregate (against its
// region's key in regions) that arrived on subject ("" skips the
// subject binding). A refusal comes with its reason (ReasonMalformed or
// ReasonSignature).
func Decode(subject string, data []byte, regions *federated.Regions) (*federated.RegionalAggregate, string, error) {
	a, err := federated.DecodeRegional(data, regions)
	if err == nil && subject != "" && subject != federated.RegionalSubjectPrefix+a.Header.Region {
		err = fmt.Errorf("%w: region %q's aggregate arrived on %s", federated.ErrRegional, a.Header.Region, subject)
	}
	switch {
	case err == nil:
		return a, "", nil
	case errors.Is(err, federated.ErrSiteSignature):
		return nil, federated.ReasonSignature, err
	}
	return nil, federated.ReasonMalformed, err
}

// Config is the regional stream's configuration, which Consume creates
// or updates. Its de-duplication window is Duplicates held to MaxAge
// (when there is one): the server refuses a longer window (as the update
// stream's, bus.Options.StreamConfig).
func (s Stream) Config() jetstream.StreamConfig {
	dup := s.Duplicates
	if s.MaxAge > 0 && dup > s.MaxAge {
		dup = s.MaxAge
	}
	return jetstream.StreamConfig{Name: federated.RegionalStream,
		Subjects: []string{federated.RegionalSubjectPrefix + "*"}, Storage: jetstream.FileStorage,
		Duplicates: dup, MaxMsgSize: federated.MaxUpdateBytes, MaxAge: s.MaxAge,
		Replicas: s.Replicas}
}

// Consume creates the regional stream and its durable consumer and hands
// each aggregate to j until ctx ends, j fails fatally (h.Fatal), or the
// consumer is deleted (an error wrapping bus.ErrConsumerGone: with
// high availability a later active deleted it). Any other fetch failure,
// and a store failure, is retried with capped, jittered backoff; so is a
// transient failure (bus.Transient) to create the stream or the consumer,
// until ctx ends; a refusal of either ends Consume.
func Consume(ctx context.Context, js jetstream.JetStream, s Stream, j Judge, h Hooks) error {
	cons, err := setup(ctx, js, s, h)
	if err != nil {
		return err
	}
	if h.Opened != nil {
		h.Opened(cons)
	}
	bo := backoff.New(50*time.Millisecond, 5*time.Second, s.Seed^0x4e61)
	for ctx.Err() == nil {
		var fatal error // the judge's error that ends Consume
		_, err := bus.Fetch(ctx, cons, fetchBatch, func(m jetstream.Msg) error {
			v, err := j.ProcessRegional(ctx, m.Subject(), m.Data())
			if err != nil {
				_ = m.NakWithDelay(time.Second)
				h.StoreError()
				if h.Fatal(err) {
					fatal = err
					return err
				}
				h.Warn("store", "recording a regional verdict failed; the stream delivers it again", "err", err)
				return nil
			}
			// (confirmed: the consumer's ack floor, which a checkpoint
			// records, then covers it)
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = m.DoubleAck(actx)
			cancel()
			if err != nil {
				h.Warn("ack", "ack regional aggregate", "err", err)
				return nil
			}
			if md, err := m.Metadata(); err == nil && h.Acked != nil {
				h.Acked(md.Sequence.Stream, v)
			}
			return nil
		})
		if fatal != nil {
			return fatal
		}
		if ctx.Err() != nil {
			break
		}
		// (a request nobody answered, or the consumer deleted while it
		// waited, fails here: without a pause it would be repeated at once)
		if err != nil {
			if err := fetchFailed(ctx, cons, bo, h, err); err != nil {
				return err
			}
			continue
		}
		bo.Reset()
	}
	return ctx.Err()
}

// setup creates (or updates) the regional stream and opens the consumer,
// retrying a transient failure (a timeout, no responders, a server that
// is not ready: bus.Transient) with capped, jittered backoff until ctx
// ends (its error); any other failure is returned, and so is a timeout
// behind which the server refused the user the request (bus.Denied).
func setup(ctx context.Context, js jetstream.JetStream, s Stream, h Hooks) (jetstream.Consumer, error) {
	bo := backoff.New(250*time.Millisecond, 5*time.Second, s.Seed^0x5e7a)
	for {
		_, err := js.CreateOrUpdateStream(ctx, s.Config())
		if err != nil {
			err = fmt.Errorf("create regional stream: %w", err)
		} else {
			var cons jetstream.Consumer
			if cons, err = openConsumer(ctx, js, s, h.Log); err == nil {
				return cons, nil
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !bus.Transient(err) {
			return nil, err
		}
		if denied := bus.Denied(js.Conn(), err, s.Config().Name); denied != nil {
			return nil, denied
		}
		h.Warn("setup-regional", "setting up the regional stream failed; retrying", "err", err)
		if !bo.Sleep(ctx) {
			return nil, ctx.Err()
		}
	}
}

// fetchBatch is the most aggregates one pull request brings (and at most
// bus.FetchBytes of them): they are judged one at a time.
const fetchBatch = 8

// fetchFailed handles a failed fetch: the consumer gone ends Consume
// (bus.ErrConsumerGone); anything else is logged and retried after a
// backoff (ctx's error when it ends first).
func fetchFailed(ctx context.Context, cons jetstream.Consumer, bo *backoff.Backoff, h Hooks, err error) error {
	if gone := bus.Gone(ctx, cons); gone != nil {
		return gone
	}
	h.Warn("fetch-regional", "fetch regional aggregates", "err", err)
	if !bo.Sleep(ctx) {
		return ctx.Err()
	}
	return nil
}

// openConsumer creates the root's consumer of the regional stream: the
// durable ConsumerName; with s.Epoch the active's own, starting after
// s.From, once every earlier active's is deleted (a later active's is
// left: replica.DeleteEarlierConsumers).
func openConsumer(ctx context.Context, js jetstream.JetStream, s Stream, log *slog.Logger) (jetstream.Consumer, error) {
	cfg := jetstream.ConsumerConfig{Durable: ConsumerName, AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute}
	if s.Epoch != 0 {
		cfg.Durable = replica.ConsumerName(ConsumerName, s.Epoch)
		st, err := js.Stream(ctx, federated.RegionalStream)
		if err != nil {
			return nil, fmt.Errorf("regional stream: %w", err)
		}
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		replica.DeleteEarlierConsumers(ctx, st, ConsumerName, s.Epoch, log)
		if s.From > 0 {
			cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, s.From+1
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, federated.RegionalStream, cfg)
	if err != nil {
		return nil, fmt.Errorf("create regional consumer %s: %w", cfg.Durable, err)
	}
	return cons, nil
}
