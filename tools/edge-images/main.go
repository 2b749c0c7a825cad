// Command edge-images builds edgesched's OCI images (edge-agent,
// edge-scheduler, edge-coordinator, edgectl; linux/amd64, linux/arm64 and
// linux/arm/v7 for the agent) without a Docker daemon: `make images` runs
// it. See 'edge-images -h', internal/ociimage and docs/quickstart-k3s.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/edgesched/edgesched/internal/imagecmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := imagecmd.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
