package coordinator

import (
	"sync"
	"time"
)

// limiter rate-limits repeated log lines: a line of a given key is
// written at most once every `every`, and the next one written says how
// many were left out meanwhile (a full disk or a flood of junk must not
// fill the log with identical lines). Safe for concurrent use.
type limiter struct {
	every time.Duration
	mu    sync.Mutex
	last  map[string]time.Time
	quiet map[string]int
}

// allow reports whether a line of key may be written now, and how many
// were suppressed since the last one written.
func (l *limiter) allow(key string, now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last, l.quiet = map[string]time.Time{}, map[string]int{}
	}
	if t, ok := l.last[key]; ok && now.Sub(t) < l.every {
		l.quiet[key]++
		return false, 0
	}
	if len(l.last) > 1024 { // keys are reasons and stages: a bounded set; never let it grow
		clear(l.last)
	}
	n := l.quiet[key]
	delete(l.quiet, key)
	l.last[key] = now
	return true, n
}

// logLimited logs msg at warning level, at most once per key every
// limiter.every (wall clock: the log is for people).
func (c *Coordinator) logLimited(key, msg string, args ...any) {
	ok, n := c.limiter.allow(key, time.Now())
	if !ok {
		return
	}
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	c.log.Warn(msg, args...)
}
