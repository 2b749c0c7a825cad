// Command edge-coordinator is the cloud side of edgesched's federated
// learning: it runs rounds over NATS, aggregates site updates, signs and
// publishes models. See 'edge-coordinator -h' and docs/federated.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/edgesched/edgesched/internal/coordcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := coordcmd.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
