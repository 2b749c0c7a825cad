// Command edgectl operates edgesched: simulations, training, signed models,
// federated rounds and the fleet's keys. Exit codes: 0 success, 1 failure,
// 2 usage error (docs/cli.md).
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/edgesched/edgesched/internal/edgectl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	level := slog.LevelWarn
	if os.Getenv("EDGECTL_DEBUG") != "" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	code := edgectl.Execute(ctx, edgectl.Options{Logger: log}, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
