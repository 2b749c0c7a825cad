// Command chaos-agent is the chaos suite's site agent (package
// test/chaos/internal/chaosagent): the real FL client with its bbolt
// outbox, a synthetic trainer and a history file. SIGTERM or SIGINT stop
// it cleanly.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/edgesched/edgesched/test/chaos/internal/chaosagent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := chaosagent.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
