package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/edgesched/edgesched/federated"
)

// DefaultMaxInflightBytes is the byte budget of the messages in flight
// when none is set (Pipeline.MaxInflightBytes 0): four of the largest
// updates (federated.MaxUpdateBytes).
const DefaultMaxInflightBytes = 4 * federated.MaxUpdateBytes

// ErrBudget refuses a negative byte budget.
var ErrBudget = errors.New("ingest: bad byte budget")

// Budget bounds the bytes of the update messages in flight, from their
// fetch to their verdict (acked, refused or left to the stream): Acquire
// waits, in arrival order, until a message's bytes fit; Release gives
// them back. A message larger than the whole budget takes all of it and
// passes alone, so the bytes held never exceed the larger of the budget
// and the largest message. It is safe for concurrent use.
type Budget struct {
	sem  *semaphore.Weighted
	size int64
	held atomic.Int64
}

// NewBudget makes a budget of size bytes (0: DefaultMaxInflightBytes).
func NewBudget(size int64) (*Budget, error) {
	switch {
	case size < 0:
		return nil, fmt.Errorf("%w: %d bytes, want >= 0 (0: %d)", ErrBudget, size, DefaultMaxInflightBytes)
	case size == 0:
		size = DefaultMaxInflightBytes
	}
	return &Budget{sem: semaphore.NewWeighted(size), size: size}, nil
}

// weight is what a message of n bytes takes of the budget: all of it at
// most.
func (b *Budget) weight(n int) int64 { return min(int64(n), b.size) }

// Acquire waits until a message of n bytes fits in the budget and takes
// them, or until ctx ends (ctx.Err(), nothing taken).
func (b *Budget) Acquire(ctx context.Context, n int) error {
	if err := b.sem.Acquire(ctx, b.weight(n)); err != nil {
		return err
	}
	b.held.Add(int64(n))
	return nil
}

// Release gives back the n bytes of a message acquired before.
func (b *Budget) Release(n int) {
	b.held.Add(-int64(n))
	b.sem.Release(b.weight(n))
}

// Size is the budget's bound in bytes.
func (b *Budget) Size() int64 { return b.size }

// Held is the bytes of the messages acquired and not yet released.
func (b *Budget) Held() int64 { return b.held.Load() }

// Admit takes the n bytes of v from b, waiting for room, then hands v on
// c; it returns false, holding nothing, when ctx ends first.
func Admit[T any](ctx context.Context, b *Budget, n int, c chan<- T, v T) bool {
	if b.Acquire(ctx, n) != nil {
		return false
	}
	select {
	case <-ctx.Done():
		b.Release(n)
		return false
	case c <- v:
		return true
	}
}

// ReleaseLeft gives back to b the bytes (size) of what is left in c once
// nothing sends on it any more: the messages dropped when ctx ended, to
// the stream to deliver again.
func ReleaseLeft[T any](b *Budget, c <-chan T, size func(T) int) {
	for {
		select {
		case v, open := <-c:
			if !open {
				return
			}
			b.Release(size(v))
		default:
			return
		}
	}
}
