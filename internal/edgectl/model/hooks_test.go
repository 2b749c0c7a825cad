package model

// Hooks for the external tests (package model_test), which run edgectl's
// whole command tree and so cannot be in this package.

type BenchReport = benchReport
