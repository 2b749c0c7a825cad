package ingest_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/edgesched/edgesched/coordinator/ingest"
)

func newBudget(t *testing.T, size int64) *ingest.Budget {
	t.Helper()
	b, err := ingest.NewBudget(size)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNewBudget: 0 is the default, a negative size is refused.
func TestNewBudget(t *testing.T) {
	for _, tc := range []struct {
		size, want int64
		err        error
	}{
		{0, ingest.DefaultMaxInflightBytes, nil},
		{1, 1, nil},
		{1 << 20, 1 << 20, nil},
		{-1, 0, ingest.ErrBudget},
	} {
		b, err := ingest.NewBudget(tc.size)
		if !errors.Is(err, tc.err) || err == nil && b.Size() != tc.want {
			t.Errorf("NewBudget(%d): %v, %v; want size %d, error %v", tc.size, b, err, tc.want, tc.err)
		}
	}
}

// TestBudgetBound: goroutines taking and giving back messages of mixed
// sizes never hold more than the larger of the budget and the largest
// message, and every message gets through, those larger than the whole
// budget alone.
func TestBudgetBound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget int64
		sizes  []int
	}{
		{"all fit", 10, []int{1, 2, 3, 4}},
		{"some at a time", 10, []int{4, 4, 4, 3, 3, 3, 1, 7}},
		{"larger than the budget, alone", 10, []int{3, 25, 1, 3, 11, 10, 2, 40}},
		{"empty messages", 4, []int{0, 0, 4, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBudget(t, tc.budget)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // (fail, not hang)
			defer cancel()
			bound := tc.budget
			for _, n := range tc.sizes {
				bound = max(bound, int64(n))
			}
			var (
				wg                  sync.WaitGroup
				mu                  sync.Mutex
				held, maxHeld       int64 // (counted here)
				largeHeld, withMore bool
			)
			take := func(n int) {
				mu.Lock()
				defer mu.Unlock()
				large := int64(n) > tc.budget
				withMore = withMore || n > 0 && (largeHeld || large && held > 0)
				held += int64(n)
				largeHeld = largeHeld || large
				maxHeld = max(maxHeld, held, b.Held())
			}
			give := func(n int) {
				mu.Lock()
				defer mu.Unlock()
				held -= int64(n)
				largeHeld = largeHeld && int64(n) <= tc.budget
			}
			for range 20 {
				for _, n := range tc.sizes {
					wg.Go(func() {
						if err := b.Acquire(ctx, n); err != nil {
							t.Errorf("acquire %d: %v", n, err)
							return
						}
						take(n)
						runtime.Gosched()
						give(n)
						b.Release(n)
					})
				}
			}
			wg.Wait()
			if maxHeld > bound {
				t.Errorf("held up to %d bytes, bound %d", maxHeld, bound)
			}
			if withMore {
				t.Error("a message larger than the budget was held with others")
			}
			if got := b.Held(); got != 0 {
				t.Errorf("%d bytes held at the end", got)
			}
		})
	}
}

// TestBudgetLargerThanBudgetWaits: a message larger than the budget
// waits for all of it, takes all of it, and passes.
func TestBudgetLargerThanBudgetWaits(t *testing.T) {
	b := newBudget(t, 10)
	ctx := context.Background()
	if err := b.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- b.Acquire(ctx, 50) }()
	waitFor(t, "a waiting acquisition", nil, func() bool { return b.Held() == 1 }) // (it has not taken anything)
	b.Release(1)
	endsWith(t, "the wait of a message larger than the budget", got, nil, 10*time.Second)
	if b.Held() != 50 {
		t.Fatalf("held %d, want 50", b.Held())
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := b.Acquire(short, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a message beside one larger than the budget: %v, want it to wait", err)
	}
	b.Release(50)
	if err := b.Acquire(ctx, 10); err != nil || b.Held() != 10 {
		t.Fatalf("after it: %v, held %d", err, b.Held())
	}
}

// TestBudgetCancel: a wait for room ends when ctx ends, taking nothing;
// Admit then hands nothing on and holds nothing, also when it had taken
// its bytes and waited for room in the channel.
func TestBudgetCancel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wait  func(ctx context.Context, b *ingest.Budget) error
		sizes []int // held before
		taken int   // what the wait holds before ctx ends
	}{
		{"acquire, budget full", func(ctx context.Context, b *ingest.Budget) error { return b.Acquire(ctx, 4) }, []int{8}, 0},
		{"acquire larger than the budget", func(ctx context.Context, b *ingest.Budget) error { return b.Acquire(ctx, 100) }, []int{1}, 0},
		{"admit, budget full", func(ctx context.Context, b *ingest.Budget) error {
			if ingest.Admit(ctx, b, 4, make(chan int, 1), 1) {
				return errors.New("admitted")
			}
			return ctx.Err()
		}, []int{6, 2}, 0},
		{"admit, channel full", func(ctx context.Context, b *ingest.Budget) error {
			c := make(chan int)
			if ingest.Admit(ctx, b, 4, c, 1) {
				return errors.New("admitted")
			}
			return ctx.Err()
		}, nil, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBudget(t, 8)
			before := 0
			for _, n := range tc.sizes {
				if err := b.Acquire(context.Background(), n); err != nil {
					t.Fatal(err)
				}
				before += n
			}
			ctx, cancel := context.WithCancel(context.Background())
			got := make(chan error, 1)
			go func() { got <- tc.wait(ctx, b) }()
			// (Admit waiting on the channel holds its bytes: cancelled
			// only then, it must give them back)
			waitFor(t, "the wait to take its bytes", nil, func() bool { return b.Held() == int64(before+tc.taken) })
			cancel()
			endsWith(t, "the wait", got, context.Canceled, 5*time.Second)
			if b.Held() != int64(before) {
				t.Fatalf("held %d, want %d", b.Held(), before)
			}
		})
	}
}

// TestReleaseLeft: what is left in a channel, open or closed, is given
// back.
func TestReleaseLeft(t *testing.T) {
	for _, closed := range []bool{false, true} {
		b := newBudget(t, 100)
		c := make(chan int, 4)
		for _, n := range []int{5, 7, 9} {
			if !ingest.Admit(context.Background(), b, n, c, n) {
				t.Fatal("not admitted")
			}
		}
		if closed {
			close(c)
		}
		ingest.ReleaseLeft(b, c, func(n int) int { return n })
		if b.Held() != 0 || len(c) != 0 {
			t.Errorf("closed %v: held %d, %d left", closed, b.Held(), len(c))
		}
	}
}
