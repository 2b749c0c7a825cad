package ingest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator/bus"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/backoff"
)

// Ingest (docs/federated.md "Ingest"). Updates flow through three stages:
//
//  1. fetch: the durable pull consumer hands over what the stream has, at
//     most bus.FetchBytes a request, and each message takes its bytes from
//     the pipeline's Budget (Pipeline.MaxInflightBytes) before it goes
//     on, and gives them back once judged (acked or refused) or left to
//     the stream: what the stages hold is bounded in bytes, not only in
//     messages — the budget, plus what one pull request fetched and the
//     fetch has not yet handed on (in a round that stores payloads, each
//     verified message's stored record is a copy of its payload: up to
//     about the budget again);
//  2. verify: every message is checked, as soon as it arrives, by one of
//     a pool of Pipeline.Verifiers workers — the envelope and its ed25519
//     signature, then the payload (checksum, finite values, its L2 norm),
//     then, in a round that stores payloads, the stored record of what
//     passed is made (a copy and its CRC) — without the coordinator's
//     lock, and handed on in stream order; junk costs one worker a
//     signature check, never the store a transaction;
//  3. judge: under the lock, whatever has been verified (up to
//     Pipeline.Batch messages and groupBytes) is judged in one bbolt
//     transaction (one commit for all its verdicts: a group commit), then
//     acked on the stream, then answered to the sites. The round record is
//     written once per group, not per update, and so are a summing
//     round's running sums, to which the group's accepted updates are
//     added on Rules.Workers goroutines (judge.go).
//
// While one group is judged the next messages are verified. A crash between the
// commit and the stream acks redelivers the group: each message finds its
// verdict under its stream sequence and gets it again, counting nothing.

// Incoming is one update message on its way through ingest.
type Incoming struct {
	Subject   string
	Data      []byte
	StreamSeq uint64        // 0: unknown
	StreamMsg jetstream.Msg // nil when not from the stream (Process)
	verified  chan struct{} // closed once verified (fetchLoop's)
	held      int           // bytes it holds of Run's Budget

	// verification's findings (the envelope refused: not attributable
	// to a site)
	federated.CheckedUpdate

	// Record is the message's stored form (store.EncodeStoredUpdate),
	// made by verification's workers, outside the lock, for a message
	// whose envelope and payload passed: judging stores it when it accepts
	// the update (nil: judging encodes it itself)
	Record []byte

	// the verdict (Batch.Judge's)
	Ack    *federated.Ack
	Again  bool   // delivered again: verdict repeated, nothing counted
	Reason string // refusal reason of an unattributable message
}

// Verify verifies the message (federated.CheckUpdateMsg against sites, for
// a round of dims parameters) and, unless the round sums its updates,
// makes its stored record. It needs no lock.
func (in *Incoming) Verify(sites federated.SiteKeys, dims int, summing bool) {
	in.CheckedUpdate = federated.CheckUpdateMsg(in.Data, in.Subject, sites, dims)
	in.Record = nil
	if in.Err == nil && in.PayloadErr == nil && !summing {
		// the copy and checksum of the stored record (a 50 KB update:
		// a tenth of the judging transaction's time) in parallel
		in.Record, _ = store.EncodeStoredUpdate(&in.Msg.Header, in.Msg.Payload)
	}
}

// groupBytes bounds the message bytes of one group (at least one message
// is taken whatever its size).
const groupBytes = 32 << 20

// Pipeline is ingest's fetch, verification and grouping (Run); the
// coordinator judges the groups.
type Pipeline struct {
	// Batch is the most messages of one pull request and of one group.
	Batch int
	// Verifiers is the size of the verification pool (0: GOMAXPROCS).
	Verifiers int
	// MaxInflightBytes bounds the bytes of the messages between their
	// fetch and their verdict (0: DefaultMaxInflightBytes; a message
	// larger than it passes alone): the fetch waits for room.
	MaxInflightBytes int64
	// Seed is the backoffs' jitter's.
	Seed uint64
	// Verify verifies one message (Incoming.Verify); the pool's
	// goroutines call it concurrently.
	Verify func(*Incoming)
	// Judge records the verdicts on a prefix of group and returns its
	// length; an error means nothing was recorded.
	Judge func(ctx context.Context, group []*Incoming) (int, error)
	// StoreError counts a group whose verdicts could not be stored; Warn
	// logs (rate limited by key).
	StoreError func()
	Warn       func(key, msg string, args ...any)

	budget atomic.Pointer[Budget] // the last Run's (InflightBytes)
}

// InflightBytes is the bytes of the messages the running (or last) Run
// holds between their fetch and their verdict: at most the larger of
// MaxInflightBytes and the largest message, and 0 once Run returned. It
// is safe to call concurrently with Run.
func (p *Pipeline) InflightBytes() int64 {
	if b := p.budget.Load(); b != nil {
		return b.Held()
	}
	return 0
}

// Run runs ingest on cons until ctx ends, the store fails for good
// (store.ErrStore), or cons is deleted (an error wrapping
// bus.ErrConsumerGone: with high availability a later active deleted
// it, and this one is deposed; retrying would fail for ever). Other
// fetch errors and transient store errors (a full disk) are retried with
// capped, jittered backoff; messages whose verdicts could not be stored
// are left to the stream to deliver again. A group is whatever has been
// verified when the previous one is committed (up to Batch messages and
// groupBytes): the slower the store, the larger the groups. A negative
// MaxInflightBytes is refused (ErrBudget).
func (p *Pipeline) Run(ctx context.Context, cons jetstream.Consumer) error {
	budget, err := NewBudget(p.MaxInflightBytes)
	if err != nil {
		return fmt.Errorf("ingest pipeline: %w", err)
	}
	p.budget.Store(budget)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	verified := make(chan *Incoming, 2*p.Batch)
	gone := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := p.fetchLoop(ctx, cons, budget, verified); err != nil {
			gone <- err
		}
	})
	defer func() {
		cancel()
		wg.Wait()
		ReleaseLeft(budget, verified, heldBytes) // (verified, not judged)
	}()
	bo := backoff.New(50*time.Millisecond, 5*time.Second, p.Seed^0x1e57)
	for {
		var group []*Incoming
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-gone:
			return err
		case in := <-verified:
			group = append(group, in)
		}
		size := len(group[0].Data)
	fill:
		for len(group) < p.Batch && size < groupBytes {
			select {
			case in := <-verified:
				group, size = append(group, in), size+len(in.Data)
			default:
				break fill
			}
		}
		for len(group) > 0 {
			n, err := p.Judge(ctx, group)
			if err != nil {
				for _, in := range group {
					if in.StreamMsg != nil {
						_ = in.StreamMsg.NakWithDelay(time.Second)
					}
					budget.Release(in.held)
				}
				p.StoreError()
				if errors.Is(err, store.ErrStore) {
					return err
				}
				p.Warn("store", "recording update verdicts failed; the stream delivers them again", "err", err, "updates", len(group))
				if !bo.Sleep(ctx) {
					return ctx.Err()
				}
				break
			}
			bo.Reset()
			for _, in := range group[:n] {
				budget.Release(in.held)
			}
			group = group[n:]
		}
	}
}

// fetchLoop pulls messages, has them verified by a pool of Verifiers
// workers as they arrive and hands them on in stream order once verified.
// At most 2*Batch messages are between the fetch and the hand-over, and
// each holds its bytes of budget from before it enters until it is
// judged: those it drops when ctx ends it releases. It returns nil when
// ctx ends, and bus.ErrConsumerGone's error when cons was deleted.
func (p *Pipeline) fetchLoop(ctx context.Context, cons jetstream.Consumer, budget *Budget, verified chan<- *Incoming) error {
	workers := p.Verifiers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	jobs := make(chan *Incoming, 2*p.Batch)
	inOrder := make(chan *Incoming, 2*p.Batch)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for in := range jobs {
				p.Verify(in)
				close(in.verified)
			}
		})
	}
	wg.Go(func() {
		for in := range inOrder {
			select {
			case <-ctx.Done():
				budget.Release(in.held)
				return
			case <-in.verified:
			}
			select {
			case <-ctx.Done():
				budget.Release(in.held)
				return
			case verified <- in:
			}
		}
	})
	defer func() {
		close(inOrder)
		close(jobs)
		wg.Wait()
		ReleaseLeft(budget, inOrder, heldBytes)
	}()
	bo := backoff.New(50*time.Millisecond, 5*time.Second, p.Seed)
	for ctx.Err() == nil {
		_, err := bus.Fetch(ctx, cons, p.Batch, func(m jetstream.Msg) error {
			in := newIncoming(m)
			in.verified = make(chan struct{})
			in.held = len(in.Data)
			if !Admit(ctx, budget, in.held, inOrder, in) {
				return ctx.Err()
			}
			jobs <- in // never blocks for long: the workers need nothing to drain it
			return nil
		})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			// (a fetch from a deleted consumer finds no responder, or is
			// told it was deleted)
			if gone := bus.Gone(ctx, cons); gone != nil {
				return gone
			}
			p.Warn("fetch", "fetch updates", "err", err)
			if !bo.Sleep(ctx) {
				return nil
			}
			continue
		}
		bo.Reset()
	}
	return nil
}

// heldBytes is what in holds of the budget.
func heldBytes(in *Incoming) int { return in.held }

func newIncoming(m jetstream.Msg) *Incoming {
	in := &Incoming{Subject: m.Subject(), Data: m.Data(), StreamMsg: m}
	if md, err := m.Metadata(); err == nil {
		in.StreamSeq = md.Sequence.Stream
	}
	return in
}
