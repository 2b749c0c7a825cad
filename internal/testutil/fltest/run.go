package fltest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// RunBackground runs a component's Run until stop, which cancels its
// context and checks that Run returns context.Canceled within 5 s. The
// test's cleanup stops it too (once).
func RunBackground(t *testing.T, run func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("run: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Error("Run did not return within 5 s of its context's end")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
