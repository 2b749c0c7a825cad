// Package backoff is capped exponential backoff with full jitter, the
// retry pacing of every network loop in edgesched.
//
// A Backoff belongs to one loop (one goroutine); it is not safe for
// concurrent use.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff waits a uniformly random time in (0, step], doubling the step
// after every wait up to Max, and back to Min after Reset.
type Backoff struct {
	min, max, cur time.Duration
	rng           *rand.Rand
}

// New returns a backoff from min to max (max >= min > 0) whose jitter is
// drawn from a stream seeded by seed.
func New(min, max time.Duration, seed uint64) *Backoff {
	if min <= 0 {
		min = time.Millisecond
	}
	if max < min {
		max = min
	}
	return &Backoff{min: min, max: max, cur: min, rng: rand.New(rand.NewPCG(seed, 0xbac0))}
}

// Reset goes back to the smallest step (after a success).
func (b *Backoff) Reset() { b.cur = b.min }

// Next returns the next wait and advances the step.
func (b *Backoff) Next() time.Duration {
	d := time.Duration(b.rng.Int64N(int64(b.cur))) + 1
	b.cur = min(2*b.cur, b.max)
	return d
}

// Sleep waits Next(); false when ctx ended first.
func (b *Backoff) Sleep(ctx context.Context) bool {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
