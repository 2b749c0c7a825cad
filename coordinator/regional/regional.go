package regional

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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

// consumerName is the root's durable consumer of the regional stream.
const consumerName = "coordinator"

// Stream is how the regional stream is created.
type Stream struct {
	Duplicates, MaxAge time.Duration
	Replicas           int
	Seed               uint64 // of the fetch retries' jitter
}

// Judge judges one regional aggregate that arrived on subject; its
// error is the store's only (the message is delivered again).
type Judge interface {
	ProcessRegional(ctx context.Context, subject string, data []byte) (*Verdict, error)
}

// Hooks are the coordinator's: Fatal tells a store error that stops
// Consume, StoreError counts a verdict not recorded, Warn logs (rate
// limited by key).
type Hooks struct {
	Fatal      func(error) bool
	StoreError func()
	Warn       func(key, msg string, args ...any)
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

// Consume creates the regional stream and its durable consumer and hands
// each aggregate to j until ctx ends or j fails fatally (h.Fatal). A
// fetch or store failure is retried with capped, jittered backoff.
func Consume(ctx context.Context, js jetstream.JetStream, s Stream, j Judge, h Hooks) error {
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: federated.RegionalStream,
		Subjects: []string{federated.RegionalSubjectPrefix + "*"}, Storage: jetstream.FileStorage,
		Duplicates: s.Duplicates, MaxMsgSize: federated.MaxUpdateBytes, MaxAge: s.MaxAge,
		Replicas: s.Replicas}); err != nil {
		return fmt.Errorf("create regional stream: %w", err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, federated.RegionalStream, jetstream.ConsumerConfig{Durable: consumerName,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	if err != nil {
		return fmt.Errorf("create regional consumer: %w", err)
	}
	bo := backoff.New(50*time.Millisecond, 5*time.Second, s.Seed^0x4e61)
	for ctx.Err() == nil {
		batch, err := cons.Fetch(8, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			h.Warn("fetch-regional", "fetch regional aggregates", "err", err)
			if !bo.Sleep(ctx) {
				break
			}
			continue
		}
		for m := range batch.Messages() {
			if _, err := j.ProcessRegional(ctx, m.Subject(), m.Data()); err != nil {
				_ = m.NakWithDelay(time.Second)
				h.StoreError()
				if h.Fatal(err) {
					return err
				}
				h.Warn("store", "recording a regional verdict failed; the stream delivers it again", "err", err)
				continue
			}
			if err := m.Ack(); err != nil {
				h.Warn("ack", "ack regional aggregate", "err", err)
			}
		}
		bo.Reset()
	}
	return ctx.Err()
}
