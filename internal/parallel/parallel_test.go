package parallel

import (
	"sync/atomic"
	"testing"
)

// TestFor: every index is visited exactly once, whatever the number of
// workers (more than the indexes, one, the default), and none for n = 0.
func TestFor(t *testing.T) {
	for _, tc := range []struct{ n, workers int }{{0, 4}, {1, 4}, {100, 1}, {100, 3}, {100, 0}, {5, 50}} {
		seen := make([]atomic.Int32, tc.n)
		For(tc.n, tc.workers, func(i int) { seen[i].Add(1) })
		for i := range seen {
			if got := seen[i].Load(); got != 1 {
				t.Fatalf("n %d workers %d: index %d visited %d times", tc.n, tc.workers, i, got)
			}
		}
	}
}
