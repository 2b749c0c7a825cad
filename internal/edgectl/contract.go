package edgectl

import (
	"context"
	"io"

	"github.com/edgesched/edgesched/internal/cli"
)

// Execute runs edgectl with args (without the program name) and returns
// the process exit code (package cli: 0 success, 1 failure, 2 usage
// error). Errors go to stderr as "edgectl: ERROR", usage errors followed by
// where to find the command's help.
func Execute(ctx context.Context, opts Options, args []string, stdout, stderr io.Writer) int {
	return cli.Execute(ctx, NewRootCommand(opts), args, stdout, stderr)
}
