package quant

import "github.com/edgesched/edgesched/internal/testutil/modeltest"

// randomModel is modeltest.Random, benchRows modeltest.Rows and
// boundedModel modeltest.Bounded.
var (
	randomModel  = modeltest.Random
	benchRows    = modeltest.Rows
	boundedModel = modeltest.Bounded
)
