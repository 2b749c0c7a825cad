// Package ratelog rate-limits repeated log lines: a full disk or a flood
// of junk must not fill a daemon's log with identical lines.
//
// A Limiter is safe for concurrent use; its zero value is not usable (see
// New).
package ratelog
