package ratelog

import (
	"log/slog"
	"sync"
	"time"
)

// maxKeys bounds the keys remembered (keys are kinds of lines: a small
// set; should callers make them up without bound, the memory is reset).
const maxKeys = 1024

// Limiter writes a line of a given key at most once every period; the
// next line written says how many were left out meanwhile.
type Limiter struct {
	log    *slog.Logger
	period time.Duration
	now    func() time.Time
	mu     sync.Mutex
	last   map[string]time.Time
	quiet  map[string]int
}

// New returns a limiter writing to log at most once per key every
// period (on the wall clock: the log is for people).
func New(log *slog.Logger, period time.Duration) *Limiter {
	return &Limiter{log: log, period: period, now: time.Now, last: map[string]time.Time{}, quiet: map[string]int{}}
}

// Allow reports whether a line of key may be written now, and how many
// were left out since the last one written.
func (l *Limiter) Allow(key string) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if t, ok := l.last[key]; ok && now.Sub(t) < l.period {
		l.quiet[key]++
		return false, 0
	}
	if len(l.last) >= maxKeys {
		clear(l.last)
		clear(l.quiet)
	}
	n := l.quiet[key]
	delete(l.quiet, key)
	l.last[key] = now
	return true, n
}

// Warn logs msg at warning level unless a line of key was written less
// than a period ago; it adds "suppressed" with the count left out.
func (l *Limiter) Warn(key, msg string, args ...any) {
	ok, n := l.Allow(key)
	if !ok {
		return
	}
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	l.log.Warn(msg, args...)
}
