package fltest

import (
	"testing"
	"time"
)

// Eventually is Poll every 20 ms.
func Eventually(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	Poll(t, 20*time.Millisecond, within, what, cond)
}

// Poll calls cond every interval until it holds, and fails the test
// naming what it waited for, with cond's last message, when within
// passes first.
func Poll(t testing.TB, every, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(every)
	}
	t.Fatalf("timed out after %v waiting for %s: %s", within, what, last)
}
