package ratelog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestLimiter: on an injected clock, 100 lines of one key in a period
// write one; the next period's first line says 99 were left out; another
// key is limited on its own.
func TestLimiter(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), 10*time.Second)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return now }
	for range 100 {
		l.Warn("disk", "store failed")
	}
	l.Warn("junk", "refused")
	now = now.Add(10 * time.Second)
	l.Warn("disk", "store failed")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[2], "suppressed=99") || strings.Contains(lines[0], "suppressed") {
		t.Fatalf("lines:\n%s", buf.String())
	}
}
