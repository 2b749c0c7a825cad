package bus

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/federated"
)

// FetchBytes bounds one pull request: room for the largest message an
// update or regional stream takes (federated.MaxUpdateBytes, their
// MaxMsgSize) with its subject and ack reply, which the server counts
// too. A smaller bound would stall the consumer: the server delivers
// neither a message larger than the request's bound nor anything after
// it. Without a bound, one request could bring n of the largest messages.
const FetchBytes = federated.MaxUpdateBytes + 64<<10

// FetchWait is how long one pull request waits. nats.go gives a fetch up
// when no whole message has come in for the wait plus a second, and drops
// a message still arriving then: the stream delivers it again after
// AckWait, and again, forever, if it always takes longer. So the wait is
// as long as it may be without nats.go's heartbeats (from 10 s on, which
// end a fetch after 10 s without a whole message): a 64 MiB update needs
// about 6.4 MiB/s. The wait delays nothing (messages are handed on as
// they arrive, and Fetch returns when its context ends).
const FetchWait = 9 * time.Second

// Fetch makes one pull request on cons for at most n messages (at most
// FetchBytes, waiting at most FetchWait) and hands each to each as it
// arrives, in stream order. It returns how many it handed on, and: nil
// when the request ended for want of messages or time; ctx's error when
// ctx ended first (messages not handed on are the stream's again after
// AckWait); the first error each returned (Fetch then stops); or the
// request's own failure (a deleted consumer's among them: see Gone).
func Fetch(ctx context.Context, cons jetstream.Consumer, n int, each func(jetstream.Msg) error) (int, error) {
	batch, err := cons.Fetch(n, jetstream.FetchMaxBytes(FetchBytes), jetstream.FetchMaxWait(FetchWait))
	if err != nil {
		return 0, benign(err)
	}
	msgs := batch.Messages()
	got := 0
	for {
		select {
		case <-ctx.Done():
			return got, ctx.Err()
		case m, open := <-msgs:
			if !open {
				return got, benign(batch.Error())
			}
			got++
			if err := each(m); err != nil {
				return got, err
			}
		}
	}
}

// benign drops a pull request's normal endings: no message, or its wait
// over.
func benign(err error) error {
	if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}
