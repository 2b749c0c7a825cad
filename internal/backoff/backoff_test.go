package backoff

import (
	"context"
	"testing"
	"time"
)

func TestBackoffIsCappedAndJittered(t *testing.T) {
	b := New(10*time.Millisecond, 80*time.Millisecond, 1)
	// steps: 10, 20, 40, 80, 80, ... ms; each wait is in (0, step]
	steps := []time.Duration{10, 20, 40, 80, 80, 80}
	seen := map[time.Duration]bool{}
	for i, s := range steps {
		d := b.Next()
		if d <= 0 || d > s*time.Millisecond {
			t.Fatalf("wait %d is %v, want (0, %v]", i, d, s*time.Millisecond)
		}
		seen[d] = true
	}
	if len(seen) < 4 {
		t.Fatalf("waits are not jittered: %v", seen)
	}
	b.Reset()
	if d := b.Next(); d > 10*time.Millisecond {
		t.Fatalf("after Reset wait %v, want <= 10ms", d)
	}
	// Same seed, same waits.
	a1, a2 := New(time.Millisecond, time.Second, 7), New(time.Millisecond, time.Second, 7)
	for range 10 {
		if a1.Next() != a2.Next() {
			t.Fatal("waits are not a function of the seed")
		}
	}
}

func TestSleepStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if New(time.Hour, time.Hour, 1).Sleep(ctx) {
		t.Fatal("Sleep waited out an hour on a cancelled context")
	}
}
