// Package manpages writes edgectl's man pages (section 1) from its cobra
// command tree with github.com/spf13/cobra/doc: one page per command,
// edgectl.1, edgectl-sim.1, edgectl-model-quantize.1, ... `make man` runs
// ./internal/manpages/gen into bin/man. The daemons have no page: their
// help is -h (docs/cli.md).
//
// Write is safe for concurrent use with distinct directories.
package manpages
