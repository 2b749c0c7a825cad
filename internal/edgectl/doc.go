// Package edgectl implements the edgectl command tree with cobra, one file
// per verb. Commands write their results to cmd.OutOrStdout() and progress
// and diagnostics to cmd.ErrOrStderr(), so tests can drive them end to end.
package edgectl
