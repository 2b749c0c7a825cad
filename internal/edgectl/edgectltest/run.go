package edgectltest

import (
	"bytes"
	"context"
	"testing"

	"github.com/edgesched/edgesched/internal/edgectl"
)

// Run executes edgectl's whole command tree (edgectl.NewRootCommand) with
// args and returns stdout, stderr and the error.
func Run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := edgectl.NewRootCommand(edgectl.Options{})
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}
