// Command edge-agent runs on every K3s node: it samples the node (eBPF
// probes with a /proc fallback), writes the telemetry annotation the
// edge-scheduler reads, and serves /metrics and /healthz. See
// 'edge-agent -h' and docs/agent.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/edgesched/edgesched/internal/agentcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := agentcmd.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
