package policy

// The internal tests' fixtures, for the external tests (package
// policy_test, which may import policy/nn).
var (
	TestEnv      = testEnv
	NewTestState = newTestState
)
