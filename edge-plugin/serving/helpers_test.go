package serving

import (
	"time"

	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
)

// The shared fixtures (package plugintest), by the names these tests use.
var nodeInfo = plugintest.NodeInfo
var k8sPod = plugintest.K8sPod

// telT0 is the tests' clock reading.
var telT0 = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
