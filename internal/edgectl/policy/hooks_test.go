package policy

// Hooks for the external tests (package policy_test), which run edgectl's
// whole command tree and so cannot be in this package.

var ApplyPolicy = applyPolicy

type (
	CompiledPolicy = compiledPolicy
	DryRunOutput   = dryRunOutput
)
