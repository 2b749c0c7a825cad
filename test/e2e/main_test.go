package e2e

import (
	"os"
	"testing"
)

// TestMain runs the tests, or, when the test binary is started as
// "e2e.test chain-pod ...", one pod process of the observed call chain
// (chainpod_test.go): the chain test re-executes this binary so that the
// pods' traffic comes from processes of their own.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == chainPodCommand {
		os.Exit(runChainPod(os.Args[2:]))
	}
	os.Exit(m.Run())
}
