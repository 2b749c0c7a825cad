package auth_test

import "github.com/edgesched/edgesched/internal/edgectl/edgectltest"

// run executes edgectl's whole command tree with args (edgectltest.Run).
var run = edgectltest.Run
