package fltest

import "github.com/edgesched/edgesched/internal/testutil/natstest"

// The embedded servers and connections of package natstest, under the
// names the federated tests use.
var (
	StartNATS = natstest.StartNATS
	RunServer = natstest.RunServer
	Connect   = natstest.Connect
)
